package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/internal/tools/embedded"
	"github.com/fence-lock/fence/wire"
)

// Defaults and limits of Config.
const (
	// DefaultTTL is the TTL of A's lease, and of B's unless shorter than MinTTLB.
	DefaultTTL = time.Second
	// DefaultPauseMargin is how much longer than the TTL A pauses by default.
	DefaultPauseMargin = 500 * time.Millisecond
	// MinTTLB is the shortest TTL of B's lease: B does not pause, and a
	// lease of a few hundred milliseconds, renewed on a loaded machine, may
	// end before B writes, which is not what the demo shows.
	MinTTLB = 5 * time.Second
	// MaxTTL is the longest TTL a demo accepts: it waits for it, twice.
	MaxTTL = time.Minute
	// MaxPause is the longest pause a demo accepts.
	MaxPause = 2 * time.Minute
)

// Key is the key both holders write, in the resource of each run.
const Key = "total"

// Participants of the story, as they appear in Event.Actor and Event.To.
// The holders write their own names as values: A writes "A", B writes "B".
const (
	ActorA     = "A"       // the holder that pauses and turns stale
	ActorB     = "B"       // the holder that gets the lock next
	ActorLock  = "fence"   // the lock service
	ActorStore = "storage" // the run's storage
)

// Names of the two runs, in RunResult.Name.
const (
	RunUnsafe = "unsafe" // against a last-writer-wins store that ignores tokens
	RunFenced = "fenced" // against fence's storage, which enforces them
)

// Config configures Run.
type Config struct {
	// Addr is the base URL of a running fence server, such as
	// "http://127.0.0.1:7700". Empty, the default, means an embedded server
	// (see StartServer), removed at the end.
	Addr string
	// TTL is the TTL of A's lease, and of B's (at least MinTTLB). Zero means
	// DefaultTTL; it must be in [fence.MinTTL, MaxTTL].
	TTL time.Duration
	// Pause is how long A sleeps, without renewing, after it acquires. Zero
	// means TTL + DefaultPauseMargin; it must be longer than TTL (or A would
	// not be stale) and at most MaxPause.
	Pause time.Duration
	// HTTPClient sends every request of the demo. Nil means a client of its
	// own, whose idle connections are closed when Run returns.
	HTTPClient *http.Client
	// AuthToken, if not empty, is sent as a bearer token to a server with
	// authentication on (it needs lock, write and read on demo-*).
	AuthToken string
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.Pause == 0 {
		c.Pause = c.TTL + DefaultPauseMargin
	}
	return c
}

// Validate reports a configuration that cannot tell the story. It checks the
// configuration as Run would use it, after the defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.TTL < fence.MinTTL || c.TTL > MaxTTL:
		return fmt.Errorf("demo: ttl %s: want %s to %s", c.TTL, fence.MinTTL, MaxTTL)
	case c.Pause <= c.TTL:
		return fmt.Errorf("demo: pause %s: want longer than the ttl (%s), or A's lease does not expire while it sleeps", c.Pause, c.TTL)
	case c.Pause > MaxPause:
		return fmt.Errorf("demo: pause %s: want at most %s", c.Pause, MaxPause)
	}
	if c.Addr != "" {
		if _, err := client.NewAPI(c.Addr); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	return nil
}

// Kind says what an Event is.
type Kind string

// Kinds of events.
const (
	KindAcquire Kind = "acquire" // a holder acquires the lock (a request to the lock service)
	KindPause   Kind = "pause"   // A freezes: it stops renewing and sleeps past its TTL (a note)
	KindExpire  Kind = "expire"  // the lock service has ended A's lease (a note, as observed by polling its status)
	KindResume  Kind = "resume"  // A wakes up, still believing it holds the lock (a note)
	KindPut     Kind = "put"     // a holder writes with its token (a request to the storage)
)

// Event is one step of a run: a request from one participant to another and
// its answer, or a note about one participant.
type Event struct {
	// At is the time since the run started, on this process's monotonic
	// clock: when the request was sent, or when the note was made. An expiry
	// is noted when the answer that first showed it arrived.
	At      time.Duration
	Actor   string // ActorA, ActorB or ActorLock
	To      string // the participant a request went to (ActorLock or ActorStore); "" for a note
	Kind    Kind
	Message string // the request ("PUT total=B, token 2") or the note ("lease 1 expired")
	Reply   string // the answer to a request ("200 OK rev 1"); "" for a note
}

