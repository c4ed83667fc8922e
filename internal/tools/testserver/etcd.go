package testserver

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Raft timing of every member, in milliseconds: etcd's defaults, kept on
// purpose. On a loaded 2-core machine they elected a new leader within 2 s of
// a leader's kill in every run of this package's tests; shorter timeouts
// would make spurious elections more likely while fsync is slow.
const (
	etcdHeartbeatMS = 100
	etcdElectionMS  = 1000
)

// statusTimeout bounds one call to one member in Leader and WaitHealthy, so
// that a paused member (which accepts connections and never answers) costs a
// second, not the caller's whole deadline.
const statusTimeout = time.Second

// Etcd is an etcd cluster started by StartEtcd: one etcd process per member.
// Its methods are safe for concurrent use.
type Etcd struct {
	// Members are the cluster's members, named etcd1 ... etcdN, in the order
	// of the cluster's --initial-cluster.
	Members []*EtcdMember
}

// EtcdMember is one member of an Etcd cluster. Its methods are safe for
// concurrent use, and each may be called again: Kill of a killed member,
// Start of a running one, Pause of a paused one do nothing.
type EtcdMember struct {
	// Name is the member's --name: etcd1, etcd2, ...
	Name string
	// ClientURL is where the member serves clients: http://127.0.0.1:port.
	ClientURL string
	// PeerURL is where the member talks to its peers: http://127.0.0.1:port.
	PeerURL string
	// Dir is the member's directory: data in Dir/data, log in Dir/etcd.log.
	Dir string

	bin        string
	args       []string
	clientPort int

	opMu sync.Mutex // serializes Start, Kill, Pause and Resume; held across their waits, so that a Kill during a Start waits for it

	mu     sync.Mutex // guards the fields below; held only briefly
	proc   *process   // nil before the first Start and after Kill
	paused bool
	cli    *clientv3.Client // to this member only; made by client
	closed bool             // by Etcd.Close: no more Start, no more client
}

// StartEtcd starts an n-member etcd cluster (n >= 1), each member its own
// etcd process on two free ports of 127.0.0.1, with its data and log under
// dir/etcdI (dir must exist, dir/etcdI must not), and returns when a quorum
// answers a linearizable read. The binary is the etcd on PATH, else /usr/bin/etcd
// (Debian's etcd-server, etcd 3.4); without one, the error wraps
// ErrNotInstalled. The members keep etcd's defaults, fsync included. A
// member that fails to start (a port taken meanwhile) makes StartEtcd try
// again with new ports, twice. The caller must Close the cluster; dir stays
// the caller's.
func StartEtcd(dir string, n int) (*Etcd, error) {
	if n < 1 {
		return nil, fmt.Errorf("testserver: etcd: %d members, want at least 1", n)
	}
	bin, err := etcdBinary()
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil { // the members run in their own directories
		return nil, fmt.Errorf("testserver: etcd: %w", err)
	}
	token := "fence-testserver-" + rand.Text() // a cluster of its own, even if a peer URL is reused
	for attempt := 1; ; attempt++ {
		e, retry, err := startEtcd(bin, dir, n, token+"-"+strconv.Itoa(attempt))
		if err == nil {
			return e, nil
		}
		if !retry || attempt == 3 {
			return nil, err
		}
	}
}

// etcdBinary finds the etcd binary.
func etcdBinary() (string, error) {
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	const debian = "/usr/bin/etcd"
	if fi, err := os.Stat(debian); err == nil && fi.Mode().IsRegular() {
		return debian, nil
	}
	return "", fmt.Errorf("testserver: etcd not on PATH nor at /usr/bin/etcd (apt-get install etcd-server): %w", ErrNotInstalled)
}

