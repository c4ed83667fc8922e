package chaos

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/internal/tools/chaos/history"
	"github.com/fence-lock/fence/wire"
)

// WorkerConfig configures one client process of a run.
type WorkerConfig struct {
	Client     int           // this client's index
	LockAddr   string        // base URL of the lock service (through the proxy)
	StoreAddr  string        // base URL of the storage (fence's own, or the unsafe store)
	Resources  int           // resources r0..r{n-1}
	Keys       int           // keys per resource: KeyPrefix+k0..
	KeyPrefix  string        // "", or the run's own on a server that earlier runs wrote to
	TTL        time.Duration // lease TTL
	Timeout    time.Duration // per request
	TxnPercent int           // share of cycles that are two-resource transactions
	Workload   string        // WorkloadLock ("" too), WorkloadSession, WorkloadSemaphore or WorkloadShared
	Think      time.Duration // mean pause between two cycles: keeps histories checkable
	Seed       uint64
	Start      int64 // the run's start, Unix ns: history times count from it

	// AuthToken is the bearer token sent to the lock service and the
	// storage; "" none.
	AuthToken string
	// TLS is the client's TLS configuration for https addresses; nil: the
	// system's roots. ServerName, if set, is the name the server's
	// certificate is verified for (the addresses are a proxy's).
	TLS        *tls.Config
	ServerName string

	// Guard, a PostgreSQL connection string, makes the client read and
	// write the run's tables, named GuardPrefix_..., through fence's
	// guard, dialling GuardAddr (a proxy) instead of the string's host; an
	// s3:// location, the run's objects under GuardPrefix, through the S3
	// guard, at GuardAddr instead of the location's endpoint;
	// StoreAddr is then unused. Unsafe writes without the guard.
	Guard, GuardAddr, GuardPrefix string
	Unsafe                        bool
}

// pausePoint is the control line a worker prints when it has just acquired
// and has been asked to stop there: the harness then freezes it with SIGSTOP.
type pausePoint struct {
	PausePoint struct {
		Client   int    `json:"client"`
		Resource string `json:"resource"`
		Token    uint64 `json:"token"`
	} `json:"pause_point"`
}

// writePoint is the control line a worker prints when it has read and is
// about to write with its token, and has been asked to stop there (SIGUSR2):
// in a cluster run, leader-pause freezes it there, and lets it send its
// write to the frozen leader once another server has granted the resource
// anew.
type writePoint struct {
	WritePoint struct {
		Client   int    `json:"client"`
		Resource string `json:"resource"`
		Token    uint64 `json:"token"`
	} `json:"write_point"`
}

// worker is one client process's state.
type worker struct {
	cfg        WorkerConfig
	rng        *rand.Rand
	locks      *client.API
	data       storage
	holder     string
	seq        int64
	armed      atomic.Bool // SIGUSR1: stop at the next pause point
	armedWrite atomic.Bool // SIGUSR2: stop at the next write point

	mu  sync.Mutex // guards enc
	enc *json.Encoder

	sessMu    sync.Mutex       // guards session and sessionAt
	session   fence.SessionRef // WorkloadSession: the session open now; zero while none
	sessionAt int64            // the call of its last successful open or renewal: it lasts a TTL from then at least
}