// IsNote reports whether e is a note rather than a request.
func (e Event) IsNote() bool { return e.To == "" }

// MarshalJSON encodes At as "at_ms", in milliseconds with microsecond precision.
func (e Event) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		AtMS    float64 `json:"at_ms"`
		Actor   string  `json:"actor"`
		To      string  `json:"to,omitempty"`
		Kind    Kind    `json:"kind"`
		Message string  `json:"message"`
		Reply   string  `json:"reply,omitempty"`
	}{millis(e.At), e.Actor, e.To, e.Kind, e.Message, e.Reply})
}

// millis returns d in milliseconds, rounded to the microsecond.
func millis(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}

// Write is one holder's PUT and the storage's answer.
type Write struct {
	Holder string      `json:"holder"` // ActorA or ActorB
	Value  string      `json:"value"`  // what it wrote: its own name
	Token  fence.Token `json:"token"`  // the fencing token it sent
	// Status is the answer's HTTP status; 0 if no answer came (see Error).
	Status int `json:"status"`
	// Revision is the store's revision of an accepted write.
	Revision fence.Rev `json:"revision,omitempty"`
	// Code is the problem code of a rejection, such as "fenced".
	Code string `json:"code,omitempty"`
	// Presented and LastFence are a fenced rejection's tokens: the one sent
	// and the resource's last fence.
	Presented fence.Token `json:"presented,omitempty"`
	LastFence fence.Token `json:"last_fence,omitempty"`
	// Error is the error of a write that was not accepted.
	Error string `json:"error,omitempty"`
}

// Accepted reports whether the storage accepted the write.
func (w Write) Accepted() bool { return w.Status/100 == 2 }

// Fenced reports whether the storage rejected the write as stale.
func (w Write) Fenced() bool { return w.Code == "fenced" }

// Reply describes the answer as a sequence diagram shows it:
// "200 OK rev 1", "409 fenced (presented 1, last_fence 2)".
func (w Write) Reply() string {
	switch {
	case w.Accepted():
		return fmt.Sprintf("%d %s rev %d", w.Status, http.StatusText(w.Status), w.Revision)
	case w.Fenced():
		return fmt.Sprintf("%d fenced (presented %d, last_fence %d)", w.Status, w.Presented, w.LastFence)
	case w.Status != 0 && w.Code != "":
		return fmt.Sprintf("%d %s", w.Status, w.Code)
	case w.Status != 0:
		return fmt.Sprintf("%d %s", w.Status, http.StatusText(w.Status))
	}
	return "no answer: " + w.Error
}

// Outcome is how a run ended.
type Outcome string

// Outcomes of a run.
const (
	// OutcomeStaleWon: A's stale write was accepted and its value is the
	// final one. B's update is lost; the invariant broke. Expected of the
	// unsafe run.
	OutcomeStaleWon Outcome = "stale_write_won"
	// OutcomeStaleRejected: A's write was rejected as fenced, presenting its
	// token and naming B's as the last fence, and B's value stands. Expected
	// of the fenced run.
	OutcomeStaleRejected Outcome = "stale_write_rejected"
	// OutcomeOther is anything else, such as A writing before B (timing);
	// RunResult.Summary says what happened.
	OutcomeOther Outcome = "other"
)

// RunResult is what happened in one run.
type RunResult struct {
	Name      string      `json:"name"`       // RunUnsafe or RunFenced
	Store     string      `json:"store"`      // "last-writer-wins" or "fence"
	StoreAddr string      `json:"store_addr"` // the storage's base URL
	Resource  string      `json:"resource"`   // the lock and the storage's resource, unique per run
	Key       string      `json:"key"`        // Key
	TokenA    fence.Token `json:"token_a"`    // A's fencing token
	TokenB    fence.Token `json:"token_b"`    // B's fencing token
	WriteB    Write       `json:"write_b"`
	WriteA    Write       `json:"write_a"`
	// Final is the key's value read back after both writes, if FinalFound.
	Final      string  `json:"final"`
	FinalFound bool    `json:"final_found"`
	Outcome    Outcome `json:"outcome"`
	// Summary says in one sentence how the run ended.
	Summary string `json:"summary"`
	// Events are the run's steps in the order of At.
	Events []Event `json:"events"`
}

