package chaos

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/httpapi"
	"github.com/fence-lock/fence/internal/chaos/history"
	"github.com/fence-lock/fence/internal/chaos/proxy"
	"github.com/fence-lock/fence/internal/testserver"
)

// Fault kinds.
const (
	FaultPause = "pause" // SIGSTOP a client between its acquire and its write, for longer than its TTL
	FaultKill  = "kill"  // kill -9 the server and restart it on the same data (embedded server only)
	FaultNet   = "net"   // latency, resets, refused connections and black-holes through the proxy

	// The faults of the embedded server's journal.
	FaultBitflip      = "bitflip"       // kill -9, flip a byte of a log segment or snapshot, restart: refused (then the flip is undone) or intact
	FaultLoseUnsynced = "lose-unsynced" // kill -9 and lose what the journal wrote past its last sync, as a power cut would
	FaultRestore      = "restore"       // back the store up (kill -9, copy, restart); the next time restore that backup and fence bump it

	// FaultClockSkew steps one fence server's wall clock ahead, strobes it
	// and sets it right, through fence serve --test-clock-file.
	FaultClockSkew = "clock-skew"

	// The faults of a cluster (Config.Cluster).
	FaultLeaderKill  = "leader-kill"  // kill -9 the leading fence server; restart it on its port after a while
	FaultLeaderPause = "leader-pause" // SIGSTOP the leading fence server past the election TTL, then SIGCONT
	FaultEngineKill  = "engine-kill"  // kill -9 etcd's Raft leader and restart it; postgres: kill the primary, promote the standby (once)
	FaultEngineNet   = "engine-net"   // net's faults between the fence servers and the engine's nodes, through proxies
	FaultPartition   = "partition"    // partial partitions between fence servers and engine nodes: one server cut from a majority, one node cut from every server
)

// DefaultFaultEvery is the mean quiet gap between two faults, unless
// Config.FaultEvery says otherwise: each gap is drawn from 0.4 to 1.6 times
// it, 0.5 to 2 s.
const DefaultFaultEvery = 1250 * time.Millisecond

// AuthTokenEnv is the environment variable that carries Config.AuthToken to
// the client processes (not a flag: flags show in ps).
const AuthTokenEnv = "FENCE_CHAOS_AUTH_TOKEN"

// GuardEnv is the environment variable that carries Config.Guard to the
// client processes (it may hold a password).
const GuardEnv = "FENCE_CHAOS_GUARD"

// Config configures a run.
type Config struct {
	Binary string // the fence binary: clients and the embedded server run it
	// Addr is a running fence server's base URL, http:// or https://; ""
	// runs an embedded one.
	Addr string
	// History is the file the run writes its history to, as JSON lines
	// (package history), as the operations arrive: the run holds none of
	// them in memory. Required.
	History    string
	Duration   time.Duration // how long the workload runs
	Clients    int           // client processes
	Resources  int           // resources
	Keys       int           // keys per resource
	TTL        time.Duration // lease TTL of the clients
	Seed       uint64        // the fault schedule and the workload derive from it
	Faults     []string      // kinds to inject: the Fault constants (see DefaultFaults)
	TxnPercent int           // share of client cycles that are two-resource transactions
	Think      time.Duration // mean pause between a client's cycles (the checker's work grows fast with history size)
	// FaultEvery is the mean quiet gap between the end of a fault and the
	// start of the next; each gap is drawn uniformly from 0.4 to 1.6 times
	// it. 0 means DefaultFaultEvery.
	FaultEvery time.Duration
	// Unsafe runs the storage on a store that does not check fences; with
	// Guard, the clients write to PostgreSQL without the guard.
	Unsafe bool
	// UnsafeJournal is the negative control of the journal's faults (the
	// embedded server only): the server acknowledges before it syncs, so
	// lose-unsynced loses acknowledged changes, and a journal that
	// bitflip damaged is cut at the damage, without a bump, as a journal
	// that took damage for the end of its log did, and a restore is not
	// bumped. The checkers must find violations.
	UnsafeJournal bool
	// UnsafeClock is the negative control of clock-skew: the servers time
	// their leases by the wall clock that the fault skews, so that its step
	// ahead ends leases early. The checkers must find violations.
	UnsafeClock bool
	Log         *slog.Logger // progress: one line per fault; nil: none
	// Progress, when not nil, receives a snapshot of the run every
	// ProgressEvery, on a goroutine of Run's, from the start of the
	// workload until the history is complete (after the final reads);
	// never after Run returns. A slow Progress delays the next snapshot,
	// not the run.
	Progress func(Progress)
	// ProgressEvery is the interval between two snapshots; 0 means 1s.
	ProgressEvery time.Duration

	// AuthToken is the bearer token sent to the fence server at Addr by
	// the clients and the harness; "" sends none.
	AuthToken string
	// TLS is the harness's TLS configuration for an https Addr (its final
	// reads); nil: the system's roots. CACert, ClientCert and ClientKey are
	// the PEM files the clients load for theirs (the caller builds TLS from
	// the same files); "" each: none. The clients reach the server through
	// a proxy on loopback, and verify its certificate for Addr's host.
	TLS                           *tls.Config
	CACert, ClientCert, ClientKey string

	// Guard, a PostgreSQL connection string (pgx's: a URL or key=value
	// pairs), makes the clients write to that database through fence's
	// PostgreSQL guard (package postgres), with the tokens of the leases
	// they take from fence, instead of to fence's storage: the run creates
	// a fence table, a data table and a sequence of its own there, named
	// fence_chaos_<random>_..., and drops them at the end. The clients
	// reach the database through a proxy on loopback, which the net fault
	// acts on. "" (the default): fence's storage.
	Guard string

	// Cluster, ClusterEtcd or ClusterPostgres, makes the run start that
	// engine and ClusterServers fence servers on it, all on loopback, and
	// test them; "" (the default) tests one server (embedded, or Addr).
	Cluster string
	// ElectionTTL is the servers' --election-ttl, with Cluster; 0 (the
	// default) leaves theirs (2s). leader-pause outlasts it.
	ElectionTTL time.Duration
	// UnsafeEpoch starts the servers with --unsafe-skip-epoch-check, with
	// Cluster: a deposed leader's commits go through, and the checker must
	// find violations. The schedule then favours leader-pause.
	UnsafeEpoch bool
	// LogDir, with Cluster, receives the servers' logs (fence1.log ...),
	// which stay there; "" (the default): in the run's temporary
	// directory, removed at the end.
	LogDir string
}

