package bolt_test

import (
	"testing"

	"github.com/fence-lock/fence/engine/bolt"
	"github.com/fence-lock/fence/fencetest"
)

// TestKill9 checks that what bolt acknowledged survives kill -9 (fencetest.TestKill9).
func TestKill9(t *testing.T) { fencetest.TestKill9(t, openKill9) }

func openKill9(dir string) (fencetest.Backend, func() error, error) {
	db, err := bolt.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	return db, db.Close, nil
}