// Result is what happened in both runs.
type Result struct {
	// Addr is the fence server's base URL.
	Addr string `json:"addr"`
	// Embedded is true if the server was embedded (Config.Addr was empty).
	Embedded bool `json:"embedded"`
	// TTL and Pause are the settings the runs used (JSON: ttl_ms, pause_ms).
	TTL    time.Duration `json:"-"`
	Pause  time.Duration `json:"-"`
	Unsafe RunResult     `json:"unsafe"`
	Fenced RunResult     `json:"fenced"`
	// OK is true if fencing did its job: the fenced run's outcome is
	// OutcomeStaleRejected. The unsafe run's outcome does not count: it
	// depends on timing.
	OK bool `json:"ok"`
}

// MarshalJSON encodes TTL and Pause as "ttl_ms" and "pause_ms".
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result // without this method
	return json.Marshal(struct {
		plain
		TTLMS   float64 `json:"ttl_ms"`
		PauseMS float64 `json:"pause_ms"`
	}{plain(r), millis(r.TTL), millis(r.Pause)})
}

// Run runs the story twice, first against a last-writer-wins store, then
// against fence's storage, and returns what happened. It takes about twice
// cfg.Pause. The locks come from the fence server at cfg.Addr, or from an
// embedded one. Each run uses a resource of its own, "demo-<random>-unsafe"
// and "demo-<random>-fenced", so that demos sharing a server never collide.
//
// Run returns an error when the story could not be told (a server
// unreachable, an acquire refused, ctx cancelled), with the Result so far.
// How the writes ended is not an error: it is in the Result.
func Run(ctx context.Context, cfg Config) (res Result, err error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	cfg = cfg.withDefaults()
	res = Result{Addr: strings.TrimSuffix(cfg.Addr, "/"), Embedded: cfg.Addr == "", TTL: cfg.TTL, Pause: cfg.Pause}
	if res.Embedded {
		srv, err := embedded.Start(ctx)
		if err != nil {
			return res, fmt.Errorf("demo: %w", err)
		}
		defer func() { err = errors.Join(err, srv.Close()) }()
		res.Addr = srv.URL
	}
	lww, err := startLWW()
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, lww.Close()) }()

	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		defer hc.CloseIdleConnections()
	}
	d := &driver{cfg: cfg, hc: hc}
	if d.locks, err = d.newAPI(res.Addr); err != nil {
		return res, err
	}
	if d.client, err = client.New(res.Addr, client.WithAuthToken(cfg.AuthToken)); err != nil {
		return res, fmt.Errorf("demo: %w", err)
	}
	d.client.API().HTTPClient = hc

	id := newID()
	if res.Unsafe, err = d.run(ctx, runSpec{RunUnsafe, "last-writer-wins", lww.URL, id + "-" + RunUnsafe}); err != nil {
		return res, err
	}
	if res.Fenced, err = d.run(ctx, runSpec{RunFenced, "fence", res.Addr, id + "-" + RunFenced}); err != nil {
		return res, err
	}
	res.OK = res.Fenced.Outcome == OutcomeStaleRejected
	return res, nil
}

// newID returns a random resource name prefix, "demo-" and 8 hex digits.
func newID() string {
	b := make([]byte, 4)
	rand.Read(b) // never fails (crypto/rand)
	return "demo-" + hex.EncodeToString(b)
}

// driver runs the story.
type driver struct {
	cfg    Config
	hc     *http.Client
	locks  *client.API    // raw lock calls: A's acquire, the watch of its lease
	client *client.Client // B's self-renewing lease
}

// runSpec says where one run happens.
type runSpec struct {
	name      string // RunUnsafe or RunFenced
	store     string // the storage's kind, for people
	storeAddr string // the storage's base URL
	resource  string // the lock's resource, and the storage's
}

// newAPI returns a client of the fence API at addr, or of the storage API of
// the last-writer-wins store, over d's HTTP client.
func (d *driver) newAPI(addr string) (*client.API, error) {
	c, err := client.NewAPI(addr)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	c.HTTPClient = d.hc
	c.AuthToken = d.cfg.AuthToken
	// Long enough for a cluster's failover, short enough that a wrong
	// --addr fails the story at once rather than after the default 15 s.
	c.RetryFor = 3 * time.Second
	return c, nil
}

