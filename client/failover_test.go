package client_test

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/engine/bolt"
	"github.com/fence-lock/fence/httpapi"
	"github.com/fence-lock/fence/lock"
)

// newEngine returns the fence API over one real lock service and bolt
// storage, which several fronts serve as the servers of a cluster share one
// replicated engine.
func newEngine(t *testing.T) http.Handler {
	t.Helper()
	db, err := bolt.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	locks := lock.NewService(db)
	locks.Logger = logger
	if err := locks.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	api := httpapi.NewHandler(locks, db)
	api.Logger = logger
	t.Cleanup(func() {
		locks.Close()
		db.Close()
	})
	return api
}

// front is one server of a test cluster: it counts the requests it gets by
// "METHOD /path" and answers them with h.
type front struct {
	URL string
	srv *httptest.Server

	mu     sync.Mutex
	counts map[string]int
	seen   chan string // every request's "METHOD /path", if there is room
}

func newFront(t *testing.T, h http.Handler) *front {
	t.Helper()
	f := &front{counts: map[string]int{}, seen: make(chan string, 1000)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := r.Method + " " + r.URL.Path
		f.mu.Lock()
		f.counts[k]++
		f.mu.Unlock()
		select {
		case f.seen <- k:
		default: // nobody is waiting for that many
		}
		h.ServeHTTP(w, r)
	}))
	f.URL = f.srv.URL
	t.Cleanup(f.srv.Close)
	return f
}

// count returns how many "METHOD /path" requests f got.
func (f *front) count(k string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[k]
}

// down closes f: connecting to it is refused from now on.
func (f *front) down() {
	f.srv.CloseClientConnections()
	f.srv.Close()
}

// problem answers a problem+json body with code, as a fence server would.
func problem(status int, code, detail string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		io.WriteString(w, `{"type":"urn:fence:problem:`+code+`","title":"`+http.StatusText(status)+`","status":`+strconv.Itoa(status)+`,"detail":"`+detail+`","code":"`+code+`"}`)
	}
}

// TestLease_Failover checks that a lease's keepalive carries on across a
// failover: the server it was acquired through goes away, and the renewals
// go to another server of the cluster for several TTLs without the lease
// being declared lost.
func TestLease_Failover(t *testing.T) {
	engine := newEngine(t)
	a, b := newFront(t, engine), newFront(t, engine)
	c, err := client.New(a.URL + "," + b.URL)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 500 * time.Millisecond
	l, err := c.Acquire(t.Context(), "orders", fence.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(t.Context())
	const acquire, renew = "POST /v1/locks/orders/acquire", "POST /v1/locks/orders/renew"
	if a.count(acquire) != 1 || b.count(acquire) != 0 {
		t.Fatalf("acquires: a %d, b %d; want the first server's", a.count(acquire), b.count(acquire))
	}
	a.down()
	start := time.Now()
	// Renewals come about every TTL/3: 9 through b are 3 TTLs.
	const renewals = 9
	timeout := time.After(20 * ttl)
	for n := 0; n < renewals; {
		select {
		case k := <-b.seen:
			if k == renew {
				n++
			}
		case <-l.Done():
			t.Fatalf("lease ended after %s with the first server down: %v", time.Since(start), l.Err())
		case <-timeout:
			t.Fatalf("only %d renewals through the second server in %s", n, time.Since(start))
		}
	}
	if err := l.Err(); err != nil {
		t.Fatalf("Err=%v after %d renewals through the second server, want the lease held", err, renewals)
	}
	st, err := c.Status(t.Context(), "orders")
	if err != nil || !st.Held || st.Token != l.Token() {
		t.Fatalf("Status=%+v, %v; want held with token %d", st, err, l.Token())
	}
	if _, err := l.Put(l.Context(), "k", []byte("v")); err != nil {
		t.Fatalf("Put after the failover: %v", err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatalf("Release after the failover: %v", err)
	}
	if st, err := c.Status(t.Context(), "orders"); err != nil || st.Held {
		t.Fatalf("Status after Release=%+v, %v; want not held", st, err)
	}
}

// TestLease_TxnFailover checks that a txn, which is not safe to repeat, is
// resent to another server after 503 not_leader (nothing was applied), but
// not after 503 unavailable (the outcome is unknown).
func TestLease_TxnFailover(t *testing.T) {
	const txn = "POST /v1/txn"
	// setup returns a client of a, which answers txns with standby, and b,
	// both in front of one engine, and a lease acquired through a.
	setup := func(t *testing.T, standby http.HandlerFunc) (c *client.Client, l *client.Lease, a, b *front) {
		engine := newEngine(t)
		a = newFront(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/txn" {
				standby(w, r)
				return
			}
			engine.ServeHTTP(w, r)
		}))
		b = newFront(t, engine)
		c, err := client.New(a.URL + "," + b.URL)
		if err != nil {
			t.Fatal(err)
		}
		l, err = c.Acquire(t.Context(), "orders")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Release(t.Context()) })
		return c, l, a, b
	}
	put := &fence.Txn{Then: []fence.Op{{Kind: fence.OpPut, Resource: "orders", Key: "k", Value: []byte("v")}}}

	t.Run("NotLeader", func(t *testing.T) {
		c, l, a, b := setup(t, problem(503, "not_leader", "fence: server is not the leader"))
		rev, err := l.Txn(t.Context(), put)
		if err != nil {
			t.Fatalf("Txn: %v, want it resent to the second server", err)
		}
		if na, nb := a.count(txn), b.count(txn); na != 1 || nb != 1 {
			t.Fatalf("txn sent %d times to a and %d to b, want 1 and 1", na, nb)
		}
		it, err := c.Get(t.Context(), "orders", "k")
		if err != nil || string(it.Value) != "v" || it.Rev != rev || it.Token != l.Token() {
			t.Fatalf("Get=%+v, %v; want v at revision %d with token %d", it, err, rev, l.Token())
		}
	})
	t.Run("Unavailable", func(t *testing.T) {
		c, l, a, b := setup(t, problem(503, "unavailable", "fence: closed"))
		_, err := l.Txn(t.Context(), put)
		if !errors.Is(err, fence.ErrClosed) || !client.IsAmbiguous(err) {
			t.Fatalf("Txn: %v, want unavailable, ambiguous", err)
		}
		if na, nb := a.count(txn), b.count(txn); na != 1 || nb != 0 {
			t.Fatalf("txn sent %d times to a and %d to b, want 1 and 0 (not resent)", na, nb)
		}
		if _, err := c.Get(t.Context(), "orders", "k"); !errors.Is(err, fence.ErrNotFound) {
			t.Fatalf("Get: %v, want ErrNotFound: the txn was not applied anywhere", err)
		}
	})
}

// TestNew_Addrs checks that New takes the address list of NewAPI.
func TestNew_Addrs(t *testing.T) {
	c, err := client.New("http://a:7700, http://b:7700/")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.API().Addrs(), " "); got != "http://a:7700 http://b:7700" {
		t.Fatalf("Addrs=%s, want http://a:7700 http://b:7700", got)
	}
	for _, bad := range []string{"", "http://a:7700,", "http://a:7700,http://a:7700", "http://a:7700,b:7700"} {
		if _, err := client.New(bad); err == nil || !strings.HasPrefix(err.Error(), "client: ") || strings.Count(err.Error(), "client: ") != 1 {
			t.Fatalf("New(%q): %v, want NewAPI's error, prefixed once", bad, err)
		}
	}
}
