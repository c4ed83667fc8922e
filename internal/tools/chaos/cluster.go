package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fence-lock/fence/internal/tools/chaos/proxy"
	"github.com/fence-lock/fence/internal/tools/testserver"
	"github.com/fence-lock/fence/wire"
)

// Engines that Config.Cluster names.
const (
	ClusterEtcd     = "etcd"     // a 3-member etcd cluster
	ClusterPostgres = "postgres" // a PostgreSQL primary with a synchronous standby
)

// ClusterServers is how many fence servers a cluster run starts.
const ClusterServers = 3

// defaultElectionTTL is the servers' election TTL when Config.ElectionTTL is
// 0: etcd.DefaultElectionTTL and postgres.DefaultElectionTTL.
const defaultElectionTTL = 2 * time.Second

// clusterFaults are the fault kinds of a cluster run, in the order of the
// docs; they are its default.
var clusterFaults = []string{FaultPause, FaultNet, FaultLeaderKill, FaultLeaderPause, FaultEngineKill, FaultEngineNet}

// DefaultFaults returns the faults a run injects unless told otherwise:
// pause, kill, net, bitflip and lose-unsynced on one server; with a
// cluster ("etcd" or "postgres"), pause, net, leader-kill, leader-pause,
// engine-kill and engine-net.
func DefaultFaults(cluster string) []string {
	if cluster != "" {
		return append([]string(nil), clusterFaults...)
	}
	return []string{FaultPause, FaultKill, FaultNet, FaultBitflip, FaultLoseUnsynced}
}

// isClusterFault reports whether kind needs a cluster.
func isClusterFault(kind string) bool {
	switch kind {
	case FaultLeaderKill, FaultLeaderPause, FaultEngineKill, FaultEngineNet, FaultPartition:
		return true
	}
	return false
}

// cluster is the system under test of a cluster run: a replicated engine,
// ClusterServers fence servers, and a chaos proxy between each server and
// each node of the engine (engine-net acts on a node's, partition on some
// servers' to some nodes).
// Only the run's goroutine uses it, but for the servers' log readers.
type cluster struct {
	kind        string
	dir         string        // everything of the cluster; removed by close
	electionTTL time.Duration // the servers' election TTL
	log         *slog.Logger

	etcd *testserver.Etcd
	pg   *testserver.Postgres

	nodes   []string         // the engine's nodes: etcd1.. or primary, standby1
	proxies [][]*proxy.Proxy // engine proxies: [node][server], nodes in the order of nodes
	servers []*fenceServer
}

// startCluster starts the engine of cfg.Cluster, its proxies and the fence
// servers, and returns once one of the servers leads. On error it has
// stopped and removed everything it started.
func startCluster(ctx context.Context, cfg Config) (c *cluster, err error) {
	dir, err := testserver.MkdirTemp("fence-chaos-")
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	cl := &cluster{kind: cfg.Cluster, dir: dir, electionTTL: cfg.electionTTL(), log: cfg.Log}
	c = cl
	defer func() {
		if err != nil {
			cl.close() // c is nil already when an error is returned
			c = nil
		}
	}()
	var addrs []string // the engine's nodes, host:port
	switch cfg.Cluster {
	case ClusterEtcd:
		if c.etcd, err = testserver.StartEtcd(dir, 3); err != nil {
			return nil, fmt.Errorf("chaos: starting etcd: %w", err)
		}
		for _, m := range c.etcd.Members {
			c.nodes = append(c.nodes, m.Name)
			addrs = append(addrs, strings.TrimPrefix(m.ClientURL, "http://"))
		}
	case ClusterPostgres:
		if c.pg, err = testserver.StartPostgres(dir, testserver.PostgresOptions{Standby: true}); err != nil {
			return nil, fmt.Errorf("chaos: starting postgres: %w", err)
		}
		for _, n := range []*testserver.PGNode{c.pg.Primary, c.pg.Standby} {
			c.nodes = append(c.nodes, n.Name)
			addrs = append(addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(n.Port)))
		}
	}
	proxied := make([][]string, ClusterServers) // each server's addresses of the nodes
	for _, a := range addrs {
		var ps []*proxy.Proxy
		for i := range ClusterServers {
			p, err := proxy.New("127.0.0.1:0", a)
			if err != nil {
				return nil, fmt.Errorf("chaos: engine proxy: %w", err)
			}
			ps = append(ps, p)
			proxied[i] = append(proxied[i], p.Addr())
		}
		c.proxies = append(c.proxies, ps)
	}
	var args []string
	if cfg.ElectionTTL > 0 {
		args = append(args, "--election-ttl", cfg.ElectionTTL.String())
	}
	if cfg.UnsafeEpoch {
		args = append(args, "--unsafe-skip-epoch-check")
	}
	logDir := cfg.LogDir
	if logDir == "" {
		logDir = dir
	} else if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	// The harness's own connections to ask who leads: a paused server
	// holds none of the clients'.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	for i := range ClusterServers {
		s := &fenceServer{name: "fence" + strconv.Itoa(i+1), binary: cfg.Binary, log: cfg.Log, hc: hc}
		s.dir = filepath.Join(dir, s.name)
		s.args = append([]string{"--store", storeURL(cfg.Cluster, proxied[i])}, append(slices.Clone(args), cfg.clockArgs(s.dir)...)...)
		s.logPath = filepath.Join(logDir, s.name+".log")
		if err := os.Mkdir(s.dir, 0o700); err != nil {
			return nil, fmt.Errorf("chaos: %w", err)
		}
		c.servers = append(c.servers, s)
		if err := s.startFirst(); err != nil {
			return nil, err
		}
	}
	lctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if _, _, ok := c.leader(lctx, -1); !ok {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("chaos: %w", ctx.Err())
		}
		return nil, fmt.Errorf("chaos: no fence server leads 60 s after the start (logs in %s)", logDir)
	}
	return c, nil
}