// electionTTL returns the servers' election TTL: etcd's leases count whole
// seconds, at least 2 (as etcd.Store rounds it).
func (c *Config) electionTTL() time.Duration {
	d := c.ElectionTTL
	if d <= 0 {
		d = defaultElectionTTL
	}
	if c.Cluster == ClusterEtcd {
		d = max(2*time.Second, (d+time.Second-1)/time.Second*time.Second)
	}
	return d
}

// Validate checks c and fills defaults.
func (c *Config) Validate() error {
	if c.FaultEvery == 0 {
		c.FaultEvery = DefaultFaultEvery
	}
	switch {
	case c.Binary == "":
		return errors.New("chaos: no fence binary")
	case c.History == "":
		return errors.New("chaos: no history file")
	case c.Duration <= 0:
		return fmt.Errorf("chaos: duration must be positive, not %s", c.Duration)
	case c.Clients < 1 || c.Clients > 64:
		return fmt.Errorf("chaos: clients must be 1..64, not %d", c.Clients)
	case c.Resources < 1 || c.Resources > 1000:
		return fmt.Errorf("chaos: resources must be 1..1000, not %d", c.Resources)
	case c.TTL < 100*time.Millisecond || c.TTL > time.Minute:
		return fmt.Errorf("chaos: ttl must be 100ms..1m, not %s", c.TTL)
	case c.FaultEvery < 10*time.Millisecond || c.FaultEvery > time.Hour:
		return fmt.Errorf("chaos: fault-every must be 10ms..1h, not %s", c.FaultEvery)
	case c.FaultEvery*2/5 >= c.Duration && len(c.Faults) > 0:
		return fmt.Errorf("chaos: fault-every %s: its shortest gap, %s, is not shorter than the duration %s, so no fault would come (--faults '' runs none)", c.FaultEvery, c.FaultEvery*2/5, c.Duration)
	}
	if err := c.validateCluster(); err != nil {
		return err
	}
	if err := c.validateTarget(); err != nil {
		return err
	}
	for _, f := range c.Faults {
		switch {
		case f == FaultPause, f == FaultNet, f == FaultClockSkew:
		case f == FaultKill && c.Cluster != "":
			return errors.New("chaos: the kill fault restarts the embedded server, and --cluster has none; leader-kill is its twin in a cluster")
		case f == FaultKill, f == FaultBitflip, f == FaultLoseUnsynced, f == FaultRestore:
			if c.Addr != "" || c.Cluster != "" {
				return fmt.Errorf("chaos: the %s fault needs the embedded server (it kills and restarts it); drop it with --faults pause,net", f)
			}
		case isClusterFault(f):
			if c.Cluster == "" {
				return fmt.Errorf("chaos: the %s fault needs a cluster: add --cluster etcd or --cluster postgres", f)
			}
		default:
			return fmt.Errorf("chaos: unknown fault %q (want pause, kill, net, bitflip, lose-unsynced, restore, clock-skew; with --cluster pause, net, clock-skew, leader-kill, leader-pause, engine-kill, engine-net, partition)", f)
		}
	}
	if c.UnsafeJournal && (c.Addr != "" || c.Cluster != "" || !slices.Contains(c.Faults, FaultBitflip) && !slices.Contains(c.Faults, FaultLoseUnsynced) && !slices.Contains(c.Faults, FaultRestore)) {
		return errors.New("chaos: --unsafe-journal is the negative control of the embedded server's bitflip, lose-unsynced and restore faults: run it with one of them, without --addr and --cluster")
	}
	switch {
	case slices.Contains(c.Faults, FaultRestore) && (c.Guard != "" || c.Unsafe):
		return errors.New("chaos: the restore fault backs up and restores fence's own store, which --guard and --unsafe do not write to: drop restore")
	case slices.Contains(c.Faults, FaultClockSkew) && c.Addr != "":
		return errors.New("chaos: the clock-skew fault skews the clock of a server the run starts: drop --addr, or drop clock-skew")
	case c.UnsafeClock && !slices.Contains(c.Faults, FaultClockSkew):
		return errors.New("chaos: --unsafe-clock is the negative control of the clock-skew fault: run it with --faults clock-skew")
	}
	if c.Keys < 1 {
		c.Keys = 2
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// validateCluster checks the settings of a cluster run.
func (c *Config) validateCluster() error {
	switch {
	case c.Cluster != "" && c.Cluster != ClusterEtcd && c.Cluster != ClusterPostgres:
		return fmt.Errorf("chaos: cluster %q: want etcd or postgres", c.Cluster)
	case c.Cluster != "" && c.Addr != "":
		return errors.New("chaos: --cluster starts the servers it tests; drop --addr")
	case c.Cluster != "" && c.Unsafe:
		return errors.New("chaos: --unsafe replaces the storage that --cluster tests; the cluster's negative control is --unsafe-epoch")
	case c.Cluster == "" && c.UnsafeEpoch:
		return errors.New("chaos: --unsafe-epoch needs --cluster etcd or --cluster postgres")
	case c.Cluster == "" && c.ElectionTTL != 0:
		return errors.New("chaos: --election-ttl needs --cluster etcd or --cluster postgres")
	case c.ElectionTTL != 0 && (c.ElectionTTL < time.Second || c.ElectionTTL > time.Minute):
		return fmt.Errorf("chaos: election ttl must be 1s..1m, not %s", c.ElectionTTL)
	}
	return nil
}

// validateTarget checks Addr, the credentials and Guard.
func (c *Config) validateTarget() error {
	if c.Addr != "" {
		u, err := url.Parse(c.Addr)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("chaos: --addr %q: want http://host:port or https://host:port", c.Addr)
		}
	}
	remote := c.Addr != ""
	switch {
	case !remote && (c.AuthToken != "" || c.TLS != nil || c.CACert != "" || c.ClientCert != "" || c.ClientKey != ""):
		return errors.New("chaos: --auth-token, --cacert, --client-cert and --client-key are for a server at --addr; the embedded server and --cluster have no authentication and no TLS")
	case c.Guard != "" && c.Cluster != "":
		return errors.New("chaos: --guard takes the leases from one fence server (embedded, or --addr), not from --cluster")
	}
	if c.Guard != "" {
		if _, err := pgxpool.ParseConfig(c.Guard); err != nil {
			return fmt.Errorf("chaos: --guard: %w", err)
		}
	}
	return nil
}

// Result is what a run produced: where its history is, its faults and what
// the faults did.
type Result struct {
	History        string // Config.History
	Ops            int    // operations in the history
	Faults         []history.Fault
	PausesPastTTL  int // pauses that outlasted the client's TTL
	FencedByPauses int // writes fenced because their client had been paused past its TTL
	Duration       time.Duration
	ServerRestarts int // restarts of the embedded server (kill, bitflip, lose-unsynced, restore) or of a killed leader (leader-kill)
	// UnnamedRefusals counts the starts a bitflip made the server refuse
	// without naming the damaged file: an operator could not find it.
	UnnamedRefusals int
	Takeovers       int // leader-pauses during which another server took over
	// SkewedGrants counts the clock-skews during which grants were
	// acknowledged: leases that had to be timed across a step of the clock.
	SkewedGrants    int
	unknownAfterNet int
}

// Progress is a snapshot of a run under way, for Config.Progress.
type Progress struct {
	// Elapsed is the time since the workload started, and Remaining the
	// time left of Config.Duration: 0 once the workload ended, while the
	// clients stop and the harness reads the final values.
	Elapsed, Remaining time.Duration
	Ops                int            // operations in the history so far
	Errors             int            // of which failed or of unknown outcome (timeouts, resets, 5xx)
	Fenced             int            // writes and txns rejected as fenced
	Faults             map[string]int // faults injected so far, by kind (the run's own copy)
	Rate               float64        // operations per second since the previous snapshot
}

// FaultsBit reports whether the faults did something the checker could
// catch: a pause that outlasted its TTL, operations cut short by a kill
// (bitflip and lose-unsynced kill too) or a network fault, a leader
// replaced while it was paused, or grants made across a step of the clock.
func (r *Result) FaultsBit() bool {
	return r.PausesPastTTL > 0 || r.unknownAfterNet > 0 || r.ServerRestarts > 0 || r.Takeovers > 0 || r.SkewedGrants > 0
}

// Run runs the workload under faults and returns its history.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, start: time.Now(), rng: rand.New(rand.NewPCG(cfg.Seed, 0x6368616f73)), scheme: "http", grants: make(map[string][]grantMark)}
	defer r.cleanup()
	if err := r.openHistory(); err != nil {
		return nil, err
	}
	if err := r.setUp(ctx); err != nil {
		return nil, err
	}
	if err := r.startClients(); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	stopProgress := r.reportProgress(time.Now())
	defer stopProgress()
	r.injectFaults(runCtx, ctx)
	r.stopClients()
	if r.cl != nil {
		r.cl.ensureUp()
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if _, _, ok := r.cl.leader(lctx, -1); !ok && ctx.Err() == nil {
			r.cfg.Log.Warn("no fence server leads 30 s after the faults; the final reads will fail")
		}
		cancel()
	}
	if r.guard != nil {
		r.guard.finalReads(r)
	} else {
		r.finalReads()
	}
	stopProgress() // the history is complete: the last snapshot
	if err := r.closeHistory(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	herr := r.harnessErr
	r.mu.Unlock()
	if herr != nil {
		return nil, fmt.Errorf("chaos: %w (history %s)", herr, r.cfg.History)
	}
	return r.result()
}

// run is one run's moving parts.
type run struct {
	cfg   Config
	start time.Time
	rng   *rand.Rand

	dataDir   string
	server    *serverProcess // nil with cfg.Addr or cfg.Cluster
	cl        *cluster       // with cfg.Cluster
	scheme    string         // of the fence server's URL: http, or https with an https Addr
	keyPrefix string         // of the keys: "" on a new store, a run's own with Addr (see newKeyPrefix)
	target    string         // host:port of the fence server
	storeURL  string         // base URL of the storage, not through a proxy (for final reads)
	unsafeSrv *http.Server
	proxies   []*proxy.Proxy // lock service first; storage second in unsafe mode; with a cluster, one per fence server
	lockURL   string         // through the proxy
	storeProx string         // through the proxy

	guard *guardTarget // with cfg.Guard

	clients  []*exec.Cmd
	clientWG sync.WaitGroup
	pauseC   chan pausePoint
	writeC   chan writePoint // write points, for leader-pause

	histFile *os.File
	histBuf  *bufio.Writer
	hist     *history.Writer // to histBuf; safe for concurrent use

	mu      sync.Mutex // guards the fields below
	histErr error      // the first error writing the history
	// harnessErr is the first failure of the harness's own (a restore
	// that could not be done): the run returns it instead of a history.
	harnessErr error
	nops       int // ops written to the history
	nerrors    int // of which failed or of unknown outcome
	nfenced    int // of which writes and txns rejected as fenced
	grants     map[string][]grantMark
	faults     []history.Fault
	pauses     []pauseRecord
	restarts   int
	takeovers  int
	// The journal's faults: the ops written when the server last started,
	// and its refusals to start that did not name the damaged file.
	opsAtStart  int
	badRefusals int
	backup      string // the journal's backup that the next restore restores; "" none
	harnessIDs  int64  // IDs given to the harness's own ops
	// skewedGrants counts the clock-skews during which grants were
	// acknowledged; grantsAcked counts the acknowledged grants.
	skewedGrants, grantsAcked int
	netWindows                [][2]int64 // of net faults, and of a cluster's faults
}

// grantMark is an acknowledged grant, the nth op of the history: leader-pause
// looks for a grant after a point of the run.
type grantMark struct {
	n     int
	token uint64
}

// maxGrantMarks bounds the grants kept per resource: the last few.
const maxGrantMarks = 64

// openHistory creates the history file.
func (r *run) openHistory() error {
	f, err := os.Create(r.cfg.History)
	if err != nil {
		return fmt.Errorf("chaos: history: %w", err)
	}
	r.histFile, r.histBuf = f, bufio.NewWriterSize(f, 256<<10)
	r.hist = history.NewWriter(r.histBuf)
	return nil
}

// closeHistory flushes and closes the history file, once nothing writes
// to it any more.
func (r *run) closeHistory() error {
	if r.histFile == nil {
		return nil
	}
	err := r.histBuf.Flush()
	if cerr := r.histFile.Close(); err == nil {
		err = cerr
	}
	r.histFile = nil
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		err = r.histErr
	}
	if err != nil {
		return fmt.Errorf("chaos: history %s: %w", r.cfg.History, err)
	}
	return nil
}

