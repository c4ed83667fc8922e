package enginebench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/bolt"
	"github.com/fence-lock/fence/engine/journal"
)

// engine is an embedded engine under test: fence's state on it.
type engine struct {
	name string
	open func(b *testing.B, dir string) (backend, func())
}

// backend is what the benchmark calls.
type backend interface {
	fence.Store
	fence.Ledger
}

var engines = []engine{
	{"bbolt", func(b *testing.B, dir string) (backend, func()) {
		db, err := bolt.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		return db, func() { db.Close() }
	}},
	{"pebble", func(b *testing.B, dir string) (backend, func()) {
		db, err := openPebble(dir)
		if err != nil {
			b.Fatal(err)
		}
		return db, func() { db.Close() }
	}},
	{"journal", func(b *testing.B, dir string) (backend, func()) {
		db, err := journal.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		return db, func() { db.Close() }
	}},
}

// BenchmarkCommit measures one Put (a fenced write: the resource's record,
// the entry and the revision, made durable) per op, from 1, 16 and 64
// goroutines, each on its own resource. The fdatasync baseline is the
// machine's floor: one 64-byte overwrite of a preallocated file and one
// fdatasync per op, one goroutine.
func BenchmarkCommit(b *testing.B) {
	b.Run("fdatasync", func(b *testing.B) {
		f, err := os.OpenFile(filepath.Join(b.TempDir(), "f"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(64 << 20); err != nil {
			b.Fatal(err)
		}
		f.Sync()
		buf := make([]byte, 64)
		b.ResetTimer()
		for i := range b.N {
			if _, err := f.WriteAt(buf, int64(i%(1<<20))*64); err != nil {
				b.Fatal(err)
			}
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, e := range engines {
		for _, conc := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("%s/clients=%d", e.name, conc), func(b *testing.B) {
				benchPuts(b, e, conc)
			})
		}
	}
}

func benchPuts(b *testing.B, e engine, conc int) {
	ctx := context.Background()
	db, closeDB := e.open(b, b.TempDir())
	defer closeDB()
	tokens := make([]fence.Token, conc)
	for i := range tokens {
		tok, err := db.Grant(ctx, fmt.Sprint("r", i), "h", time.Hour, time.Now().Add(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		tokens[i] = tok
	}
	value := make([]byte, 64)
	var next atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for c := range conc {
		wg.Go(func() {
			res := fmt.Sprint("r", c)
			for next.Add(1) <= int64(b.N) {
				if _, err := db.Put(ctx, res, "k", value, tokens[c], fence.Cond{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "changes/s")
}
