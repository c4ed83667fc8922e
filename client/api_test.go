package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/httpapi"
	"github.com/fence-lock/fence/internal/fake"
	"github.com/fence-lock/fence/wire"
)

// refusedAddr returns the base URL of a loopback port that nothing listens
// on: connecting to it is refused.
// env is a fence server over a fake lock service and store, whose
// failures the test injects.
type env struct {
	f   *fake.Service
	srv *httpapi.Handler
	ts  *httptest.Server
}

func newEnv(t *testing.T) *env {
	t.Helper()
	f := fake.New()
	e := &env{f: f, srv: httpapi.NewHandler(f, f)}
	e.srv.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	e.ts = httptest.NewServer(e.srv)
	t.Cleanup(e.ts.Close)
	return e
}

// acquire takes a lease on resource for holder, straight from the fake.
func (e *env) acquire(t *testing.T, resource, holder string) fence.Token {
	t.Helper()
	l, err := e.f.Acquire(t.Context(), resource, holder, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	return l.Token
}

func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close()
	return addr
}

// stub is a test server that counts the requests it gets and answers them
// with h.
type stub struct {
	URL string
	n   atomic.Int32
}

func newStub(t *testing.T, h http.HandlerFunc) *stub {
	t.Helper()
	s := &stub{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.n.Add(1)
		h(w, r)
	}))
	t.Cleanup(ts.Close)
	s.URL = ts.URL
	return s
}

// requests returns how many requests s got.
func (s *stub) requests() int { return int(s.n.Load()) }

// answer returns a handler that answers err as the Server would.
func answer(err error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		httpapi.WriteProblem(w, err)
	}
}

// drop reads the request and closes the connection without an answer, like a
// server that fails after it has received, and perhaps applied, a request.
func drop(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		conn.Close()
	}
}

// setErr makes every method of e's fake fail with err (nil: none).
func (e *env) setErr(err error) {
	e.f.SetErr(err)
}

// newTestClient returns a client of addrs that retries without waiting long.
func newTestClient(t *testing.T, addrs ...string) *API {
	t.Helper()
	c, err := NewAPI(strings.Join(addrs, ","))
	if err != nil {
		t.Fatal(err)
	}
	c.Backoff = time.Millisecond
	return c
}

func TestNewClient_Addrs(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		for _, tt := range []struct {
			in   string
			want []string
		}{
			{"http://127.0.0.1:7700", []string{"http://127.0.0.1:7700"}},
			{"http://127.0.0.1:7700/", []string{"http://127.0.0.1:7700"}},
			{"https://fence.internal/prefix/", []string{"https://fence.internal/prefix"}},
			{"http://a:7700,http://b:7700", []string{"http://a:7700", "http://b:7700"}},
			{" http://a:7700 , https://b:7700/x,http://c ", []string{"http://a:7700", "https://b:7700/x", "http://c"}},
			{"http://a:7700,http://a:7701,http://a:7700/other", []string{"http://a:7700", "http://a:7701", "http://a:7700/other"}},
		} {
			c, err := NewAPI(tt.in)
			if err != nil {
				t.Fatalf("NewAPI(%q): %v", tt.in, err)
			}
			if got := c.Addrs(); !slices.Equal(got, tt.want) {
				t.Fatalf("NewAPI(%q).Addrs()=%q, want %q", tt.in, got, tt.want)
			}
			if got, want := c.Addr(), strings.Join(tt.want, ","); got != want {
				t.Fatalf("NewAPI(%q).Addr()=%q, want %q", tt.in, got, want)
			}
			again, err := NewAPI(c.Addr())
			if err != nil || !slices.Equal(again.Addrs(), tt.want) {
				t.Fatalf("NewAPI(Addr()=%q)=%v, %v; want the same addresses", c.Addr(), again.Addrs(), err)
			}
			c.Addrs()[0] = "changed"
			if c.Addrs()[0] != tt.want[0] {
				t.Fatal("Addrs returns the client's own slice")
			}
		}
	})
	t.Run("Bad", func(t *testing.T) {
		for _, in := range []string{
			"",
			" ",
			",",
			"http://a:7700,",
			",http://a:7700",
			"http://a:7700,,http://b:7700",
			"http://a:7700, ,http://b:7700",
			"http://a:7700,http://a:7700",
			"http://a:7700,http://a:7700/",
			"http://a:7700,HTTP://A:7700",
			"127.0.0.1:7700",
			"ftp://a:7700",
			"http://",
			"http://a:7700?x=1",
			"http://a:7700?",
			"http://a:7700#top",
			"http://a:7700,ftp://b:7700",
			"http://a:7700 http://b:7700",
			"http://a:7700;http://b:7700",
			"http://[::1",
		} {
			if c, err := NewAPI(in); err == nil {
				t.Errorf("NewAPI(%q)=%v, want an error", in, c.Addrs())
			} else if !strings.HasPrefix(err.Error(), "client: ") {
				t.Errorf("NewAPI(%q): error %q does not name the package", in, err)
			}
		}
	})
	t.Run("Defaults", func(t *testing.T) {
		c, err := NewAPI("http://a:7700")
		if err != nil {
			t.Fatal(err)
		}
		if c.RetryFor != DefaultRetryFor || c.Retries != -1 || c.Backoff != 50*time.Millisecond {
			t.Fatalf("RetryFor=%s Retries=%d Backoff=%s, want %s, -1, 50ms", c.RetryFor, c.Retries, c.Backoff, DefaultRetryFor)
		}
	})
}