// startEtcd makes one attempt of StartEtcd. retry says whether a member
// exited while starting, which another set of ports may cure.
func startEtcd(bin, dir string, n int, token string) (e *Etcd, retry bool, err error) {
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, false, err
	}
	e = &Etcd{}
	var cluster []string
	for i := range n {
		m := &EtcdMember{
			Name:       "etcd" + strconv.Itoa(i+1),
			ClientURL:  fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			PeerURL:    fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			bin:        bin,
			clientPort: ports[2*i],
		}
		m.Dir = filepath.Join(dir, m.Name)
		e.Members = append(e.Members, m)
		cluster = append(cluster, m.Name+"="+m.PeerURL)
	}
	var made []string // member directories made by this attempt
	defer func() {
		if err != nil {
			e.Close()
			for _, d := range made {
				os.RemoveAll(d)
			}
		}
	}()
	for _, m := range e.Members {
		if err := os.Mkdir(m.Dir, 0o700); err != nil {
			return nil, false, fmt.Errorf("testserver: etcd %s: %w", m.Name, err)
		}
		made = append(made, m.Dir)
		m.args = []string{
			"--name", m.Name,
			"--data-dir", filepath.Join(m.Dir, "data"),
			"--listen-client-urls", m.ClientURL,
			"--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", m.PeerURL,
			"--initial-advertise-peer-urls", m.PeerURL,
			"--initial-cluster", strings.Join(cluster, ","),
			"--initial-cluster-state", "new", // ignored on a restart, which reads the cluster from the data dir
			"--initial-cluster-token", token,
			"--heartbeat-interval", strconv.Itoa(etcdHeartbeatMS),
			"--election-timeout", strconv.Itoa(etcdElectionMS),
			// What fence's deployment guide asks for, so that a txn of the
			// API's largest body (4 MiB) fits in one etcd request.
			"--max-request-bytes", strconv.Itoa(10 << 20),
			"--logger", "zap", // etcd 3.4's default, capnslog, is deprecated
			"--log-outputs", "stderr",
		}
		if err := m.Start(); err != nil {
			return nil, errors.Is(err, ErrNotRunning), err
		}
	}
	// No member serves clients until the cluster has a quorum, so wait for
	// all, watching for one that exits (its log says why).
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		for _, m := range e.Members {
			if m.PID() == 0 {
				return nil, true, fmt.Errorf("testserver: etcd %s exited at start: %w\n%s", m.Name, ErrNotRunning, m.logTail())
			}
		}
		hctx, hcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := e.WaitHealthy(hctx)
		hcancel()
		if err == nil {
			return e, false, nil
		}
		if ctx.Err() != nil {
			var logs []string
			for _, m := range e.Members {
				logs = append(logs, m.Name+":\n"+m.logTail())
			}
			return nil, false, fmt.Errorf("testserver: etcd cluster not healthy after %v: %w\n%s", startTimeout, err, strings.Join(logs, "\n"))
		}
	}
}

// Endpoints returns the client URLs of all members, "http://127.0.0.1:port".
func (e *Etcd) Endpoints() []string {
	urls := make([]string, len(e.Members))
	for i, m := range e.Members {
		urls[i] = m.ClientURL
	}
	return urls
}

// Leader returns the member that is the Raft leader: a running, unpaused
// member whose Status names itself leader, in a term no other member has
// passed. While there is none (an election is under way, or no quorum), it
// asks again until ctx is done.
func (e *Etcd) Leader(ctx context.Context) (*EtcdMember, error) {
	for {
		m, err := e.leader(ctx)
		if err == nil {
			return m, nil
		}
		if werr := sleepCtx(ctx, 50*time.Millisecond); werr != nil {
			return nil, fmt.Errorf("testserver: etcd leader: %w (last: %v)", werr, err)
		}
	}
}

