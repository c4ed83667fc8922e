// Package admin is what fence migrate and fence bump do to a store: copy the
// embedded store into a shared one, and raise the token floor and the
// revision of a store restored from a backup. It works through package state's
// rules and commits, in batches small enough for every engine.
package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/state"
)

// batch bounds one commit of a tool: below etcd's default limits of 128
// operations and 1.5 MiB.
const (
	batchItems = 40
	batchBytes = 1 << 20
)

// DB is state that runs transactions: a *state.DB, or an engine that embeds
// one (*journal.DB, *bolt.DB, *memory.DB).
type DB interface {
	View(ctx context.Context, fn func(tx state.Tx) error) error
	Update(ctx context.Context, fn func(tx state.Tx) error) error
}

// Exporter is a store that can be copied: a *journal.DB or a *bolt.DB.
type Exporter interface {
	Export(ctx context.Context, resource func(name string, r state.Resource) error, entry func(resource, key string, e state.Entry) error) (fence.Rev, error)
}

// Counts is what a migration copied.
type Counts struct {
	Resources int       // resources with state (tokens, fences, leases)
	Leases    int       // of them, with a lease recorded
	Entries   int       // stored values
	Rev       fence.Rev // the store revision
}

// ErrNotEmpty means the target of a migration already holds state.
var ErrNotEmpty = errors.New("admin: the target store is not empty")

// Migrate copies everything in src (an embedded store) into dst, which must
// be empty: every resource's last token, fence, lease and lock-delay, every
// entry with its revision and token, and the store revision. Tokens and
// revisions are the same in dst, so they only go up from there. It commits
// in batches: if it fails half-way, dst holds part of src, and the
// migration must be redone into an empty store.
func Migrate(ctx context.Context, src Exporter, dst DB) (Counts, error) {
	var n Counts
	err := dst.View(ctx, func(tx state.Tx) error {
		rev, err := tx.Rev()
		if err != nil {
			return err
		}
		resources := 0
		if err := tx.Resources(func(string, state.Resource) error { resources++; return nil }); err != nil {
			return err
		}
		if rev != 0 || resources != 0 {
			return fmt.Errorf("%w: it holds %d resources at revision %d; migrate into a new prefix or database", ErrNotEmpty, resources, rev)
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	b := &batcher{ctx: ctx, db: dst}
	n.Rev, err = src.Export(ctx, func(name string, r state.Resource) error {
		if name != state.FloorName { // the store's token floor is copied, not counted
			n.Resources++
		}
		if r.LeaseToken != 0 {
			n.Leases++
		}
		return b.add(0, func(tx state.Tx) error { return tx.SetResource(name, r) })
	}, func(resource, key string, e state.Entry) error {
		n.Entries++
		e.Value = slices.Clone(e.Value) // valid only during the call
		return b.add(len(e.Value), func(tx state.Tx) error { return tx.SetEntry(resource, key, e) })
	})
	if err != nil {
		return n, err
	}
	rev := n.Rev
	if err := b.add(0, func(tx state.Tx) error { return tx.SetRev(rev) }); err != nil {
		return n, err
	}
	return n, b.flush()
}

// Bump sets the store's token floor (see state.RaiseFloor) by above the
// highest token it knows of, on any resource, and raises the store revision
// by by, in one commit: run it on a store restored from a backup, before any
// server serves from it, with by larger than the number of grants of any
// one resource (and of writes) made after the backup was taken. Every lease
// and lock-delay ends, and the next grant of every resource, known to the
// restored store or created after the backup, gets a token above any issued
// before the restore. It returns the new floor and the number of resources
// the store holds records of.
func Bump(ctx context.Context, db DB, by uint64) (floor fence.Token, resources int, err error) {
	if by == 0 || by > uint64(fence.MaxToken) {
		return 0, 0, fmt.Errorf("admin: bump by %d: want 1..%d", by, fence.MaxToken)
	}
	err = db.Update(ctx, func(tx state.Tx) error {
		resources = 0
		if err := tx.Resources(func(string, state.Resource) error { resources++; return nil }); err != nil {
			return err
		}
		floor, err = state.RaiseFloor(tx, fence.Token(by))
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	return floor, resources, nil
}

// batcher commits changes in transactions of at most batchItems changes and
// about batchBytes bytes.
type batcher struct {
	ctx   context.Context
	db    DB
	fns   []func(state.Tx) error
	bytes int
}

func (b *batcher) add(size int, fn func(state.Tx) error) error {
	if len(b.fns) > 0 && (len(b.fns) >= batchItems || b.bytes+size > batchBytes) {
		if err := b.flush(); err != nil {
			return err
		}
	}
	b.fns = append(b.fns, fn)
	b.bytes += size
	return nil
}

func (b *batcher) flush() error {
	fns := b.fns
	b.fns, b.bytes = nil, 0
	if len(fns) == 0 {
		return nil
	}
	return b.db.Update(b.ctx, func(tx state.Tx) error {
		for _, fn := range fns {
			if err := fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
}
