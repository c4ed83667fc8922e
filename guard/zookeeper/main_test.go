package zookeeper_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/fence-lock/fence/internal/tools/testserver"
)

// The tests share one ZooKeeper server, started by TestMain with
// internal/tools/testserver (Debian's zookeeper) on a free port of 127.0.0.1, and
// one connection to it. Each test works under a root znode of its own.

var (
	server   *testserver.ZooKeeper
	conn     *zk.Conn
	noServer error // why there is no server: testserver.ErrNotInstalled, or a failed start
	rootN    atomic.Int64
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := testserver.MkdirTemp("fence-zookeeper-")
	if err == nil {
		server, err = testserver.StartZooKeeper(dir)
	}
	if err == nil {
		conn, err = connect()
	}
	noServer = err
	if err != nil && flag.Lookup("test.skip").Value.String() == "" {
		// The examples need the server, and an example can neither skip
		// nor fail itself: the tests skip or fail (testConn) instead.
		fmt.Fprintf(os.Stderr, "zookeeper tests: skipping the examples: %v\n", err)
		flag.Set("test.skip", "^Example")
	}
	code := m.Run()
	if conn != nil {
		conn.Close()
	}
	if server != nil {
		server.Close()
	}
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// connect opens a new session with the test server and waits until it has
// one.
func connect() (*zk.Conn, error) {
	c, events, err := zk.Connect([]string{server.Addr}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		return nil, fmt.Errorf("zk.Connect: %w", err)
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() { // drain: the channel is buffered, and the client blocks on a full one
					for range events {
					}
				}()
				return c, nil
			}
		case <-timeout:
			c.Close()
			return nil, fmt.Errorf("zookeeper: no session with %s after 30s", server.Addr)
		}
	}
}

// quiet is a zk.Logger that drops the client's log lines (reconnections,
// closed sessions): the tests check errors instead.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// testConn returns the shared connection. It skips the test when ZooKeeper
// is not installed, unless FENCE_REQUIRE_SERVERS=1, and fails it when the
// server did not start.
func testConn(tb testing.TB) *zk.Conn {
	tb.Helper()
	if noServer == nil {
		return conn
	}
	testserver.Require(tb, noServer)
	return nil
}

// newRoot returns a fresh znode path under which one test keeps its fences
// and data; nothing is created yet.
func newRoot(tb testing.TB) string {
	tb.Helper()
	testConn(tb)
	return fmt.Sprintf("/fence-test/t%d", rootN.Add(1))
}

// servers returns the address of the test server, for the examples.
func servers() []string { return []string{server.Addr} }

// removeTree deletes path and every znode under it, if it exists.
func removeTree(c *zk.Conn, path string) error {
	children, _, err := c.Children(path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, child := range children {
		if err := removeTree(c, path+"/"+child); err != nil {
			return err
		}
	}
	if err := c.Delete(path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}