// run tells the story once. A and the rest run concurrently: A's pause is a
// timer in a goroutine of its own. The story is the seed's, so A wakes after
// its pause and after B has written, however slow the machine is.
func (d *driver) run(ctx context.Context, sp runSpec) (rr RunResult, err error) {
	rr = RunResult{Name: sp.name, Store: sp.store, StoreAddr: sp.storeAddr, Resource: sp.resource, Key: Key}
	tl := &timeline{start: time.Now()}
	defer func() { rr.Events = tl.sorted() }()
	defer func() {
		if err != nil {
			err = fmt.Errorf("demo: %s run: %w", sp.name, err)
		}
	}()
	store, err := d.newAPI(sp.storeAddr)
	if err != nil {
		return rr, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// A acquires with the raw API: nothing will renew this lease.
	sent := tl.now()
	leaseA, err := d.locks.Acquire(ctx, sp.resource, ActorA, d.cfg.TTL, 0)
	if err != nil {
		return rr, fmt.Errorf("A's acquire: %w", err)
	}
	rr.TokenA = leaseA.Token
	tl.add(Event{At: sent, Actor: ActorA, To: ActorLock, Kind: KindAcquire, Message: "acquire",
		Reply: fmt.Sprintf("token %d, ttl %s", leaseA.Token, leaseA.TTL)})

	// A freezes (GC, swap, partition): it stops renewing and sleeps past its
	// TTL. Then it wakes up and writes with the token it still believes in.
	tl.add(Event{At: tl.now(), Actor: ActorA, Kind: KindPause,
		Message: fmt.Sprintf("paused (GC, swap, partition) for %s, not renewing", d.cfg.Pause)})
	writeAC := make(chan Write, 1)
	doneA := make(chan struct{})
	wroteB := make(chan struct{})
	go func() {
		defer close(doneA)
		stopped := func(wake <-chan struct{}) bool {
			select {
			case <-ctx.Done():
				writeAC <- Write{Holder: ActorA, Value: ActorA, Token: leaseA.Token, Error: ctx.Err().Error()}
				return true
			case <-wake:
				return false
			}
		}
		paused := make(chan struct{})
		time.AfterFunc(d.cfg.Pause, func() { close(paused) })
		if stopped(paused) || stopped(wroteB) { // the pause, and B's write
			return
		}
		tl.add(Event{At: tl.now(), Actor: ActorA, Kind: KindResume,
			Message: fmt.Sprintf("wakes up, still believes it holds token %d", leaseA.Token)})
		writeAC <- d.put(ctx, tl, store, sp.resource, ActorA, leaseA.Token)
	}()
	defer func() { cancel(); <-doneA }() // on error, A stops at once

	// The lock service lets A's lease expire.
	if err := d.awaitExpiry(ctx, tl, sp.resource, leaseA.Token); err != nil {
		return rr, err
	}

	// B acquires, with a lease that renews itself, and writes while it holds it.
	sent = tl.now()
	leaseB, err := d.client.Acquire(ctx, sp.resource, fence.WithHolder(ActorB), fence.WithTTL(max(d.cfg.TTL, MinTTLB)),
		fence.WithWait(d.cfg.TTL)) // the wait only covers a slow expiry: the lease is already gone
	if err != nil {
		return rr, fmt.Errorf("B's acquire: %w", err)
	}
	defer func() {
		// The outcome of the release does not matter: the resource is this
		// run's alone, and the lease expires by its TTL anyway.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		leaseB.Release(ctx)
	}()
	rr.TokenB = leaseB.Token()
	tl.add(Event{At: sent, Actor: ActorB, To: ActorLock, Kind: KindAcquire, Message: "acquire",
		Reply: fmt.Sprintf("token %d", leaseB.Token())})
	if err := leaseB.Err(); err != nil {
		return rr, fmt.Errorf("B's lease ended before it could write: %w", err)
	}
	rr.WriteB = d.put(ctx, tl, store, sp.resource, ActorB, leaseB.Token())
	close(wroteB)

	rr.WriteA = <-writeAC
	if rr.Final, rr.FinalFound, err = d.read(ctx, sp.storeAddr, sp.resource, Key); err != nil {
		return rr, err
	}
	rr.judge()
	return rr, nil
}

// awaitExpiry polls the lock's status from shortly before the lease's TTL
// runs out until the lease with token is gone, and notes when it saw that.
func (d *driver) awaitExpiry(ctx context.Context, tl *timeline, resource string, token fence.Token) error {
	const poll = 5 * time.Millisecond
	start := time.Now()
	deadline := start.Add(d.cfg.TTL + 10*time.Second)
	wait := d.cfg.TTL * 9 / 10
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = poll
		st, err := d.locks.Status(ctx, resource)
		if err != nil {
			return fmt.Errorf("watching A's lease: %w", err)
		}
		if !st.Held || st.Token != token {
			tl.add(Event{At: tl.now(), Actor: ActorLock, Kind: KindExpire,
				Message: fmt.Sprintf("lease %d expired: A no longer holds the lock", token)})
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lease %d still held %s after it was granted with ttl %s", token, time.Since(start).Round(time.Millisecond), d.cfg.TTL)
		}
	}
}