// record appends op to the history.
func (r *run) record(op history.Op) {
	err := r.hist.WriteOp(op)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil && r.histErr == nil {
		r.histErr = err
	}
	r.nops++
	switch {
	case op.Outcome == history.Fail || op.Outcome == history.Unknown:
		r.nerrors++
	case op.Outcome == history.Fenced && op.Mutates():
		r.nfenced++
	}
	if op.Kind == history.KindAcquire && op.Outcome == history.OK {
		r.grantsAcked++
		g := append(r.grants[op.Resource], grantMark{r.nops, op.Token})
		if len(g) > maxGrantMarks {
			g = slices.Delete(g, 0, len(g)-maxGrantMarks)
		}
		r.grants[op.Resource] = g
	}
}

// reportProgress sends Config.Progress a snapshot every
// Config.ProgressEvery, from a goroutine, the workload having started at
// began, until the function it returns is called; that sends the last
// snapshot and waits for the goroutine to end. It does nothing without
// Config.Progress.
func (r *run) reportProgress(began time.Time) (stop func()) {
	if r.cfg.Progress == nil {
		return func() {}
	}
	every := r.cfg.ProgressEvery
	if every <= 0 {
		every = time.Second
	}
	stopC, doneC := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(doneC)
		tick := time.NewTicker(every)
		defer tick.Stop()
		lastOps, lastAt := 0, began
		for {
			stopping := false
			select {
			case <-tick.C:
			case <-stopC:
				stopping = true
			}
			now := time.Now()
			p := r.snapshot(began, now)
			if dt := now.Sub(lastAt).Seconds(); dt > 0 {
				p.Rate = float64(p.Ops-lastOps) / dt
			}
			lastOps, lastAt = p.Ops, now
			r.cfg.Progress(p) // not under r.mu: it may write to a terminal
			if stopping {
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stopC)
			<-doneC
		})
	}
}

