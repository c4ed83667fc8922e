// Package admin is what fence migrate and fence bump do to a store: copy the
// embedded store into a shared one, and raise every token and the revision
// of a store restored from a backup. It works through package state's
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
		n.Resources++
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

// Bump raises every resource's last token by by and its fence to that token
// (ending every lease and lock-delay), and the store revision by by: run it
// on a store restored from a backup, before any server serves from it, with
// by larger than the number of grants (and writes) made after the backup was
// taken. It returns the number of resources bumped. It commits in batches:
// if it fails half-way, run it again (tokens only go up).
func Bump(ctx context.Context, db DB, by uint64) (int, error) {
	if by == 0 || by > uint64(fence.MaxToken) {
		return 0, fmt.Errorf("admin: bump by %d: want 1..%d", by, fence.MaxToken)
	}
	var names []string
	err := db.View(ctx, func(tx state.Tx) error {
		names = names[:0]
		return tx.Resources(func(name string, r state.Resource) error {
			if r.LastToken > fence.MaxToken-fence.Token(by) {
				return fmt.Errorf("%w: %q: bumping %d by %d passes %d", state.ErrTokensExhausted, name, r.LastToken, by, fence.MaxToken)
			}
			names = append(names, name)
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	b := &batcher{ctx: ctx, db: db}
	for _, name := range names {
		if err := b.add(0, func(tx state.Tx) error { return state.Bump(tx, name, fence.Token(by)) }); err != nil {
			return 0, err
		}
	}
	if err := b.add(0, func(tx state.Tx) error { return state.BumpRev(tx, fence.Rev(by)) }); err != nil {
		return 0, err
	}
	return len(names), b.flush()
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
