package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/httpapi"
	"github.com/fence-lock/fence/internal/support/clientcert"
	"github.com/fence-lock/fence/internal/tools/chaos/history"
	"github.com/fence-lock/fence/internal/tools/chaos/proxy"
)

// Run runs the workload under faults and returns its history.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, start: time.Now(), rng: rand.New(rand.NewPCG(cfg.Seed, 0x6368616f73)), scheme: "http", grants: make(map[string][]grantMark), moved: make(map[int]int)}
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

	guard guardTarget // with cfg.Guard

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
	// moved is, by client, the nth op of the history that was its last
	// write, txn or acquire: a paused client's next step once it woke.
	moved     map[int]int
	faults    []history.Fault
	pauses    []pauseRecord
	restarts  int
	takeovers int
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
	if op.Mutates() || op.Kind == history.KindAcquire {
		r.moved[op.Client] = r.nops
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
		r.proxies = append(r.proxies, g.clientProxy())
		return nil
	}
	if r.cfg.Unsafe {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		api := httpapi.NewHandler(noLocker{}, newUnsafeStore())
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
		api.HTTPClient.Transport = clientcert.NewTransport(&http.Transport{}, r.cfg.TLS)
	}
	need := fmt.Sprintf("the run needs lock, read and write on r0..r%d", r.cfg.Resources-1)
	if r.cfg.Guard != "" {
		need = fmt.Sprintf("the run needs lock on r0..r%d", r.cfg.Resources-1)
	}
	_, err = api.Get(ctx, "r0", r.keyPrefix+"k0")
	switch {
	case err == nil, errors.Is(err, fence.ErrNotFound):
	case errors.Is(err, fence.ErrForbidden) && r.cfg.Guard != "":
	case errors.Is(err, clientcert.ErrMissing):
		return fmt.Errorf("chaos: the server at %s wants a client certificate: give --client-cert and --client-key", r.cfg.Addr)
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