// RunWorker runs the client loop until ctx ends, writing one JSON line per
// operation to out. SIGUSR1 arms a pause point, SIGUSR2 a write point.
func RunWorker(ctx context.Context, cfg WorkerConfig, out io.Writer) error {
	w := &worker{
		cfg:    cfg,
		rng:    rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Client)+1)),
		holder: "client-" + strconv.Itoa(cfg.Client),
		enc:    json.NewEncoder(out),
	}
	if cfg.ServerName != "" {
		if cfg.TLS == nil {
			cfg.TLS = &tls.Config{}
		}
		cfg.TLS = cfg.TLS.Clone()
		cfg.TLS.ServerName = cfg.ServerName
		w.cfg = cfg
	}
	var err error
	if w.locks, err = newRawClient(cfg.LockAddr, cfg); err != nil {
		return err
	}
	if isS3Guard(cfg.Guard) {
		s3, err := newS3Storage(cfg.Guard, cfg.GuardAddr, cfg.GuardPrefix, cfg.Timeout, cfg.Unsafe)
		if err != nil {
			return err
		}
		w.data = s3
	} else if cfg.Guard != "" {
		pg, err := newPGStorage(ctx, cfg.Guard, cfg.GuardAddr, cfg.GuardPrefix, cfg.Timeout, cfg.Unsafe)
		if err != nil {
			return err
		}
		defer pg.pool.Close()
		w.data = pg
	} else {
		store, err := newRawClient(cfg.StoreAddr, cfg)
		if err != nil {
			return err
		}
		w.data = httpStorage{store}
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	go func() {
		for range usr1 {
			w.armed.Store(true)
		}
	}()
	usr2 := make(chan os.Signal, 1)
	signal.Notify(usr2, syscall.SIGUSR2)
	defer signal.Stop(usr2)
	go func() {
		for range usr2 {
			w.armedWrite.Store(true)
		}
	}()
	if cfg.Workload == WorkloadSession {
		go w.keepSession(ctx)
	}
	for ctx.Err() == nil {
		if cfg.Workload == WorkloadMulti {
			w.multiCycle(ctx)
		} else if cfg.Resources >= 2 && w.rng.IntN(100) < cfg.TxnPercent && cfg.Workload != WorkloadSemaphore {
			w.txnCycle(ctx)
		} else {
			w.cycle(ctx)
		}
		if cfg.Think > 0 {
			w.sleep(ctx, time.Duration(w.rng.Int64N(int64(2*cfg.Think))))
		}
	}
	return nil
}

// newRawClient returns an API client that never retries: every attempt is
// one operation of the history, with its own outcome.
func newRawClient(addr string, cfg WorkerConfig) (*client.API, error) {
	c, err := client.NewAPI(addr)
	if err != nil {
		return nil, err
	}
	c.Retries = 0
	c.AuthToken = cfg.AuthToken
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	if cfg.TLS != nil {
		tr.TLSClientConfig = cfg.TLS.Clone()
	}
	c.HTTPClient = &http.Client{Timeout: cfg.Timeout, Transport: tr}
	return c, nil
}

func (w *worker) now() int64 { return time.Now().UnixNano() - w.cfg.Start }

func (w *worker) resource(i int) string { return "r" + strconv.Itoa(i) }

func (w *worker) key() string { return w.cfg.KeyPrefix + "k" + strconv.Itoa(w.rng.IntN(w.cfg.Keys)) }

// record writes op as one JSON line, with a fresh id.
func (w *worker) record(op history.Op) {
	w.seq++
	op.ID = int64(w.cfg.Client+1)<<32 | w.seq
	op.Client = w.cfg.Client
	w.mu.Lock()
	defer w.mu.Unlock()
	w.enc.Encode(op)
}

// outcome classifies err: what the history may assume about the operation.
func outcome(err error) history.Outcome {
	var p *wire.Problem
	var opErr *net.OpError
	switch {
	case err == nil:
		return history.OK
	case errors.Is(err, fence.ErrFenced):
		return history.Fenced
	case errors.As(err, &p) && p.Status >= 400 && p.Status < 500:
		return history.Rejected
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return history.Fail // never sent
	}
	return history.Unknown
}

// finish fills op's outcome and return time from err and records it; an
// error of the storage is classified by the storage.
func (w *worker) finish(op history.Op, err error) history.Op {
	op.Outcome = outcome(err)
	if op.Kind != history.KindAcquire && op.Kind != history.KindRelease {
		op.Outcome = w.data.outcome(err)
	}
	if op.Outcome != history.Unknown {
		op.Return = w.now()
	}
	if err != nil {
		op.Error = err.Error()
	}
	w.record(op)
	return op
}