// TestProblem_NotLeader checks that not_leader is a 503 that decodes back to
// fence.ErrNotLeader and does not leave the outcome unknown.
func TestProblem_NotLeader(t *testing.T) {
	for _, err := range []error{fence.ErrNotLeader, fmt.Errorf("raft: forwarding to the leader: %w", fence.ErrNotLeader)} {
		rec := httptest.NewRecorder()
		httpapi.WriteProblem(rec, err)
		got := wire.ProblemError(rec.Code, rec.Body.Bytes())
		var p *wire.Problem
		if rec.Code != http.StatusServiceUnavailable || !errors.As(got, &p) || p.Code != "not_leader" || p.Type != wire.ProblemTypeBase+"not_leader" {
			t.Fatalf("status %d, body %s: want 503 not_leader", rec.Code, rec.Body.Bytes())
		}
		if !errors.Is(got, fence.ErrNotLeader) || errors.Is(got, fence.ErrClosed) {
			t.Fatalf("wire.ProblemError(...)=%v: errors.Is(ErrNotLeader)=%v, errors.Is(ErrClosed)=%v; want true, false",
				got, errors.Is(got, fence.ErrNotLeader), errors.Is(got, fence.ErrClosed))
		}
		if IsAmbiguous(got) {
			t.Fatalf("IsAmbiguous(%v)=true, want false: nothing was applied", got)
		}
	}
	rec := httptest.NewRecorder()
	httpapi.WriteProblem(rec, fence.ErrClosed)
	if got := wire.ProblemError(rec.Code, rec.Body.Bytes()); !IsAmbiguous(got) || errors.Is(got, fence.ErrNotLeader) {
		t.Fatalf("unavailable: IsAmbiguous=%v errors.Is(ErrNotLeader)=%v, want true, false", IsAmbiguous(got), errors.Is(got, fence.ErrNotLeader))
	}
}

// TestClient_Rotation checks that failures move the client round robin
// through its addresses, and that the next call starts where the last one
// ended.
func TestClient_Rotation(t *testing.T) {
	var (
		mu    sync.Mutex
		order []string
	)
	unavailable := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			answer(fence.ErrClosed)(w, r)
		}
	}
	a, b, cs := newStub(t, unavailable("a")), newStub(t, unavailable("b")), newStub(t, unavailable("c"))
	c := newTestClient(t, a.URL, b.URL, cs.URL)
	c.Retries = 4
	if _, err := c.Status(t.Context(), "orders"); !errors.Is(err, fence.ErrClosed) {
		t.Fatalf("Status: %v, want ErrClosed after the retries", err)
	}
	c.Retries = 0
	if _, err := c.Status(t.Context(), "orders"); !errors.Is(err, fence.ErrClosed) {
		t.Fatalf("Status: %v, want ErrClosed", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"a", "b", "c", "a", "b", "c"}; !slices.Equal(order, want) {
		t.Fatalf("servers tried: %q, want %q", order, want)
	}
}

