package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The redis-server processes that TestMain starts, shared by every test and
// benchmark: a plain server (each test gets a database of its own) and a
// one-node Redis Cluster holding all 16384 slots. Empty if redis-server is
// not on PATH.
var (
	serverAddr  string
	clusterAddr string
	nextDB      atomic.Int32
)

// databases is how many numbered databases the plain server has: one per
// test that asks for a client, with room to spare.
const databases = 1024

// requireServers is the environment variable that CI sets to make a missing
// redis-server fail the tests instead of skipping them.
const requireServers = "FENCE_REQUIRE_SERVERS"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		// Each test skips, or fails under FENCE_REQUIRE_SERVERS=1.
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "fence-redis-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "redis tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	plain, err := startServer(bin, filepath.Join(dir, "plain"), false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "redis tests: starting redis-server:", err)
		return 1
	}
	defer plain.stop()
	cluster, err := startServer(bin, filepath.Join(dir, "cluster"), true)
	if err != nil {
		fmt.Fprintln(os.Stderr, "redis tests: starting a one-node Redis Cluster:", err)
		return 1
	}
	defer cluster.stop()
	serverAddr, clusterAddr = plain.addr, cluster.addr
	return m.Run()
}

// needServer skips tb, or fails it under FENCE_REQUIRE_SERVERS=1, when
// TestMain found no redis-server.
func needServer(tb testing.TB) {
	tb.Helper()
	if serverAddr != "" {
		return
	}
	msg := "redis-server is not on PATH; install it (apt-get install redis-server) to run the Redis guard's tests"
	if os.Getenv(requireServers) == "1" {
		tb.Fatalf("%s (%s=1 makes this a failure)", msg, requireServers)
	}
	tb.Skip(msg)
}

// newClient returns a client of a database of its own on the plain server,
// closed at the end of tb.
func newClient(tb testing.TB) *goredis.Client {
	tb.Helper()
	needServer(tb)
	db := int(nextDB.Add(1))
	if db >= databases {
		tb.Fatalf("more than %d databases used; raise databases", databases)
	}
	c := goredis.NewClient(&goredis.Options{Addr: serverAddr, DB: db})
	tb.Cleanup(func() { c.Close() })
	return c
}

// newClusterClient returns a cluster client of the one-node cluster, emptied
// first, closed at the end of tb. Tests that use it must not run in parallel.
func newClusterClient(tb testing.TB) *goredis.ClusterClient {
	tb.Helper()
	needServer(tb)
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{clusterAddr}})
	tb.Cleanup(func() { c.Close() })
	if err := c.FlushAll(context.Background()).Err(); err != nil {
		tb.Fatalf("FLUSHALL: %v", err)
	}
	return c
}

type server struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// startServer starts redis-server on a free loopback port, with no
// persistence, in dir; with cluster, as a one-node cluster that serves every
// slot. It retries with another port if the one it picked was taken.
func startServer(bin, dir string, cluster bool) (*server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 {
		s, err := startServerOnce(bin, dir, cluster)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func startServerOnce(bin, dir string, cluster bool) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	conf := []string{
		fmt.Sprintf("port %d", port),
		"bind 127.0.0.1",
		fmt.Sprintf("dir %s", dir),
		`save ""`,
		"appendonly no",
		"daemonize no",
		fmt.Sprintf("databases %d", databases),
		"logfile redis.log",
	}
	if cluster {
		conf = append(conf,
			"cluster-enabled yes",
			"cluster-config-file nodes.conf",
			"cluster-announce-ip 127.0.0.1",
		)
	}
	confPath := filepath.Join(dir, "redis.conf")
	if err := os.WriteFile(confPath, []byte(strings.Join(conf, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, confPath)
	cmd.Dir = dir
	cmd.SysProcAttr = serverProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(cluster); err != nil {
		s.stop()
		log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		return nil, fmt.Errorf("%s: %w\n%s", s.addr, err, log)
	}
	return s, nil
}

// waitReady waits until the server answers PING and, for a cluster, until
// it serves every slot.
func (s *server) waitReady(cluster bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := goredis.NewClient(&goredis.Options{Addr: s.addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	poll := func(ok func() error) error {
		for {
			err := ok()
			if err == nil {
				return nil
			}
			select {
			case <-s.done:
				return errors.New("redis-server exited")
			case <-ctx.Done():
				return fmt.Errorf("not ready after 10s: %w", err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if err := poll(func() error { return c.Ping(ctx).Err() }); err != nil || !cluster {
		return err
	}
	if err := c.ClusterAddSlotsRange(ctx, 0, Slots-1).Err(); err != nil {
		return fmt.Errorf("CLUSTER ADDSLOTSRANGE: %w", err)
	}
	return poll(func() error {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && !strings.Contains(info, "cluster_state:ok") {
			err = errors.New("cluster_state is not ok")
		}
		return err
	})
}

func (s *server) stop() {
	s.cmd.Process.Kill()
	<-s.done
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