// keepSession keeps the client's session open (WorkloadSession): it opens
// it, renews it every TTL/3, and opens it again once it is lost. A pause of
// the process stops it too: the session expires, and the leases in it.
// Its requests are not operations on the data: the history has none of
// them.
func (w *worker) keepSession(ctx context.Context) {
	name := fence.SessionResource(w.cfg.KeyPrefix + "c" + strconv.Itoa(w.cfg.Client))
	for ctx.Err() == nil {
		w.sessMu.Lock()
		ref, at := w.session, w.sessionAt
		w.sessMu.Unlock()
		call := w.now()
		if ref.IsZero() {
			if l, err := w.locks.Acquire(ctx, name, w.holder, w.cfg.TTL, 0); err == nil {
				ref, at = fence.SessionRef{Resource: l.Resource, Token: l.Token}, call
			}
		} else if _, err := w.locks.Renew(ctx, ref.Resource, ref.Token, 0); err == nil {
			at = call
		} else if errors.Is(err, fence.ErrLeaseLost) {
			ref = fence.SessionRef{}
		}
		w.sessMu.Lock()
		w.session, w.sessionAt = ref, at
		w.sessMu.Unlock()
		w.sleep(ctx, w.cfg.TTL/3)
	}
}

// hold is how a cycle holds its resource.
type hold int

const (
	holdLock   hold = iota // an exclusive lease (in the client's session with WorkloadSession)
	holdShared             // a shared hold
	holdPermit             // one of the SemaphoreLimit permits: a lease on a slot resource
)

// acquire acquires resource as the hold h, waiting up to two TTLs; it
// returns the lease (the slot's, for a permit), or one with token 0.
func (w *worker) acquire(ctx context.Context, resource string, h hold) fence.Lease {
	ttl := w.cfg.TTL
	op := history.Op{Kind: history.KindAcquire, Resource: resource, Shared: h == holdShared}
	if w.cfg.Workload == WorkloadSession {
		w.sessMu.Lock()
		ref, at := w.session, w.sessionAt
		w.sessMu.Unlock()
		if ref.IsZero() {
			w.backoff(ctx) // no session open now: nothing to acquire in
			return fence.Lease{}
		}
		ctx, ttl = fence.WithSession(ctx, ref), 0 // the session's
		op.Until = at + int64(w.cfg.TTL)
	}
	op.Call = w.now()
	var l fence.Lease
	var err error
	switch h {
	case holdShared:
		l, err = w.locks.AcquireShared(ctx, resource, w.holder, ttl, 2*w.cfg.TTL)
	case holdPermit:
		l, err = w.locks.AcquirePermit(ctx, resource, w.holder, SemaphoreLimit, ttl, 2*w.cfg.TTL)
		op.Resource = l.Resource // the slot's; the semaphore's if none was granted
		if op.Resource == "" {
			op.Resource = resource
		}
	default:
		l, err = w.locks.Acquire(ctx, resource, w.holder, ttl, 2*w.cfg.TTL)
	}
	op.Token = uint64(l.Token)
	if errors.Is(err, fence.ErrLockHeld) {
		// Not an operation on the data: nothing to record but the attempt.
		op.Outcome, op.Return = history.Rejected, w.now()
		w.record(op)
		return fence.Lease{}
	}
	op = w.finish(op, err)
	if op.Outcome != history.OK {
		w.backoff(ctx)
		return fence.Lease{}
	}
	return l
}

// pauseIfArmed stops at a pause point when the harness asked for one: it
// says so and waits to be frozen; after SIGCONT it goes on with its stale token.
func (w *worker) pauseIfArmed(resource string, token fence.Token) {
	if !w.armed.Swap(false) {
		return
	}
	var p pausePoint
	p.PausePoint.Client, p.PausePoint.Resource, p.PausePoint.Token = w.cfg.Client, resource, uint64(token)
	w.mu.Lock()
	w.enc.Encode(p)
	w.mu.Unlock()
	time.Sleep(500 * time.Millisecond) // the harness sends SIGSTOP meanwhile
}

