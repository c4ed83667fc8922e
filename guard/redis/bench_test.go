package redis

import (
	"context"
	"testing"
)

// BenchmarkGuard_Apply measures one fenced SET: the script, run by EVALSHA,
// with the holder's token equal to the fence (a holder writing again).
// Compare with BenchmarkUnfenced, a plain SET on the same server.
func BenchmarkGuard_Apply(b *testing.B) {
	c := newClient(b)
	g := NewGuard(c)
	ctx := context.Background()
	key, value := Key("bench", "k"), []byte("value")
	if err := g.Apply(ctx, "bench", 1, Set(key, value, 0)); err != nil { // loads the script
		b.Fatal(err)
	}
	for b.Loop() {
		if err := g.Apply(ctx, "bench", 1, Set(key, value, 0)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnfenced measures a plain SET, the baseline of BenchmarkGuard_Apply.
func BenchmarkUnfenced(b *testing.B) {
	c := newClient(b)
	ctx := context.Background()
	key, value := Key("bench", "k"), []byte("value")
	for b.Loop() {
		if err := c.Set(ctx, key, value, 0).Err(); err != nil {
			b.Fatal(err)
		}
	}
}