// setUpCluster starts the cluster, and a proxy in front of each fence
// server for the clients pinned to it (the net fault acts on those).
func (r *run) setUpCluster(ctx context.Context) error {
	cl, err := startCluster(ctx, r.cfg)
	if err != nil {
		return err
	}
	r.cl = cl
	for _, s := range cl.servers {
		p, err := proxy.New("127.0.0.1:0", strings.TrimPrefix(s.url(), "http://"))
		if err != nil {
			return err
		}
		r.proxies = append(r.proxies, p)
	}
	// The final reads go to the servers themselves, with failover.
	r.storeURL = cl.urls()
	return nil
}

// storeURL returns the --store URL of an engine whose nodes are at addrs
// (host:port each, the proxies).
func storeURL(kind string, addrs []string) string {
	switch kind {
	case ClusterEtcd:
		return "etcd://" + strings.Join(addrs, ",") + "/fence-chaos/"
	case ClusterPostgres:
		// target_session_attrs: the node that takes writes, the standby once
		// promoted; connect_timeout bounds a connection into a black-hole.
		return "postgres://postgres@" + strings.Join(addrs, ",") +
			"/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2"
	}
	return ""
}

// pin returns the fence server that client i talks to.
func pin(client, servers int) int { return client % servers }

// urls returns the servers' base URLs, comma-separated, as a client with
// failover takes them.
func (c *cluster) urls() string {
	us := make([]string, len(c.servers))
	for i, s := range c.servers {
		us[i] = s.url()
	}
	return strings.Join(us, ",")
}

// leader waits until a running, unpaused server other than except (-1:
// none) says it leads, and returns it with its status; false if none does
// before ctx ends. Of two that say so (an old leader that has not noticed
// yet), the higher epoch wins.
func (c *cluster) leader(ctx context.Context, except int) (int, wire.ClusterStatus, bool) {
	for {
		sts := make([]*wire.ClusterStatus, len(c.servers))
		var wg sync.WaitGroup
		for i, s := range c.servers {
			if i == except || !s.answering() {
				continue
			}
			wg.Go(func() {
				if st, err := s.status(ctx); err == nil {
					sts[i] = &st
				}
			})
		}
		wg.Wait()
		if i := pickLeader(sts); i >= 0 {
			return i, *sts[i], true
		}
		if !sleep(ctx, 50*time.Millisecond) {
			return -1, wire.ClusterStatus{}, false
		}
	}
}

// pickLeader returns the index of the status that says it leads, with the
// highest epoch; -1 if none does. nil entries did not answer.
func pickLeader(sts []*wire.ClusterStatus) int {
	best := -1
	for i, st := range sts {
		if st == nil || st.Role != wire.RoleLeader {
			continue
		}
		if best < 0 || st.Epoch > sts[best].Epoch {
			best = i
		}
	}
	return best
}

// ensureUp starts the servers that are down and resumes those paused: a
// fault that failed half-way leaves none behind for the final reads.
func (c *cluster) ensureUp() {
	for _, s := range c.servers {
		s.resume()
		if !s.running() {
			if err := s.restart(); err != nil {
				c.log.Error("restarting a fence server failed", "server", s.name, "error", err)
			}
		}
	}
}

// close stops the servers, the proxies and the engine, and removes the
// cluster's directory.
func (c *cluster) close() {
	var wg sync.WaitGroup
	for _, s := range c.servers {
		wg.Go(s.stop)
	}
	wg.Wait()
	for _, ps := range c.proxies {
		for _, p := range ps {
			p.Close()
		}
	}
	if c.etcd != nil {
		c.etcd.Close()
	}
	if c.pg != nil {
		c.pg.Close()
	}
	os.RemoveAll(c.dir)
}

// fenceServer is one `fence serve --store` child of a cluster run, on a
// fixed loopback port: its advertise URL, where the others, its client
// proxy and its restarts expect it.
type fenceServer struct {
	name    string   // fence1, fence2, ...
	binary  string   // the fence binary
	args    []string // serve's arguments after --listen
	dir     string   // its working directory
	logPath string   // its stderr, appended to across restarts
	log     *slog.Logger
	hc      *http.Client // for status
	port    int

	mu     sync.Mutex // guards the fields below
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
	paused bool
}