// TestClient_FailoverAtOnce checks that a retry that moves to an address that
// has not failed goes at once, and that the client then stays there.
func TestClient_FailoverAtOnce(t *testing.T) {
	e := newEnv(t)
	c := newTestClient(t, refusedAddr(t), refusedAddr(t), e.ts.URL)
	c.Backoff = time.Second // a wait would be at least 500 ms
	start := time.Now()
	if _, err := c.Status(t.Context(), "orders"); err != nil {
		t.Fatalf("Status: %v", err)
	}
	if d := time.Since(start); d > 400*time.Millisecond {
		t.Fatalf("Status took %s past two refused servers, want no backoff", d)
	}
	for range 3 {
		if _, err := c.Status(t.Context(), "orders"); err != nil {
			t.Fatalf("Status: %v", err)
		}
	}
	if n := e.f.Calls("Status"); n != 4 {
		t.Fatalf("third server got %d Status calls, want 4", n)
	}
	if d := time.Since(start); d > 400*time.Millisecond {
		t.Fatalf("4 Status calls took %s, want them sent to the third server at once", d)
	}
}

// TestClient_Sticky checks that the client keeps the address that answered,
// even when an earlier one is back, and moves on only when it fails.
func TestClient_Sticky(t *testing.T) {
	ea, eb := newEnv(t), newEnv(t)
	var aDown atomic.Bool
	aDown.Store(true)
	a := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		if aDown.Load() {
			answer(fence.ErrClosed)(w, r)
			return
		}
		ea.srv.ServeHTTP(w, r)
	})
	c := newTestClient(t, a.URL, eb.ts.URL)
	if _, err := c.Status(t.Context(), "orders"); err != nil {
		t.Fatalf("Status: %v", err)
	}
	aDown.Store(false) // a is back, but b answers: the client stays on b
	for range 5 {
		if _, err := c.Status(t.Context(), "orders"); err != nil {
			t.Fatalf("Status: %v", err)
		}
	}
	if na, nb := a.requests(), eb.f.Calls("Status"); na != 1 || nb != 6 {
		t.Fatalf("a got %d requests and b %d Status calls, want 1 and 6", na, nb)
	}
	eb.setErr(fence.ErrNotLeader) // b is replaced: the client moves back to a
	for range 3 {
		if _, err := c.Status(t.Context(), "orders"); err != nil {
			t.Fatalf("Status: %v", err)
		}
	}
	if na, nb := ea.f.Calls("Status"), eb.f.Calls("Status"); na != 3 || nb != 7 {
		t.Fatalf("a got %d Status calls and b %d, want 3 and 7", na, nb)
	}
}

