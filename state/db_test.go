package state_test

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/state"
	"github.com/fence-lock/fence/wire"
)

// failing is an engine whose reads fail with readErr and whose commits
// fail with commitErr, as a replicated engine's do in a failover.
type failing struct{ readErr, commitErr error }

func (e failing) Update(ctx context.Context, fn func(tx state.Tx) error) error {
	if err := fn(state.NewOverlay(failingBase(e))); err != nil {
		return err
	}
	return e.commitErr
}

type failingBase failing

func (b failingBase) Resource(string) (state.Resource, error) { return state.Resource{}, b.readErr }
func (b failingBase) Entry(string, string) (state.Entry, bool, error) {
	return state.Entry{}, false, b.readErr
}
func (b failingBase) Rev() (fence.Rev, error)                            { return 0, b.readErr }
func (b failingBase) Resources(func(string, state.Resource) error) error { return b.readErr }

// TestDB_EngineFailuresAreUnavailable checks that an engine's failure whose
// outcome is certain (nothing applied) or that a read met is answered 503
// unavailable, which clients retry, and never 500 internal, which is for
// bugs: a PostgreSQL primary that dies answers "read only connection" and
// "unexpected EOF" for a moment before the leader steps down.
func TestDB_EngineFailuresAreUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		engine failing
		code   string
	}{
		{"CommitNotApplied", failing{commitErr: fmt.Errorf("postgres: commit: %w: read only connection", state.ErrNotApplied)}, "unavailable"},
		{"ReadFailed", failing{readErr: fmt.Errorf("postgres: get: %w", io.ErrUnexpectedEOF)}, "unavailable"},
		{"TooLarge", failing{commitErr: fmt.Errorf("etcd: %w: %w", state.ErrNotApplied, fence.ErrTooLarge)}, "too_large"},
		{"Deposed", failing{commitErr: state.ErrDeposed}, "not_leader"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := state.NewDB("test", tc.engine)
			ctx := t.Context()
			_, err := db.Grant(ctx, "r", "h", time.Second, time.Now().Add(time.Second))
			if got := wire.CodeOf(err).Code; got != tc.code {
				t.Fatalf("Grant: %v: code %s, want %s", err, got, tc.code)
			}
			if tc.code == "not_leader" {
				return // the DB is out of service now
			}
			_, err = db.Fence(ctx, "r")
			if got := wire.CodeOf(err).Code; got != tc.code {
				t.Fatalf("Fence: %v: code %s, want %s", err, got, tc.code)
			}
		})
	}
}
