package zookeeper_test

import (
	"testing"

	"github.com/fence-lock/fence/guard/zookeeper"
)

// BenchmarkWrite measures a write of one znode through the guard, next to
// the same write without it, on the same server and connection:
//
//   - Guarded: Apply with one set, by a holder whose token is the fence (the
//     guard reads the fence, then sends one multi: a version check of the
//     fence znode and the set).
//   - GuardedRising: the same with a new, higher token each time (the multi
//     sets the fence znode).
//   - BareMulti: a multi of the same set alone, unfenced.
//   - BareSet: a plain Set, unfenced.
func BenchmarkWrite(b *testing.B) {
	g, data := newGuard(b)
	ctx := b.Context()
	key := data + "/k"
	value := []byte("value")
	if _, err := g.Apply(ctx, "bench", 7, zookeeper.Create(key, value)); err != nil {
		b.Fatal(err)
	}
	b.Run("Guarded", func(b *testing.B) {
		tok, err := g.Fence(ctx, "bench") // the holder's: other runs raise it
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := g.Apply(ctx, "bench", tok, zookeeper.Set(key, value)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("GuardedRising", func(b *testing.B) {
		tok, err := g.Fence(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			tok++
			if _, err := g.Apply(ctx, "bench", tok, zookeeper.Set(key, value)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("BareMulti", func(b *testing.B) {
		for b.Loop() {
			if _, err := conn.Multi(zookeeper.Set(key, value)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("BareSet", func(b *testing.B) {
		for b.Loop() {
			if _, err := conn.Set(key, value, -1); err != nil {
				b.Fatal(err)
			}
		}
	})
}