// TestClient_ConcurrentFailures checks that calls that fail on the same
// address at once move the client on by one address, not by one each.
func TestClient_ConcurrentFailures(t *testing.T) {
	a := newStub(t, answer(fence.ErrClosed))
	eb, ec := newEnv(t), newEnv(t)
	c := newTestClient(t, a.URL, eb.ts.URL, ec.ts.URL)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range cap(errs) {
		wg.Go(func() {
			_, err := c.Status(t.Context(), "orders")
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
	}
	if n := ec.f.Calls("Status"); n != 0 || c.srv.current() != 1 {
		t.Fatalf("third server got %d calls, current address %d; want 0 and the second (1)", n, c.srv.current())
	}
}

func TestClient_RetryFor(t *testing.T) {
	t.Run("RidesOut", func(t *testing.T) {
		// A failover: the only address answers 503 for a while.
		e := newEnv(t)
		var n atomic.Int32
		flaky := newStub(t, func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) <= 5 {
				answer(fence.ErrNotLeader)(w, r)
				return
			}
			e.srv.ServeHTTP(w, r)
		})
		c := newTestClient(t, flaky.URL)
		l, err := c.Acquire(t.Context(), "orders", "a", time.Minute, 0)
		if err != nil || l.Token == 0 {
			t.Fatalf("Acquire=%+v, %v; want a lease after the failover", l, err)
		}
		if got := flaky.requests(); got != 6 {
			t.Fatalf("%d requests, want 6", got)
		}
	})
	t.Run("GivesUp", func(t *testing.T) {
		a, b := newStub(t, answer(fence.ErrClosed)), newStub(t, answer(fence.ErrClosed))
		c := newTestClient(t, a.URL, b.URL)
		c.Backoff = 20 * time.Millisecond
		c.RetryFor = 300 * time.Millisecond
		start := time.Now()
		_, err := c.Status(t.Context(), "orders")
		d := time.Since(start)
		if !errors.Is(err, fence.ErrClosed) || !IsAmbiguous(err) {
			t.Fatalf("Status: %v, want the last answer, unavailable", err)
		}
		if d < c.RetryFor || d > c.RetryFor+500*time.Millisecond {
			t.Fatalf("gave up after %s, want just after RetryFor %s", d, c.RetryFor)
		}
		if n := a.requests() + b.requests(); n < 4 {
			t.Fatalf("%d attempts, want retries until RetryFor", n)
		}
	})
	t.Run("GivesUpRefused", func(t *testing.T) {
		c := newTestClient(t, refusedAddr(t), refusedAddr(t))
		c.RetryFor = 200 * time.Millisecond
		start := time.Now()
		_, err := c.Fence(t.Context(), "orders")
		if d := time.Since(start); err == nil || d < c.RetryFor || d > c.RetryFor+500*time.Millisecond {
			t.Fatalf("Fence: %v after %s, want an error just after RetryFor %s", err, d, c.RetryFor)
		}
		if IsAmbiguous(err) {
			t.Fatalf("IsAmbiguous(%v)=true, want false: no request was sent", err)
		}
	})
	t.Run("Zero", func(t *testing.T) {
		a, b := newStub(t, answer(fence.ErrClosed)), newStub(t, answer(fence.ErrClosed))
		c := newTestClient(t, a.URL, b.URL)
		c.RetryFor = 0
		if _, err := c.Status(t.Context(), "orders"); !errors.Is(err, fence.ErrClosed) {
			t.Fatalf("Status: %v, want ErrClosed", err)
		}
		if na, nb := a.requests(), b.requests(); na != 1 || nb != 0 {
			t.Fatalf("requests: a %d, b %d; want 1, 0 (no retry)", na, nb)
		}
	})
	t.Run("RetriesCap", func(t *testing.T) {
		for retries, want := range map[int]int{0: 1, 1: 2, 3: 4} {
			s := newStub(t, answer(fence.ErrNotLeader))
			c := newTestClient(t, s.URL)
			c.Retries = retries
			if _, err := c.Status(t.Context(), "orders"); !errors.Is(err, fence.ErrNotLeader) {
				t.Fatalf("Status: %v, want ErrNotLeader", err)
			}
			if got := s.requests(); got != want {
				t.Fatalf("Retries=%d: %d attempts, want %d", retries, got, want)
			}
		}
	})
	t.Run("ContextEnds", func(t *testing.T) {
		s := newStub(t, answer(fence.ErrClosed))
		c := newTestClient(t, s.URL)
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.Status(ctx, "orders")
		// The deadline ends a wait (the error names the last answer too) or
		// an attempt.
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), fence.ErrClosed.Error()) || !IsAmbiguous(err) {
			t.Fatalf("Status: %v, want the deadline, after unavailable, ambiguous", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Status returned %s after its context ended", d)
		}
	})
}

// newHolderEnv returns an env where orders is held, with the token it
// returns, and its key k exists. Its fake has counted no calls yet.
func newHolderEnv(t *testing.T) (*env, fence.Token) {
	t.Helper()
	e := newEnv(t)
	tok := e.acquire(t, "orders", "a")
	if _, err := e.f.Put(t.Context(), "orders", "k", []byte("v0"), tok, fence.Cond{}); err != nil {
		t.Fatal(err)
	}
	e.f.ResetCalls()
	return e, tok
}

