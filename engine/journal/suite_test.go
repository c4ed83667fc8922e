package journal_test

import (
	"testing"

	"github.com/fence-lock/fence/engine/journal"
	"github.com/fence-lock/fence/fencetest"
)

// small are options that make the kill -9 suite roll segments and snapshot.
var small = journal.Options{SegmentSize: 16 << 10, SnapshotEvery: 48 << 10}

func openT(t *testing.T, dir string, opts journal.Options) *journal.DB {
	t.Helper()
	db, err := journal.OpenOptions(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestStore(t *testing.T) {
	fencetest.TestStore(t, func(t *testing.T) fencetest.Backend { return openT(t, t.TempDir(), journal.Options{}) })
}

func TestLedger(t *testing.T) {
	fencetest.TestLedger(t, func(t *testing.T) fencetest.Backend { return openT(t, t.TempDir(), journal.Options{}) })
}

// TestStore_SmallSegments runs the store suite with segments and snapshots
// small enough that its commits (values of 1 MiB among them) cross them.
func TestStore_SmallSegments(t *testing.T) {
	opts := journal.Options{SegmentSize: 5 << 20, SnapshotEvery: 3 << 20}
	fencetest.TestStore(t, func(t *testing.T) fencetest.Backend { return openT(t, t.TempDir(), opts) })
}

// TestKill9 checks that what the journal acknowledged survives kill -9,
// with segments and snapshots small enough to roll and snapshot meanwhile.
func TestKill9(t *testing.T) {
	fencetest.TestKill9(t, func(dir string) (fencetest.Backend, func() error, error) {
		db, err := journal.OpenOptions(dir, small)
		if err != nil {
			return nil, nil, err
		}
		return db, db.Close, nil
	})
}
