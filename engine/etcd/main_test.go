package etcd_test

import (
	"os"
	"testing"
)

// TestMain stops the etcd cluster the tests start on first use.
func TestMain(m *testing.M) {
	code := m.Run()
	stopCluster()
	os.Exit(code)
}
