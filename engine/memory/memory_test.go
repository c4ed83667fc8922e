package memory_test

import (
	"testing"

	"github.com/fence-lock/fence/engine/memory"
	"github.com/fence-lock/fence/fencetest"
)

func open(t *testing.T) fencetest.Backend { return memory.New() }

func TestStore(t *testing.T) { fencetest.TestStore(t, open) }

func TestLedger(t *testing.T) { fencetest.TestLedger(t, open) }