// leader asks every running, unpaused member for its status, once.
func (e *Etcd) leader(ctx context.Context) (*EtcdMember, error) {
	status := make([]*clientv3.StatusResponse, len(e.Members))
	errs := make([]error, len(e.Members))
	var wg sync.WaitGroup
	for i, m := range e.Members {
		if !m.answering() {
			continue
		}
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, statusTimeout)
			defer cancel()
			status[i], errs[i] = m.Status(sctx)
		})
	}
	wg.Wait()
	var leader *EtcdMember
	var leaderTerm, maxTerm uint64
	for i, st := range status {
		if st == nil {
			continue
		}
		maxTerm = max(maxTerm, st.RaftTerm)
		if st.Leader != 0 && st.Leader == st.Header.GetMemberId() && st.RaftTerm >= leaderTerm {
			leader, leaderTerm = e.Members[i], st.RaftTerm
		}
	}
	if leader == nil || leaderTerm < maxTerm { // a leader of an older term is deposed
		return nil, errors.Join(append([]error{errors.New("no member is leader")}, errs...)...)
	}
	return leader, nil
}

// WaitHealthy waits until a quorum answers a linearizable read: until a
// running, unpaused member answers a Get, which it can only with a leader
// and a quorum behind it. It returns an error when ctx is done first.
func (e *Etcd) WaitHealthy(ctx context.Context) error {
	for {
		err := e.healthy(ctx)
		if err == nil {
			return nil
		}
		if werr := sleepCtx(ctx, 50*time.Millisecond); werr != nil {
			return fmt.Errorf("testserver: etcd not healthy: %w (last: %v)", werr, err)
		}
	}
}

// healthy asks every running, unpaused member for a linearizable read, once.
func (e *Etcd) healthy(ctx context.Context) error {
	okC := make(chan struct{}, len(e.Members))
	errs := make([]error, len(e.Members))
	var wg sync.WaitGroup
	for i, m := range e.Members {
		if !m.answering() {
			errs[i] = fmt.Errorf("%s: %w", m.Name, ErrNotRunning)
			continue
		}
		wg.Go(func() {
			gctx, cancel := context.WithTimeout(ctx, statusTimeout)
			defer cancel()
			cli, err := m.client()
			if err == nil {
				_, err = cli.Get(gctx, "fence-testserver-health") // linearizable: the default
			}
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", m.Name, err)
				return
			}
			okC <- struct{}{}
		})
	}
	wg.Wait()
	if len(okC) > 0 {
		return nil
	}
	return errors.Join(errs...)
}

// Close kills every member and waits for their processes to exit; Start
// fails after it. It removes nothing: dir is the caller's.
func (e *Etcd) Close() error {
	var errs []error
	for _, m := range e.Members {
		m.mu.Lock()
		m.closed = true
		m.mu.Unlock()
		errs = append(errs, m.Kill())
		m.mu.Lock()
		cli := m.cli
		m.cli = nil
		m.mu.Unlock()
		if cli != nil {
			cli.Close() // its error only says the connection was already gone
		}
	}
	return errors.Join(errs...)
}

