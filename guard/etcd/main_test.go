package etcd_test

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/fence-lock/fence/internal/tools/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The one-member etcd that TestMain starts, shared by every test: its client
// URLs, and a client of it. It is an etcd process of its own, not a server
// embedded in the test binary: the embedded server's goroutines raced with
// each other under -race, outside any test, and failed the package at
// random.
var (
	endpoints []string
	cli       *clientv3.Client
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := testserver.MkdirTemp("fence-etcd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	e, err := testserver.StartEtcd(dir, 1)
	if errors.Is(err, testserver.ErrNotInstalled) && os.Getenv("FENCE_REQUIRE_SERVERS") != "1" {
		fmt.Fprintf(os.Stderr, "etcd tests: skipped: %v (FENCE_REQUIRE_SERVERS=1 makes this a failure)\n", err)
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd tests: starting etcd:", err)
		return 1
	}
	defer e.Close()
	endpoints = e.Endpoints()
	cli, err = clientv3.New(clientConfig(clientv3.Config{}))
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd tests: clientv3.New:", err)
		return 1
	}
	defer cli.Close()
	return m.Run()
}

// clientConfig returns cfg with the shared etcd's endpoints.
func clientConfig(cfg clientv3.Config) clientv3.Config {
	cfg.Endpoints = endpoints
	cfg.DialTimeout = 5 * time.Second
	cfg.Logger = zap.NewNop() // else the client logs failed calls on stderr
	return cfg
}

// newClient returns a new client of the shared etcd, configured by cfg and
// closed when t ends. Most tests share cli instead.
func newClient(t testing.TB, cfg clientv3.Config) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientConfig(cfg))
	if err != nil {
		t.Fatalf("clientv3.New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