// writePointIfArmed stops just before a write when the harness asked for
// it: it says so and waits to be frozen; after SIGCONT it sends its write.
func (w *worker) writePointIfArmed(resource string, token fence.Token) {
	if !w.armedWrite.Swap(false) {
		return
	}
	var p writePoint
	p.WritePoint.Client, p.WritePoint.Resource, p.WritePoint.Token = w.cfg.Client, resource, uint64(token)
	w.mu.Lock()
	w.enc.Encode(p)
	w.mu.Unlock()
	time.Sleep(500 * time.Millisecond) // the harness sends SIGSTOP meanwhile
}

// read reads resource/key; it returns the value ("" if absent) and whether it was read.
func (w *worker) read(ctx context.Context, resource, key string) (string, bool) {
	op := history.Op{Kind: history.KindRead, Resource: resource, Key: key, Call: w.now()}
	var err error
	op.Value, op.Rev, err = w.data.get(ctx, resource, key)
	op = w.finish(op, err)
	return op.Value, op.Outcome == history.OK
}

// next derives the value to write from the value read: a counter that a
// lost update would make skip or repeat, and who wrote it.
func (w *worker) next(read string) string {
	n, _ := strconv.Atoi(strings.SplitN(read, "/", 2)[0])
	return fmt.Sprintf("%d/c%d-%d", n+1, w.cfg.Client, w.seq+1)
}

func (w *worker) write(ctx context.Context, resource, key, value string, token fence.Token) history.Outcome {
	op := history.Op{Kind: history.KindWrite, Resource: resource, Key: key, Value: value, Token: uint64(token), Call: w.now()}
	var err error
	op.Rev, err = w.data.put(ctx, resource, key, value, token)
	return w.finish(op, err).Outcome
}

func (w *worker) release(ctx context.Context, l fence.Lease) {
	op := history.Op{Kind: history.KindRelease, Resource: l.Resource, Token: uint64(l.Token), Shared: l.Shared, Call: w.now()}
	var err error
	if l.Shared {
		err = w.locks.ReleaseShared(ctx, l.Resource, l.Holder, l.Token)
	} else {
		err = w.locks.Release(ctx, l.Resource, l.Token)
	}
	w.finish(op, err)
}

// sharedKey is the key that the client writes under a shared hold: its
// own, so that the holders of a group, writing at once, lose nothing.
func (w *worker) sharedKey() string { return SharedKey(w.cfg.KeyPrefix, w.cfg.Client) }

// SharedKey is the key that client writes under its shared holds
// (WorkloadShared), with the run's key prefix.
func SharedKey(prefix string, client int) string { return prefix + "s" + strconv.Itoa(client) }

// cycle is acquire -> read -> write (one or two keys) -> release: of a
// lock, a shared hold (the client's own key) or a permit (the slot's keys),
// as the workload has it.
func (w *worker) cycle(ctx context.Context) {
	resource := w.resource(w.rng.IntN(w.cfg.Resources))
	h := holdLock
	switch {
	case w.cfg.Workload == WorkloadSemaphore:
		h = holdPermit
	case w.cfg.Workload == WorkloadShared && w.rng.IntN(2) == 0:
		h = holdShared
	}
	l := w.acquire(ctx, resource, h)
	if l.Token == 0 {
		return
	}
	resource, token := l.Resource, l.Token
	w.pauseIfArmed(resource, token)
	for range 1 + w.rng.IntN(2) {
		key := w.key()
		if h == holdShared {
			key = w.sharedKey()
		}
		value, ok := w.read(ctx, resource, key)
		if !ok {
			break
		}
		w.writePointIfArmed(resource, token)
		if w.write(ctx, resource, key, w.next(value), token) != history.OK {
			break // fenced, or unknown: stop writing under this lease
		}
	}
	w.release(ctx, l)
}

// twoResources picks two distinct resources, in order.
func (w *worker) twoResources() (string, string) {
	a, b := w.rng.IntN(w.cfg.Resources), w.rng.IntN(w.cfg.Resources-1)
	if b >= a {
		b++
	}
	if a > b {
		a, b = b, a
	}
	return w.resource(a), w.resource(b)
}