// Start starts the member's process, on its data dir and ports, and returns
// when it listens for clients (it serves them once it has rejoined a
// quorum). It does nothing if the member is running. An error wraps
// ErrNotRunning if the process exited at once, and includes its last log
// lines. If another process took one of the member's ports meanwhile, etcd
// exits soon after Start returns, and PID returns 0. It fails after the
// cluster's Close.
func (m *EtcdMember) Start() error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	running, closed := m.proc != nil && !m.proc.exited(), m.closed
	m.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("testserver: start etcd %s: %w", m.Name, errClosed)
	case running:
		return nil
	}
	logPath := filepath.Join(m.Dir, "etcd.log")
	f, err := openLog(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(m.bin, m.args...)
	cmd.Dir = m.Dir
	cmd.Env = childEnv("ETCD_")
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr(nil)
	p, err := spawn(cmd)
	f.Close() // the child has its own descriptor
	if err != nil {
		return fmt.Errorf("testserver: etcd %s: %w", m.Name, err)
	}
	m.mu.Lock()
	m.proc, m.paused = p, false
	m.mu.Unlock()
	// etcd binds its listeners before it replays its log and joins the
	// cluster, so a listening client port means the process is up.
	deadline := time.Now().Add(startTimeout)
	for !listening(m.clientPort) {
		if p.exited() {
			return fmt.Errorf("testserver: etcd %s exited at start (%v): %w\n%s", m.Name, p.err, ErrNotRunning, m.logTail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testserver: etcd %s not listening on %s after %v\n%s", m.Name, m.ClientURL, startTimeout, m.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// Kill sends SIGKILL to the member's process and waits until it has exited.
// It does nothing if the member is not running.
func (m *EtcdMember) Kill() error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	if p == nil {
		return nil
	}
	if err := p.kill(); err != nil {
		return fmt.Errorf("testserver: etcd %s: %w", m.Name, err)
	}
	m.mu.Lock()
	m.proc, m.paused = nil, false
	m.mu.Unlock()
	return nil
}

// Pause stops the member's process with SIGSTOP, and returns once it is
// stopped. It returns an error wrapping ErrNotRunning if the member is not
// running.
func (m *EtcdMember) Pause() error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	p, paused := m.proc, m.paused
	m.mu.Unlock()
	switch {
	case p == nil || p.exited():
		return fmt.Errorf("testserver: pause etcd %s: %w", m.Name, ErrNotRunning)
	case paused:
		return nil
	}
	if err := pauseProcess(p); err != nil {
		return fmt.Errorf("testserver: pause etcd %s: %w", m.Name, err)
	}
	m.mu.Lock()
	m.paused = true
	m.mu.Unlock()
	return nil
}

// Resume continues a paused member with SIGCONT. It does nothing if the
// member is not paused.
func (m *EtcdMember) Resume() error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	p, paused := m.proc, m.paused
	m.mu.Unlock()
	if p == nil || !paused {
		return nil
	}
	if err := p.signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("testserver: resume etcd %s: %w", m.Name, err)
	}
	m.mu.Lock()
	m.paused = false
	m.mu.Unlock()
	return nil
}

// PID returns the pid of the member's process, or 0 if it is not running.
func (m *EtcdMember) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil || m.proc.exited() {
		return 0
	}
	return m.proc.pid
}

// Status asks the member alone for its status (clientv3 Maintenance.Status):
// its member ID in Header.MemberId, the leader it knows, its Raft term and
// index. A paused member does not answer: it returns when ctx is done.
func (m *EtcdMember) Status(ctx context.Context) (*clientv3.StatusResponse, error) {
	cli, err := m.client()
	if err != nil {
		return nil, err
	}
	st, err := cli.Status(ctx, m.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("testserver: etcd %s status: %w", m.Name, err)
	}
	return st, nil
}

// answering reports whether the member is running and not paused.
func (m *EtcdMember) answering() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc != nil && !m.proc.exited() && !m.paused
}

// client returns a client of this member alone, made on first use. It
// dials lazily, so it survives the member's restarts.
func (m *EtcdMember) client() (*clientv3.Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cli != nil {
		return m.cli, nil
	}
	if m.closed {
		return nil, fmt.Errorf("testserver: etcd %s: %w", m.Name, errClosed)
	}
	// clientv3.New does no I/O here: without DialTimeout it connects later.
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{m.ClientURL},
		Logger:    zap.NewNop(), // else it logs every failed call on stderr
	})
	if err != nil {
		return nil, fmt.Errorf("testserver: etcd %s client: %w", m.Name, err)
	}
	m.cli = cli
	return cli, nil
}

func (m *EtcdMember) logTail() string {
	return logTail(filepath.Join(m.Dir, "etcd.log"), 20)
}

// pauseProcess stops p with SIGSTOP and waits until the kernel has stopped
// it.
func pauseProcess(p *process) error {
	_, _, start, err := procStat(p.pid)
	if err != nil {
		return err
	}
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return waitState(ctx, []procID{{pid: p.pid, start: start}}, 'T')
}