// snapshot returns the run's progress at now, the workload having started
// at began; its Rate is for the caller to fill.
func (r *run) snapshot(began, now time.Time) Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := Progress{Elapsed: now.Sub(began), Ops: r.nops, Errors: r.nerrors, Fenced: r.nfenced, Faults: make(map[string]int)}
	p.Remaining = max(r.cfg.Duration-p.Elapsed, 0)
	for _, f := range r.faults {
		p.Faults[f.Kind]++
	}
	return p
}

type pauseRecord struct {
	client     int
	resource   string
	token      uint64
	start, end int64
}

func (r *run) now() int64 { return time.Since(r.start).Nanoseconds() }

func (r *run) setUp(ctx context.Context) error {
	if r.cfg.Cluster != "" {
		return r.setUpCluster(ctx)
	}
	if r.cfg.Addr == "" {
		dir, err := os.MkdirTemp("", "fence-chaos-")
		if err != nil {
			return err
		}
		r.dataDir = dir
		if r.server, err = startServer(r.cfg.Binary, dir, append(r.cfg.journalArgs(dir), r.cfg.clockArgs(dir)...)...); err != nil {
			return err
		}
		r.target = r.server.addr
	} else {
		u, _ := url.Parse(r.cfg.Addr) // checked by Validate
		r.scheme, r.target = u.Scheme, u.Host
		if u.Port() == "" {
			r.target = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
		}
	}
	lockProxy, err := proxy.New("127.0.0.1:0", r.target)
	if err != nil {
		return err
	}
	r.proxies = append(r.proxies, lockProxy)
	r.lockURL = r.scheme + "://" + lockProxy.Addr()
	r.storeURL, r.storeProx = r.scheme+"://"+r.target, r.lockURL
	if r.cfg.Addr != "" {
		r.keyPrefix = newKeyPrefix(r.cfg)
		if r.keyPrefix != "" {
			r.cfg.Log.Info("this run's keys, apart from earlier runs'", "keys", fmt.Sprintf("%sk0..%sk%d", r.keyPrefix, r.keyPrefix, r.cfg.Keys-1))
		}
		if err := r.preflight(ctx); err != nil {
			return err
		}
	}
	if r.cfg.Guard != "" {
		g, err := setUpGuard(ctx, r.cfg)
		if err != nil {
			return err
		}
		r.guard = g
		r.proxies = append(r.proxies, g.proxy)
		return nil
	}
	if r.cfg.Unsafe {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		api := httpapi.NewServer(noLocker{}, newUnsafeStore())
		api.Logger = slog.New(slog.DiscardHandler)
		r.unsafeSrv = &http.Server{Handler: api, ReadHeaderTimeout: 5 * time.Second}
		go r.unsafeSrv.Serve(ln)
		storeProxy, err := proxy.New("127.0.0.1:0", ln.Addr().String())
		if err != nil {
			return err
		}
		r.proxies = append(r.proxies, storeProxy)
		r.storeURL, r.storeProx = "http://"+ln.Addr().String(), "http://"+storeProxy.Addr()
	}
	return nil
}

