package postgres_test

import (
	"os"
	"testing"
)

// TestMain stops the PostgreSQL pair the tests start on first use.
func TestMain(m *testing.M) {
	code := m.Run()
	stopReplicated()
	os.Exit(code)
}