// TestClient_NotRetryable checks that calls that are not safe to repeat are
// resent to the next address only when they certainly did not take effect.
func TestClient_NotRetryable(t *testing.T) {
	calls := []struct {
		method string
		call   func(ctx context.Context, c *API, tok fence.Token) error
	}{
		{"Txn", func(ctx context.Context, c *API, tok fence.Token) error {
			_, err := c.Txn(ctx, &fence.Txn{Fences: map[string]fence.Token{"orders": tok},
				Then: []fence.Op{{Kind: fence.OpPut, Resource: "orders", Key: "k", Value: []byte("v")}}})
			return err
		}},
		{"Put", func(ctx context.Context, c *API, tok fence.Token) error {
			_, err := c.Put(ctx, "orders", "k", []byte("v"), tok, fence.Cond{IfExists: true})
			return err
		}},
		{"Delete", func(ctx context.Context, c *API, tok fence.Token) error {
			_, err := c.Delete(ctx, "orders", "k", tok, fence.Cond{})
			return err
		}},
		{"Revoke", func(ctx context.Context, c *API, tok fence.Token) error {
			_, err := c.Revoke(ctx, "other")
			return err
		}},
	}
	for _, call := range calls {
		t.Run(call.method, func(t *testing.T) {
			t.Run("Dropped", func(t *testing.T) {
				b, tok := newHolderEnv(t)
				a := newStub(t, drop)
				c := newTestClient(t, a.URL, b.ts.URL)
				err := call.call(t.Context(), c, tok)
				if err == nil || !IsAmbiguous(err) {
					t.Fatalf("%s: %v, want an ambiguous transport error", call.method, err)
				}
				if na, nb := a.requests(), b.f.Calls(call.method); na != 1 || nb != 0 {
					t.Fatalf("%s sent %d times to a and %d to b, want 1 and 0", call.method, na, nb)
				}
				// The client moved on: the next call goes to b.
				if _, err := c.Status(t.Context(), "orders"); err != nil || a.requests() != 1 || b.f.Calls("Status") != 1 {
					t.Fatalf("Status after the failure: %v, a got %d requests, b %d Status calls; want b", err, a.requests(), b.f.Calls("Status"))
				}
			})
			t.Run("Unavailable", func(t *testing.T) {
				b, tok := newHolderEnv(t)
				a := newEnv(t)
				a.setErr(fence.ErrClosed)
				c := newTestClient(t, a.ts.URL, b.ts.URL)
				err := call.call(t.Context(), c, tok)
				if !errors.Is(err, fence.ErrClosed) || !IsAmbiguous(err) {
					t.Fatalf("%s: %v, want unavailable, ambiguous", call.method, err)
				}
				if na, nb := a.f.Calls(call.method), b.f.Calls(call.method); na != 1 || nb != 0 {
					t.Fatalf("%s sent %d times to a and %d to b, want 1 and 0", call.method, na, nb)
				}
			})
			t.Run("NotLeader", func(t *testing.T) {
				b, tok := newHolderEnv(t)
				a := newEnv(t)
				a.setErr(fence.ErrNotLeader)
				c := newTestClient(t, a.ts.URL, b.ts.URL)
				if err := call.call(t.Context(), c, tok); err != nil {
					t.Fatalf("%s: %v, want it resent to b and applied there", call.method, err)
				}
				if na, nb := a.f.Calls(call.method), b.f.Calls(call.method); na != 1 || nb != 1 {
					t.Fatalf("%s sent %d times to a and %d to b, want 1 and 1", call.method, na, nb)
				}
			})
			t.Run("Refused", func(t *testing.T) {
				b, tok := newHolderEnv(t)
				c := newTestClient(t, refusedAddr(t), b.ts.URL)
				if err := call.call(t.Context(), c, tok); err != nil {
					t.Fatalf("%s: %v, want it resent to b and applied there", call.method, err)
				}
				if nb := b.f.Calls(call.method); nb != 1 {
					t.Fatalf("%s sent %d times to b, want 1", call.method, nb)
				}
			})
			t.Run("RetriesZero", func(t *testing.T) {
				b, tok := newHolderEnv(t)
				a := newStub(t, answer(fence.ErrNotLeader))
				c := newTestClient(t, a.URL, b.ts.URL)
				c.Retries = 0
				if err := call.call(t.Context(), c, tok); !errors.Is(err, fence.ErrNotLeader) {
					t.Fatalf("%s: %v, want ErrNotLeader, not resent", call.method, err)
				}
				if na, nb := a.requests(), b.f.Calls(call.method); na != 1 || nb != 0 {
					t.Fatalf("%s sent %d times to a and %d to b, want 1 and 0", call.method, na, nb)
				}
			})
		})
	}
}

