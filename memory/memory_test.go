package memory_test

import (
	"testing"

	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/memory"
)

func open(t *testing.T) fencetest.Backend { return memory.New() }

func TestStore(t *testing.T) { fencetest.TestStore(t, open) }

func TestLedger(t *testing.T) { fencetest.TestLedger(t, open) }