// newKeyPrefix returns the prefix of the keys a run writes: "" on the store
// the run starts itself, which is new; on a server at Addr, which keeps
// what earlier runs wrote (and the checker expects the keys to start
// absent), the run's own, random: "3f2a9c1b/" makes 3f2a9c1b/k0. Every call
// returns a new one.
func newKeyPrefix(cfg Config) string {
	if cfg.Addr == "" || cfg.Guard != "" {
		return ""
	}
	return fmt.Sprintf("%08x/", rand.Uint32())
}

// preflight reads a key from the server at Addr, with the run's TLS
// settings and token, so that a server that cannot be reached or refuses
// the credentials stops the run before it starts rather than fills its
// history with failures. With Guard the clients only lock: a token that
// may not read is fine.
func (r *run) preflight(ctx context.Context) error {
	api, err := client.NewAPI(r.storeURL)
	if err != nil {
		return fmt.Errorf("chaos: --addr: %w", err)
	}
	api.Retries, api.AuthToken = 0, r.cfg.AuthToken
	api.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	if r.cfg.TLS != nil {
		api.HTTPClient.Transport = &http.Transport{TLSClientConfig: r.cfg.TLS.Clone()}
	}
	need := fmt.Sprintf("the run needs lock, read and write on r0..r%d", r.cfg.Resources-1)
	if r.cfg.Guard != "" {
		need = fmt.Sprintf("the run needs lock on r0..r%d", r.cfg.Resources-1)
	}
	_, err = api.Get(ctx, "r0", r.keyPrefix+"k0")
	switch {
	case err == nil, errors.Is(err, fence.ErrNotFound):
	case errors.Is(err, fence.ErrForbidden) && r.cfg.Guard != "":
	case errors.Is(err, fence.ErrForbidden):
		return fmt.Errorf("chaos: the server at %s: %w (%s)", r.cfg.Addr, err, need)
	default:
		return fmt.Errorf("chaos: the server at %s: %w", r.cfg.Addr, err)
	}
	// The lock permission, without taking a lock: the release of a lease
	// that no one holds is refused, and changes nothing.
	if err := api.Release(ctx, "r0", fence.MaxToken); errors.Is(err, fence.ErrForbidden) {
		return fmt.Errorf("chaos: the server at %s: %w (%s)", r.cfg.Addr, err, need)
	}
	return nil
}