// TestClient_RetryableResent checks that a call that is safe to repeat is
// resent to the next address after an ambiguous transport error.
func TestClient_RetryableResent(t *testing.T) {
	b := newEnv(t)
	tok := b.acquire(t, "orders", "a")
	a := newStub(t, drop)
	c := newTestClient(t, a.URL, b.ts.URL)
	if _, err := c.Put(t.Context(), "orders", "k", []byte("v"), tok, fence.Cond{}); err != nil {
		t.Fatalf("Put: %v, want it resent to b", err)
	}
	if na, nb := a.requests(), b.f.Calls("Put"); na != 1 || nb != 1 {
		t.Fatalf("Put sent %d times to a and %d to b, want 1 and 1", na, nb)
	}
}

// TestClient_MaybeApplied checks that a call whose last attempt certainly did
// nothing stays ambiguous when an earlier attempt may have taken effect.
func TestClient_MaybeApplied(t *testing.T) {
	a, b := newStub(t, drop), newStub(t, answer(fence.ErrNotLeader))
	c := newTestClient(t, a.URL, b.URL)
	c.Retries = 1
	_, err := c.Put(t.Context(), "orders", "k", []byte("v"), 1, fence.Cond{})
	if !errors.Is(err, fence.ErrNotLeader) || !IsAmbiguous(err) {
		t.Fatalf("Put: %v (ambiguous %v), want ErrNotLeader and ambiguous", err, IsAmbiguous(err))
	}
	var p *wire.Problem
	if !errors.As(err, &p) || p.Code != "not_leader" {
		t.Fatalf("errors.As(*wire.Problem) on %v: want the last answer, not_leader", err)
	}

	b2 := newStub(t, answer(fence.ErrNotLeader))
	c = newTestClient(t, refusedAddr(t), b2.URL)
	c.Retries = 3
	if _, err := c.Put(t.Context(), "orders", "k", []byte("v"), 1, fence.Cond{}); !errors.Is(err, fence.ErrNotLeader) || IsAmbiguous(err) {
		t.Fatalf("Put: %v (ambiguous %v), want ErrNotLeader, not ambiguous: no attempt did anything", err, IsAmbiguous(err))
	}
}

// TestClient_TLSRefusalNotRetried checks that a TLS handshake that fails for
// good is returned at once, without the retries of a failover.
func TestClient_TLSRefusalNotRetried(t *testing.T) {
	for name, start := range map[string]func(*httptest.Server){
		"UntrustedServer": func(ts *httptest.Server) { ts.StartTLS() },
		"ClientCertRequired": func(ts *httptest.Server) {
			ts.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
			ts.StartTLS()
		},
	} {
		t.Run(name, func(t *testing.T) {
			ts := httptest.NewUnstartedServer(newEnv(t).srv)
			ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake errors
			start(ts)
			t.Cleanup(ts.Close)
			var dials atomic.Int32
			tr := ts.Client().Transport.(*http.Transport).Clone()
			if name == "UntrustedServer" {
				tr.TLSClientConfig = nil // the system's roots, which do not hold the test CA
			}
			tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}
			c := newTestClient(t, ts.URL)
			c.HTTPClient = &http.Client{Transport: tr}
			c.RetryFor = time.Second // enough to see retries, if there were any
			if _, err := c.Status(t.Context(), "orders"); err == nil {
				t.Fatal("Status succeeded, want a TLS error")
			}
			if n := dials.Load(); n != 1 {
				t.Fatalf("%d connections, want 1: no retry", n)
			}
		})
	}
}