func (s *fenceServer) url() string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// startFirst starts the server on a free port, and on another if that one
// was taken meanwhile, twice.
func (s *fenceServer) startFirst() error {
	var err error
	for range 3 {
		if s.port, err = freePort(); err != nil {
			return err
		}
		if err = s.start(); err == nil {
			return nil
		}
	}
	return err
}

// restart starts the server again on its port, retrying a little while the
// port is still held.
func (s *fenceServer) restart() error {
	var err error
	for range 3 {
		if err = s.start(); err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return err
}

// start runs fence serve and returns once it serves (it serves as a
// standby until it wins an election).
func (s *fenceServer) start() error {
	cmd := exec.Command(s.binary, append([]string{"serve", "--listen", strings.TrimPrefix(s.url(), "http://")}, s.args...)...)
	cmd.Dir = s.dir
	cmd.Env = serverEnv()
	logf, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	// A pipe of our own rather than StderrPipe: Wait would close that
	// before every line is read.
	pr, pw, err := os.Pipe()
	if err != nil {
		logf.Close()
		return fmt.Errorf("chaos: %w", err)
	}
	cmd.Stderr = pw
	err = testserver.StartChild(cmd)
	pw.Close()
	if err != nil {
		pr.Close()
		logf.Close()
		return fmt.Errorf("chaos: starting %s: %w", s.name, err)
	}
	exited := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.exited, s.paused = cmd, exited, false
	s.mu.Unlock()
	readyC := make(chan struct{})
	go s.readLog(pr, logf, readyC)
	go func() { cmd.Wait(); close(exited) }()
	select {
	case <-readyC:
		return nil
	case <-exited:
		return fmt.Errorf("chaos: %s exited at start:\n%s", s.name, logTail(s.logPath))
	case <-time.After(30 * time.Second):
		s.kill()
		return fmt.Errorf("chaos: %s did not serve within 30 s:\n%s", s.name, logTail(s.logPath))
	}
}

// logTail returns the last lines of a server's log, for errors: the log
// may be in a directory that the cleanup removes.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}

// readLog copies the server's log lines to its log file, closes readyC at
// "fence serving", and passes on the changes of leadership.
func (s *fenceServer) readLog(r, logf *os.File, readyC chan struct{}) {
	defer r.Close()
	defer logf.Close()
	ready := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		logf.Write(append(line, '\n'))
		var rec struct {
			Msg    string `json:"msg"`
			Epoch  uint64 `json:"epoch"`
			Reason string `json:"reason"`
		}
		if json.Unmarshal(line, &rec) != nil {
			continue
		}
		switch rec.Msg {
		case "fence serving":
			if !ready {
				ready = true
				close(readyC)
			}
		case "leading":
			s.log.Info(fmt.Sprintf("%s leads, epoch %d", s.name, rec.Epoch))
		case "stepped down":
			s.log.Info(fmt.Sprintf("%s stepped down, epoch %d", s.name, rec.Epoch), "reason", rec.Reason)
		}
	}
}

// serverEnv is the servers' environment: this process's without FENCE_*,
// whose twins of serve's flags (FENCE_AUTH_FILE, FENCE_STORE, ...) would
// change the servers under test.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FENCE_") {
			env = append(env, kv)
		}
	}
	return env
}

func (s *fenceServer) proc() (*exec.Cmd, chan struct{}, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd, s.exited, s.paused
}

// running reports whether the server's process is alive (paused or not).
func (s *fenceServer) running() bool {
	cmd, exited, _ := s.proc()
	if cmd == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// answering reports whether the server is running and not paused.
func (s *fenceServer) answering() bool {
	_, _, paused := s.proc()
	return s.running() && !paused
}

// kill sends SIGKILL and waits until the process has exited.
func (s *fenceServer) kill() {
	cmd, exited, _ := s.proc()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGKILL) // an error means it is gone already
	<-exited
	s.mu.Lock()
	s.paused = false
	s.mu.Unlock()
}

// pause stops the server with SIGSTOP.
func (s *fenceServer) pause() error {
	cmd, _, _ := s.proc()
	if cmd == nil || !s.running() {
		return fmt.Errorf("chaos: pause %s: not running", s.name)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("chaos: pause %s: %w", s.name, err)
	}
	s.mu.Lock()
	s.paused = true
	s.mu.Unlock()
	return nil
}

// resume continues a paused server with SIGCONT; it does nothing if the
// server is not paused.
func (s *fenceServer) resume() {
	cmd, _, paused := s.proc()
	if cmd == nil || !paused {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT)
	s.mu.Lock()
	s.paused = false
	s.mu.Unlock()
}

// stop asks the server to shut down gracefully, and kills it after a grace.
func (s *fenceServer) stop() {
	cmd, exited, _ := s.proc()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		s.kill()
	}
}

// status reads GET /v1/cluster from the server.
func (s *fenceServer) status(ctx context.Context) (wire.ClusterStatus, error) {
	var st wire.ClusterStatus
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url()+"/v1/cluster", nil)
	if err != nil {
		return st, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("chaos: %s: GET /v1/cluster: %s", s.name, resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// freePort returns a TCP port that was free on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("chaos: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// errNoLeader is logged when a fault finds no leader to hit.
var errNoLeader = errors.New("no fence server leads")