// noLocker serves no lock calls: in unsafe mode the locks come from fence.
type noLocker struct{ fence.Locker }

func (r *run) startClients() error {
	r.pauseC = make(chan pausePoint, r.cfg.Clients)
	r.writeC = make(chan writePoint, r.cfg.Clients)
	timeout := clientTimeout(r.cfg)
	for i := range r.cfg.Clients {
		lockURL, storeURL := r.lockURL, r.storeProx
		if r.cl != nil {
			// Each client talks to one server, through that server's
			// proxy, and not to all of them with failover (which the
			// client could do): a client pinned to the leader keeps
			// sending it requests while leader-pause holds it frozen, so
			// that it wakes with stale requests queued, which is what
			// that fault tests. A client pinned to a standby is served
			// by forwarding.
			lockURL = "http://" + r.proxies[pin(i, len(r.proxies))].Addr()
			storeURL = lockURL
		}
		args := []string{"chaos-worker",
			"--client", strconv.Itoa(i), "--lock-addr", lockURL, "--store-addr", storeURL,
			"--resources", strconv.Itoa(r.cfg.Resources), "--keys", strconv.Itoa(r.cfg.Keys),
			"--ttl", r.cfg.TTL.String(), "--timeout", timeout.String(), "--txn-percent", strconv.Itoa(r.cfg.TxnPercent),
			"--think", r.cfg.Think.String(), "--key-prefix", r.keyPrefix,
			"--seed", strconv.FormatUint(r.cfg.Seed, 10), "--start", strconv.FormatInt(r.start.UnixNano(), 10)}
		args = append(args, r.workerTargetArgs()...)
		cmd := exec.Command(r.cfg.Binary, args...)
		cmd.Env = r.workerEnv()
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		cmd.Stderr = io.Discard
		start := cmd.Start
		if r.cl != nil {
			start = func() error { return testserver.StartChild(cmd) } // dies with the harness, like the servers
		}
		if err := start(); err != nil {
			return fmt.Errorf("chaos: starting client %d: %w", i, err)
		}
		r.clients = append(r.clients, cmd)
		r.clientWG.Add(1)
		go func() {
			defer r.clientWG.Done()
			r.readClient(stdout)
		}()
	}
	return nil
}

// workerTargetArgs returns the flags of chaos-worker that say how to reach
// an https server, and the guard.
func (r *run) workerTargetArgs() []string {
	var args []string
	if r.scheme == "https" {
		u, _ := url.Parse(r.cfg.Addr)
		args = append(args, "--server-name", u.Hostname())
	}
	for _, f := range []struct{ flag, file string }{
		{"--cacert", r.cfg.CACert}, {"--client-cert", r.cfg.ClientCert}, {"--client-key", r.cfg.ClientKey},
	} {
		if f.file != "" {
			args = append(args, f.flag, f.file)
		}
	}
	if r.guard != nil {
		args = append(args, "--guard-addr", r.guard.proxy.Addr(), "--guard-prefix", r.guard.prefix)
		if r.cfg.Unsafe {
			args = append(args, "--unsafe")
		}
	}
	return args
}

// workerEnv returns the clients' environment: the harness's, and the
// secrets that flags would show in ps.
func (r *run) workerEnv() []string {
	env := append(os.Environ(), AuthTokenEnv+"="+r.cfg.AuthToken)
	if r.guard != nil {
		env = append(env, GuardEnv+"="+r.cfg.Guard)
	}
	return env
}

// readClient collects a client's operations and pause points.
func (r *run) readClient(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if strings.HasPrefix(string(line), `{"pause_point"`) {
			var p pausePoint
			if json.Unmarshal(line, &p) == nil {
				select {
				case r.pauseC <- p:
				default:
				}
			}
			continue
		}
		if strings.HasPrefix(string(line), `{"write_point"`) {
			var p writePoint
			if json.Unmarshal(line, &p) == nil {
				select {
				case r.writeC <- p:
				default:
				}
			}
			continue
		}
		var op history.Op
		if err := json.Unmarshal(line, &op); err != nil {
			continue // a client killed mid-line
		}
		r.record(op)
	}
}

