package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/fence-lock/fence/fencetest"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// newServer runs the lock service and bolt storage behind the HTTP API in
// this process, on a loopback port, and returns its URL.
func newServer(t testing.TB) string {
	t.Helper()
	return fencetest.NewServer(t, nil)
}

// held reports whether resource is locked on the server at url.
func held(t *testing.T, url, resource string) bool {
	t.Helper()
	resp, err := http.Get(url + "/v1/locks/" + resource)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct {
		Held bool `json:"held"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s.Held
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"Cycle", Config{Workload: Cycle, Clients: 4, Resources: 4}},
		{"CycleSharedResources", Config{Workload: Cycle, Clients: 4, Resources: 2, Wait: DefaultWait}},
		{"Write", Config{Workload: Write, Clients: 3, Resources: 6, TTL: 600 * time.Millisecond}}, // renews every 200 ms
		{"Contended", Config{Workload: Contended, Clients: 6, Resources: 1, Wait: DefaultWait}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := tc.cfg
			cfg.Addr = newServer(t)
			cfg.Duration = 800 * time.Millisecond
			cfg.Warmup = 100 * time.Millisecond
			cfg.ValueSize = DefaultValueSize
			cfg.ProgressInterval = 200 * time.Millisecond
			var progress atomic.Int64
			var measured []Progress // Progress is called from one goroutine, and not after Run returns
			cfg.Progress = func(p Progress) {
				progress.Add(1)
				if !p.Warmup {
					measured = append(measured, p)
				}
			}
			rep, err := Run(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Ops == 0 || rep.OpsPerSec <= 0 {
				t.Fatalf("Ops=%d OpsPerSec=%v, want some", rep.Ops, rep.OpsPerSec)
			}
			if rep.ErrorsTotal != 0 || len(rep.Errors) != 0 {
				t.Fatalf("Errors=%v (%v), want none", rep.Errors, rep.ErrorSamples)
			}
			if rep.Fenced != 0 || rep.Overlaps != 0 || rep.Regressions != 0 || rep.ExpiredLeases != 0 {
				t.Fatalf("fenced %d, overlaps %d, regressions %d, expired %d: want 0",
					rep.Fenced, rep.Overlaps, rep.Regressions, rep.ExpiredLeases)
			}
			if rep.Interrupted || rep.DurationS != cfg.Duration.Seconds() {
				t.Fatalf("Interrupted=%v DurationS=%v, want the whole %v", rep.Interrupted, rep.DurationS, cfg.Duration)
			}
			if progress.Load() == 0 {
				t.Error("Progress was never called")
			}
			for i, p := range measured {
				if p.Rate <= 0 || p.Remaining != cfg.Duration-p.Elapsed && p.Elapsed < cfg.Duration {
					t.Errorf("Progress %d = %+v, want a rate and the time left of %v", i, p, cfg.Duration)
				}
			}
			checkTimeline(t, rep, cfg.Duration)
			if rep.ClientOpsMin > rep.ClientOpsMax || rep.ClientOpsMax == 0 {
				t.Errorf("ClientOpsMin,Max=%d,%d", rep.ClientOpsMin, rep.ClientOpsMax)
			}
			// Steps count by the time they end: an operation that straddles
			// the start of the measurement counts, but not all of its steps.
			near := func(n, want int64) bool { return n >= want-int64(cfg.Clients) && n <= want+int64(cfg.Clients) }
			if w := rep.Latency.Write; w == nil || !near(w.Count, rep.Ops) || w.P50 <= 0 || w.P50 > w.P99 || w.P99 > w.Max {
				t.Errorf("Latency.Write=%+v, want about %d ordered samples", w, rep.Ops)
			}
			switch cfg.Workload {
			case Cycle, Contended:
				if c := rep.Latency.Cycle; c == nil || c.Count != rep.Ops {
					t.Errorf("Latency.Cycle=%+v, want Count=%d", c, rep.Ops)
				}
				// A cycle counts by its grant, as its acquisition does:
				// each acquisition is one cycle, done or failed.
				if rep.Acquisitions != rep.Ops+rep.ErrorsTotal || rep.Latency.Release == nil || rep.Latency.Renew != nil {
					t.Errorf("Acquisitions=%d, Ops=%d, ErrorsTotal=%d, Latency=%+v; want Acquisitions = Ops + ErrorsTotal",
						rep.Acquisitions, rep.Ops, rep.ErrorsTotal, rep.Latency)
				}
			case Write:
				if rep.Latency.Cycle != nil || rep.Latency.Release != nil || rep.Latency.Renew == nil {
					t.Errorf("Latency=%+v, want acquire, write and renew only", rep.Latency)
				} else if rep.Latency.Renew.Count == 0 {
					t.Error("no renew measured")
				}
			}
			if cfg.Workload == Contended && rep.Handoffs == 0 {
				t.Error("Handoffs=0: the lock never changed hands between the contending clients")
			}
			// Every lease was given back.
			for i := range cfg.Resources {
				if held(t, cfg.Addr, fmt.Sprint(ResourcePrefix, i)) {
					t.Errorf("%s%d is still held after the run", ResourcePrefix, i)
				}
			}
			var text strings.Builder
			if err := rep.WriteText(&text); err != nil || !strings.Contains(text.String(), "latency ms") {
				t.Errorf("WriteText: %v\n%s", err, text.String())
			}
		})
	}
}

func TestRun_Interrupted(t *testing.T) {
	url := newServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	rep, err := Run(ctx, Config{Addr: url, Workload: Cycle, Clients: 2, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Run returned %v after the cancel, want promptly", d)
	}
	if !rep.Interrupted || rep.DurationS <= 0 || rep.DurationS > 1 || rep.Ops == 0 {
		t.Fatalf("Interrupted=%v DurationS=%v Ops=%d, want an interrupted report of ~0.3s", rep.Interrupted, rep.DurationS, rep.Ops)
	}
	if rep.ErrorsTotal != 0 {
		t.Fatalf("Errors=%v: cancelled requests must not count", rep.ErrorSamples)
	}
	checkTimeline(t, rep, time.Duration(rep.DurationS*float64(time.Second)))
	for _, r := range []string{"bench-0", "bench-1"} {
		if held(t, url, r) {
			t.Errorf("%s is still held after an interrupted run", r)
		}
	}
}

func TestRun_NotReady(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := Run(t.Context(), Config{Addr: url, Workload: Cycle, Clients: 1, Duration: time.Second, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("err=%v, want not ready", err)
	}
}

// brokenServer is a lock service without mutual exclusion: every acquire is
// granted at once with a new token, and every write is accepted.
func brokenServer(t *testing.T) string {
	var mu sync.Mutex
	var token uint64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/acquire"):
			mu.Lock()
			token++
			fmt.Fprintf(w, `{"token":%d}`, token)
			mu.Unlock()
			time.Sleep(time.Millisecond)
		case strings.HasPrefix(r.URL.Path, "/v1/kv/"):
			time.Sleep(2 * time.Millisecond)
			fmt.Fprint(w, `{}`)
		case r.URL.Path == "/v1/locks/bench-0/release" && time.Now().UnixNano()%5 == 0:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"code":"lease_lost","detail":"no"}`)
		default:
			fmt.Fprint(w, `{}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestRun_DetectsOverlaps(t *testing.T) {
	rep, err := Run(t.Context(), Config{Addr: brokenServer(t), Workload: Contended, Clients: 4, Resources: 1,
		Duration: 300 * time.Millisecond, Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Overlaps == 0 {
		t.Fatalf("Overlaps=0 against a lock service that grants every acquire at once")
	}
	if rep.Errors["lease_lost"] == 0 || rep.ErrorSamples["lease_lost"] == "" {
		t.Fatalf("Errors=%v ErrorSamples=%v, want lease_lost counted with a sample", rep.Errors, rep.ErrorSamples)
	}
	checkTimeline(t, rep, 300*time.Millisecond)
}

func TestRunner_Checks(t *testing.T) {
	r := &runner{cfg: Config{TTL: time.Second}}
	res := &resource{holder: -1, last: -1}
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

	t.Run("HandOver", func(t *testing.T) {
		if r.granted(res, 0, at(0), at(1)) {
			t.Error("the first grant is no handoff")
		}
		r.releasing(res, 0)
		if !r.granted(res, 1, at(2), at(3)) {
			t.Error("a grant to another client after a release is a handoff")
		}
		if r.overlaps.Load() != 0 || r.expiries.Load() != 0 {
			t.Fatalf("overlaps %d, expiries %d after a clean handover", r.overlaps.Load(), r.expiries.Load())
		}
	})
	t.Run("Overlap", func(t *testing.T) {
		// Client 1 still holds (since 2 ms); client 2 is granted within the TTL.
		r.granted(res, 2, at(500), at(501))
		if r.overlaps.Load() != 1 {
			t.Fatalf("overlaps=%d, want 1", r.overlaps.Load())
		}
	})
	t.Run("RenewExtends", func(t *testing.T) {
		r.renewed(res, 2, at(900))
		r.granted(res, 3, at(1500), at(1600)) // within a TTL of the renew
		if r.overlaps.Load() != 2 {
			t.Fatalf("overlaps=%d, want 2", r.overlaps.Load())
		}
	})
	t.Run("Expired", func(t *testing.T) {
		r.granted(res, 4, at(2600), at(2601)) // client 3's lease (from 1500) ran out at 2500
		if r.overlaps.Load() != 2 || r.expiries.Load() != 1 {
			t.Fatalf("overlaps %d, expiries %d, want 2, 1", r.overlaps.Load(), r.expiries.Load())
		}
	})
	t.Run("Regression", func(t *testing.T) {
		r.accepted(res, 5, at(0), at(10))
		r.accepted(res, 4, at(5), at(12)) // sent before 5's answer: the order is unknown
		r.accepted(res, 5, at(20), at(21))
		if r.regressions.Load() != 0 {
			t.Fatalf("regressions=%d, want 0", r.regressions.Load())
		}
		r.accepted(res, 4, at(30), at(31)) // sent after 5 was accepted
		if r.regressions.Load() != 1 {
			t.Fatalf("regressions=%d, want 1", r.regressions.Load())
		}
	})
}

func TestConfig_Validate(t *testing.T) {
	ok := Config{Addr: "http://127.0.0.1:7700", Workload: Cycle, Clients: 1, Duration: time.Second}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate(%+v): %v", ok, err)
	}
	for name, change := range map[string]func(*Config){
		"NoAddr":           func(c *Config) { c.Addr = "" },
		"AddrNoScheme":     func(c *Config) { c.Addr = "127.0.0.1:7700" },
		"AddrQuery":        func(c *Config) { c.Addr = "http://h/?x=1" },
		"Workload":         func(c *Config) { c.Workload = "read" },
		"Clients":          func(c *Config) { c.Clients = 0 },
		"Resources":        func(c *Config) { c.Resources = -1 },
		"WriteNeedsOwn":    func(c *Config) { c.Workload, c.Clients, c.Resources = Write, 4, 2 },
		"Duration":         func(c *Config) { c.Duration = 0 },
		"Warmup":           func(c *Config) { c.Warmup = -time.Second },
		"TTLShort":         func(c *Config) { c.TTL = time.Millisecond },
		"WaitLong":         func(c *Config) { c.Wait = time.Hour },
		"ValueSize":        func(c *Config) { c.ValueSize = -1 },
		"Timeout":          func(c *Config) { c.Timeout = -1 },
		"KeyDotDot":        func(c *Config) { c.Key = "a/../b" },
		"KeyEmptySegment":  func(c *Config) { c.Key = "a//b" },
		"ProgressInterval": func(c *Config) { c.ProgressInterval = -1 },
	} {
		c := ok
		change(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate(%+v) passed, want an error", name, c)
		}
	}
}

func TestErrorCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&apiError{status: 409, code: "lock_held"}, "lock_held"},
		{fmt.Errorf("wrapped: %w", &apiError{status: 409, code: "fenced"}), "fenced"},
		{&badResponse{errors.New("eof")}, codeBadResponse},
		{context.DeadlineExceeded, codeTimeout},
		{errors.New("connection refused"), codeNetwork},
	} {
		if got := errorCode(tc.err); got != tc.want {
			t.Errorf("errorCode(%v)=%q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestEndpoints(t *testing.T) {
	e := newEndpoints("http://h", "bench-0", "a b/c%d")
	if e.kv != "http://h/v1/kv/bench-0/a%20b/c%25d" || e.acquire != "http://h/v1/locks/bench-0/acquire" {
		t.Fatalf("endpoints=%+v", e)
	}
}

// checkTimeline checks that rep's Timeline covers the measured time, and
// that its intervals and rep's Histograms add up to the totals of rep.
func checkTimeline(t *testing.T, rep *Report, measured time.Duration) {
	t.Helper()
	tl := rep.Timeline
	if tl == nil || tl.Interval != intervalFor(measured) && !rep.Interrupted {
		t.Fatalf("Timeline=%+v, want intervals of %v", tl, intervalFor(measured))
	}
	want := int((measured + tl.Interval - 1) / tl.Interval)
	if len(tl.Intervals) != want || tl.Intervals[0].Start != 0 || (tl.Intervals[len(tl.Intervals)-1].End-measured).Abs() > time.Microsecond {
		t.Fatalf("%d intervals from %v to %v, want %d from 0 to %v", len(tl.Intervals),
			tl.Intervals[0].Start, tl.Intervals[len(tl.Intervals)-1].End, want, measured)
	}
	var ops, errs int64
	counts := map[string]int64{}
	for i, iv := range tl.Intervals {
		if i > 0 && iv.Start != tl.Intervals[i-1].End || iv.Seconds() <= 0 {
			t.Errorf("interval %d is %v to %v, after one that ends at %v", i, iv.Start, iv.End, tl.Intervals[max(i-1, 0)].End)
		}
		ops += iv.Ops
		errs += iv.Errors
		for step, q := range iv.Latency {
			counts[step] += q.Count
			if q.Count == 0 || q.P50 <= 0 || q.P50 > q.P90 || q.P90 > q.P99 || q.P99 > q.Max {
				t.Errorf("interval %d: %s %+v, want ordered quantiles", i, step, q)
			}
		}
	}
	if ops != rep.Ops || errs != rep.ErrorsTotal {
		t.Errorf("the intervals have %d ops and %d errors, the report %d and %d", ops, errs, rep.Ops, rep.ErrorsTotal)
	}
	for name, l := range map[string]*Latency{"acquire": rep.Latency.Acquire, "write": rep.Latency.Write,
		"renew": rep.Latency.Renew, "release": rep.Latency.Release, "cycle": rep.Latency.Cycle} {
		h := rep.Histograms[name]
		if l == nil {
			if h != nil || counts[name] != 0 {
				t.Errorf("%s: a histogram or latencies over time for a step the workload does not have", name)
			}
			continue
		}
		hc := int64(-1)
		if h != nil {
			hc = h.Count()
		}
		if hc != l.Count || counts[name] != l.Count {
			t.Errorf("%s: Latency.Count=%d, the histogram's %d, the intervals' %d", name, l.Count, hc, counts[name])
		}
	}
}