// put writes holder's name under Key with token, and records the request.
// A write the storage does not accept is an outcome, not an error.
func (d *driver) put(ctx context.Context, tl *timeline, store *client.API, resource, holder string, token fence.Token) Write {
	w := Write{Holder: holder, Value: holder, Token: token}
	sent := tl.now()
	wr, err := store.Put(ctx, resource, Key, []byte(holder), token, fence.Cond{})
	if err == nil {
		w.Status, w.Revision = http.StatusOK, wr.Rev
	} else {
		w.Error = err.Error()
		var p *wire.Problem
		if errors.As(err, &p) {
			w.Status, w.Code, w.Presented, w.LastFence = p.Status, p.Code, p.Presented, p.LastFence
		}
	}
	tl.add(Event{At: sent, Actor: holder, To: ActorStore, Kind: KindPut,
		Message: fmt.Sprintf("PUT %s=%s, token %d", Key, holder, token), Reply: w.Reply()})
	return w
}

// read returns the value stored under resource/key, with a plain GET that
// both storages answer alike.
func (d *driver) read(ctx context.Context, storeAddr, resource, key string) (value string, found bool, err error) {
	u := strings.TrimSuffix(storeAddr, "/") + "/v1/kv/" + url.PathEscape(resource) + "/" + url.PathEscape(key)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", false, fmt.Errorf("reading %s back: %w", key, err)
	}
	if d.cfg.AuthToken != "" {
		req.Header.Set("Authorization", "Bearer "+d.cfg.AuthToken)
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		return "", false, fmt.Errorf("reading %s back: %w", key, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case err != nil:
		return "", false, fmt.Errorf("reading %s back: %w", key, err)
	case resp.StatusCode == http.StatusNotFound:
		return "", false, nil
	case resp.StatusCode != http.StatusOK:
		return "", false, fmt.Errorf("reading %s back: GET %s: %s", key, u, resp.Status)
	}
	return string(body), true, nil
}

// judge sets the run's Outcome and Summary.
func (rr *RunResult) judge() {
	a, b := rr.WriteA, rr.WriteB
	final := "nothing"
	if rr.FinalFound {
		final = fmt.Sprintf("%q", rr.Final)
	}
	switch {
	case a.Fenced() && a.Presented == rr.TokenA && a.LastFence == rr.TokenB && rr.FinalFound && rr.Final == b.Value:
		rr.Outcome = OutcomeStaleRejected
		rr.Summary = fmt.Sprintf("the stale write was rejected: A presented token %d, the storage's last_fence was %d; B's value stands",
			a.Presented, a.LastFence)
	case a.Accepted() && rr.FinalFound && rr.Final == a.Value:
		rr.Outcome = OutcomeStaleWon
		rr.Summary = fmt.Sprintf("the stale write won: A, whose lease %d had expired, overwrote B's value; B's update is lost", rr.TokenA)
	default:
		rr.Outcome = OutcomeOther
		rr.Summary = fmt.Sprintf("A's write (token %d): %s; B's write (token %d): %s; the key holds %s",
			a.Token, a.Reply(), b.Token, b.Reply(), final)
	}
}

// timeline collects a run's events from several goroutines.
type timeline struct {
	start time.Time // read-only

	mu     sync.Mutex
	events []Event
}

// now returns the time since the run started.
func (t *timeline) now() time.Duration { return time.Since(t.start) }

func (t *timeline) add(e Event) {
	t.mu.Lock()
	t.events = append(t.events, e)
	t.mu.Unlock()
}

// sorted returns the events in the order of At.
func (t *timeline) sorted() []Event {
	t.mu.Lock()
	events := slices.Clone(t.events)
	t.mu.Unlock()
	slices.SortStableFunc(events, func(a, b Event) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	return events
}