// injectFaults runs the fault schedule until ctx ends: a quiet gap, one
// fault, and again. The faults of a cluster run to their end unless abort
// ends first (the run was interrupted).
func (r *run) injectFaults(ctx, abort context.Context) {
	favour := ""
	if r.cfg.UnsafeEpoch {
		// The negative control: a deposed leader commits only what was
		// under way in it when it froze, and only if that wins the race
		// with its own step-down when it wakes (its etcd client sees the
		// lost lease at once, without a round trip): about one
		// leader-pause in two. So two faults in three are leader-pauses.
		favour = FaultLeaderPause
		if !slices.Contains(r.cfg.Faults, FaultLeaderPause) {
			favour = FaultPartition // held-back paths, its zombie-leader variant
		}
	}
	if r.cfg.UnsafeClock {
		favour = FaultClockSkew // its negative control
	}
	sched := newSchedule(r.cfg.Faults, favour)
	for {
		if len(sched.kinds) == 0 {
			<-ctx.Done()
			return
		}
		if !sleep(ctx, faultGap(r.cfg.FaultEvery, r.rng)) {
			return
		}
		kind, _ := sched.next(r.rng)
		switch kind {
		case FaultPause:
			r.pause(ctx)
		case FaultKill:
			r.kill(ctx)
		case FaultNet:
			r.net(ctx)
		case FaultBitflip:
			r.bitflip(ctx)
		case FaultLoseUnsynced:
			r.loseUnsynced(ctx)
		case FaultRestore:
			r.restore(ctx)
		case FaultClockSkew:
			r.clockSkew(ctx)
		case FaultLeaderKill:
			r.leaderKill(abort)
		case FaultLeaderPause:
			r.leaderPause(abort)
		case FaultEngineKill:
			r.engineKill(abort, sched)
		case FaultEngineNet:
			r.engineNet(abort)
		case FaultPartition:
			r.partition(abort)
		}
	}
}