// txnCycle acquires two resources (in order, so that clients never wait on
// each other in a cycle), reads a key of each and writes both in one txn.
func (w *worker) txnCycle(ctx context.Context) {
	ra, rb := w.twoResources()
	la := w.acquire(ctx, ra, holdLock)
	if la.Token == 0 {
		return
	}
	defer w.release(ctx, la)
	lb := w.acquire(ctx, rb, holdLock)
	if lb.Token == 0 {
		return
	}
	defer w.release(ctx, lb)
	w.txnOf(ctx, la, lb)
}

// multiCycle acquires two resources at once (POST /v1/locks), all or
// nothing, reads a key of each and writes both in one txn. Each grant is
// an acquire op of its resource; a refusal is followed by a probe of both
// locks, which the client must not hold.
func (w *worker) multiCycle(ctx context.Context) {
	ra, rb := w.twoResources()
	wait := 2 * w.cfg.TTL
	if w.rng.IntN(2) == 0 {
		wait = 0 // refused at once if either is held: the refusals are what the probes check
	}
	call := w.now()
	ls, err := w.locks.AcquireAll(ctx, []string{ra, rb}, w.holder, w.cfg.TTL, wait)
	if errors.Is(err, fence.ErrLockHeld) {
		ret := w.now()
		for _, r := range []string{ra, rb} {
			w.record(history.Op{Kind: history.KindAcquire, Resource: r, Call: call, Return: ret, Outcome: history.Rejected, Error: err.Error()})
		}
		for _, r := range []string{ra, rb} {
			op := history.Op{Kind: history.KindProbe, Resource: r, Call: w.now()}
			st, err := w.locks.Status(ctx, r)
			if st.Held {
				op.Value, op.Token = st.Holder, uint64(st.Token)
			}
			w.finish(op, err)
		}
		return
	}
	var ops [2]history.Op
	for i, r := range []string{ra, rb} {
		ops[i] = history.Op{Kind: history.KindAcquire, Resource: r, Call: call}
		if err == nil {
			ops[i].Token = uint64(ls[i].Token)
		}
		ops[i] = w.finish(ops[i], err)
	}
	if ops[0].Outcome != history.OK {
		w.backoff(ctx)
		return
	}
	defer w.release(ctx, ls[0])
	defer w.release(ctx, ls[1])
	w.txnOf(ctx, ls[0], ls[1])
}

// txnOf reads a key of each lease's resource and writes both in one txn.
func (w *worker) txnOf(ctx context.Context, la, lb fence.Lease) {
	ra, rb := la.Resource, lb.Resource
	ta, tb := la.Token, lb.Token
	w.pauseIfArmed(ra, ta)
	ka, kb := w.key(), w.key()
	va, ok := w.read(ctx, ra, ka)
	if !ok {
		return
	}
	vb, ok := w.read(ctx, rb, kb)
	if !ok {
		return
	}
	writes := []history.Write{
		{Resource: ra, Key: ka, Value: w.next(va), Token: uint64(ta)},
		{Resource: rb, Key: kb, Value: w.next(vb), Token: uint64(tb)},
	}
	w.writePointIfArmed(ra, ta)
	op := history.Op{Kind: history.KindTxn, Writes: writes, Call: w.now()}
	rev, err := w.data.txn(ctx, map[string]fence.Token{ra: ta, rb: tb}, []string{ra, rb}, writes)
	op.Rev = rev
	var fe *fence.FencedError
	if _, guarded := w.data.(*pgStorage); guarded && errors.As(err, &fe) {
		op.Resource = fe.Resource // the guard checks one resource at a time: this one rejected it
	}
	w.finish(op, err)
}

// backoff waits a little after a failure, so that a client does not spin on
// a server that is down.
func (w *worker) backoff(ctx context.Context) {
	w.sleep(ctx, time.Duration(20+w.rng.IntN(80))*time.Millisecond)
}

// sleep waits for d or until ctx ends.
func (w *worker) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