// faultGap draws the quiet gap before a fault: uniform from 0.4 to 1.6
// times every, in whole milliseconds. For DefaultFaultEvery it draws what
// the harness drew before the gap could be set (500 + IntN(1500) ms), so
// that a seed gives the same runs as before.
func faultGap(every time.Duration, rng *rand.Rand) time.Duration {
	lo := every * 2 / 5
	span := max(int(every*6/5/time.Millisecond), 1)
	return lo + time.Duration(rng.IntN(span))*time.Millisecond
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// addWindow records a fault's window: operations that return unknown in it
// (or shortly before it) show that it bit.
func (r *run) addWindow(start, end int64) {
	r.mu.Lock()
	r.netWindows = append(r.netWindows, [2]int64{start, end})
	r.mu.Unlock()
}

func (r *run) addFault(f history.Fault) {
	err := r.hist.WriteFault(f)
	r.mu.Lock()
	r.faults = append(r.faults, f)
	if err != nil && r.histErr == nil {
		r.histErr = err
	}
	r.mu.Unlock()
	r.cfg.Log.Info("fault", "kind", f.Kind, "client", f.Client, "at", time.Duration(f.Start).Round(time.Millisecond).String(),
		"for", time.Duration(f.End-f.Start).Round(time.Millisecond).String(), "detail", f.Detail)
}

// pause arms a client, waits for it to stop between its acquire and its
// write, and freezes it for one and a half to three TTLs.
func (r *run) pause(ctx context.Context) {
	c := r.rng.IntN(len(r.clients))
	proc := r.clients[c].Process
	for len(r.pauseC) > 0 {
		<-r.pauseC // stale points of earlier arms
	}
	proc.Signal(syscall.SIGUSR1)
	var p pausePoint
	select {
	case p = <-r.pauseC:
	case <-time.After(3 * r.cfg.TTL):
		return // it never got a lease in time; it stays armed for later
	case <-ctx.Done():
		return
	}
	proc = r.clients[p.PausePoint.Client].Process
	d := r.cfg.TTL + time.Duration(r.rng.Int64N(int64(2*r.cfg.TTL)))
	d = max(d, r.cfg.TTL*3/2)
	proc.Signal(syscall.SIGSTOP)
	start := r.now()
	time.Sleep(d) // not cut short at the end of the run: the pause must outlast the TTL
	proc.Signal(syscall.SIGCONT)
	end := r.now()
	r.mu.Lock()
	r.pauses = append(r.pauses, pauseRecord{p.PausePoint.Client, p.PausePoint.Resource, p.PausePoint.Token, start, end})
	r.mu.Unlock()
	r.addFault(history.Fault{Kind: FaultPause, Client: p.PausePoint.Client, Start: start, End: end,
		Detail: fmt.Sprintf("SIGSTOP client-%d holding %s token %d", p.PausePoint.Client, p.PausePoint.Resource, p.PausePoint.Token)})
}

// kill kills the server with SIGKILL and restarts it on the same data.
func (r *run) kill(ctx context.Context) {
	start := r.now()
	r.server.kill()
	down := time.Duration(100+r.rng.IntN(700)) * time.Millisecond
	time.Sleep(down)
	if err := r.server.start(); err != nil {
		r.cfg.Log.Error("restarting the server failed", "error", err)
		return
	}
	r.restarted()
	r.addFault(history.Fault{Kind: FaultKill, Client: -1, Start: start, End: r.now(), Detail: "kill -9 fence serve, restart on the same data"})
}

// net injects one network fault on every proxy.
func (r *run) net(ctx context.Context) {
	start := r.now()
	var detail string
	d := time.Duration(300+r.rng.IntN(int(2*r.cfg.TTL/time.Millisecond))) * time.Millisecond
	switch r.rng.IntN(4) {
	case 0:
		lat := time.Duration(20+r.rng.IntN(180)) * time.Millisecond
		detail = fmt.Sprintf("latency %s ± %s", lat, lat/2)
		r.eachProxy(func(p *proxy.Proxy) { p.SetLatency(lat, lat/2) })
	case 1:
		detail = "reset every connection"
		d = 0
		r.eachProxy(func(p *proxy.Proxy) { p.ResetAll() })
	case 2:
		detail = "black-hole"
		r.eachProxy(func(p *proxy.Proxy) { p.Blackhole(true) })
	case 3:
		detail = "refuse connections"
		r.eachProxy(func(p *proxy.Proxy) { p.Refuse(true); p.ResetAll() })
	}
	sleep(ctx, d)
	r.eachProxy(func(p *proxy.Proxy) { p.Heal() })
	end := r.now()
	r.mu.Lock()
	r.netWindows = append(r.netWindows, [2]int64{start, end})
	r.mu.Unlock()
	r.addFault(history.Fault{Kind: FaultNet, Client: -1, Start: start, End: end, Detail: detail})
}

func (r *run) eachProxy(f func(*proxy.Proxy)) {
	for _, p := range r.proxies {
		f(p)
	}
}

// stopClients heals every fault and stops the clients (SIGTERM: each ends
// after its operation in flight; SIGKILL after a grace).
func (r *run) stopClients() {
	r.eachProxy(func(p *proxy.Proxy) { p.Heal() })
	for _, c := range r.clients {
		c.Process.Signal(syscall.SIGCONT)
		c.Process.Signal(syscall.SIGTERM)
	}
	done := make(chan struct{})
	go func() {
		for _, c := range r.clients {
			c.Wait()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2*r.cfg.TTL + 5*time.Second):
		for _, c := range r.clients {
			c.Process.Kill()
		}
		<-done
	}
	r.clientWG.Wait()
}

// finalReads reads every key directly from the storage, as client -1.
func (r *run) finalReads() { r.readEveryKey() }

// result sums up the run: what bit, from one pass over the history (the
// paused clients' first writes after they woke; the operations cut short
// around a fault).
func (r *run) result() (*Result, error) {
	res := &Result{History: r.cfg.History, Ops: r.nops, Faults: r.faults, Duration: time.Since(r.start), ServerRestarts: r.restarts, Takeovers: r.takeovers, UnnamedRefusals: r.badRefusals, SkewedGrants: r.skewedGrants}
	pending := make(map[int][]pauseRecord) // by client: pauses whose first write after waking is still to come
	for _, p := range r.pauses {
		if time.Duration(p.end-p.start) > r.cfg.TTL {
			res.PausesPastTTL++
		}
		pending[p.client] = append(pending[p.client], p)
	}
	f, err := os.Open(r.cfg.History)
	if err != nil {
		return nil, fmt.Errorf("chaos: history: %w", err)
	}
	defer f.Close()
	hr := history.NewReader(f)
	for {
		e, err := hr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("chaos: history %s: %w", r.cfg.History, err)
		}
		op := &e.Op
		if e.IsFault {
			continue
		}
		// A client runs one op at a time, so its ops come in the order of
		// their calls: the first one found is its first after waking.
		ps := pending[op.Client]
		for i := 0; i < len(ps); i++ {
			p := ps[i]
			if op.Call < p.end || !writesWith(*op, p.resource, p.token) {
				continue
			}
			if op.Outcome == history.Fenced {
				res.FencedByPauses++
			}
			ps = slices.Delete(ps, i, i+1)
			i--
		}
		pending[op.Client] = ps
		if op.Outcome != history.Unknown && op.Outcome != history.Fail {
			continue
		}
		for _, w := range r.netWindows {
			if op.Call <= w[1] && op.Call >= w[0]-int64(2*r.cfg.TTL) {
				res.unknownAfterNet++
				break
			}
		}
	}
	return res, nil
}

// writesWith reports whether op writes resource with token.
func writesWith(op history.Op, resource string, token uint64) bool {
	switch op.Kind {
	case history.KindWrite:
		return op.Resource == resource && op.Token == token
	case history.KindTxn:
		for _, w := range op.Writes {
			if w.Resource == resource && w.Token == token {
				return true
			}
		}
	}
	return false
}

func (r *run) cleanup() {
	for _, c := range r.clients {
		if c.ProcessState == nil {
			c.Process.Kill()
		}
	}
	r.eachProxy(func(p *proxy.Proxy) { p.Close() })
	if r.unsafeSrv != nil {
		r.unsafeSrv.Close()
	}
	if r.server != nil {
		r.server.stop()
	}
	if r.cl != nil {
		r.cl.close()
	}
	if r.guard != nil {
		r.guard.close()
	}
	if r.dataDir != "" {
		os.RemoveAll(r.dataDir)
		os.RemoveAll(r.dataDir + ".backup")
	}
	if r.histFile != nil {
		r.histFile.Close()
	}
}
