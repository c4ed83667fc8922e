package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/internal/tools/testserver"
	"github.com/fence-lock/fence/server"
	"github.com/fence-lock/fence/wire"
)

// A 3-member etcd cluster shared by the tests, started by TestMain: its
// store URL (without prefix), or why it did not start.
var (
	etcdStore string
	startErr  error
	prefixN   int
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fence-server-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	e, etcdErr := testserver.StartEtcd(dir, 3)
	if etcdErr == nil {
		hosts := make([]string, 0, len(e.Members))
		for _, m := range e.Members {
			hosts = append(hosts, strings.TrimPrefix(m.ClientURL, "http://"))
		}
		etcdStore = "etcd://" + strings.Join(hosts, ",")
	} else {
		startErr = etcdErr
	}
	code := m.Run()
	if e != nil {
		e.Close()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// startServer runs a server on the shared etcd under prefix, behind httptest.
func startServer(t *testing.T, prefix string, lockDelay ...time.Duration) (*server.Server, string) {
	t.Helper()
	testserver.Require(t, startErr)
	hs := httptest.NewUnstartedServer(nil)
	url := "http://" + hs.Listener.Addr().String()
	cfg := server.Config{
		Store:     etcdStore + prefix,
		Advertise: url,
		Logger:    slog.New(slog.DiscardHandler),
	}
	if len(lockDelay) > 0 {
		cfg.LockDelay = lockDelay[0]
	}
	s, err := server.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs.Config.Handler = s
	hs.Start()
	t.Cleanup(func() {
		hs.Close()
		s.Close()
	})
	return s, url
}

func cluster(t *testing.T, url string) wire.ClusterStatus {
	t.Helper()
	resp, err := http.Get(url + "/v1/cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st wire.ClusterStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s after 20s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func status(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestServer_Standby checks that a standby serves every request through the
// leader, long polls included, and answers the local routes itself.
func TestServer_Standby(t *testing.T) {
	prefixN++
	prefix := fmt.Sprintf("/server-test/%d/", prefixN)
	_, leaderURL := startServer(t, prefix)
	waitFor(t, "leading", func() bool { return cluster(t, leaderURL).Role == wire.RoleLeader })
	_, standbyURL := startServer(t, prefix)
	waitFor(t, "standing by with a leader", func() bool { return status(standbyURL+"/readyz") == 200 })

	st := cluster(t, standbyURL)
	if st.Role != wire.RoleStandby || st.Leader != leaderURL || st.Store != "etcd" || st.Epoch == 0 || len(st.Servers) != 2 {
		t.Fatalf("standby's /v1/cluster=%+v; want standby, leader %s, etcd, 2 servers", st, leaderURL)
	}
	if lst := cluster(t, leaderURL); lst.Role != wire.RoleLeader || lst.Leader != leaderURL || lst.Epoch != st.Epoch {
		t.Fatalf("leader's /v1/cluster=%+v", lst)
	}

	ctx := t.Context()
	viaStandby, err := client.NewAPI(standbyURL)
	if err != nil {
		t.Fatal(err)
	}
	viaStandby.RetryFor = 0
	a, err := viaStandby.Acquire(ctx, "r", "A", time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := viaStandby.Put(ctx, "r", "k", []byte("v"), a.Token, fence.Cond{}); err != nil {
		t.Fatal(err)
	}
	if item, err := viaStandby.Get(ctx, "r", "k"); err != nil || string(item.Value) != "v" || item.Token != a.Token {
		t.Fatalf("Get through the standby=%+v, %v", item, err)
	}
	// A long poll through the standby: B waits for A's lease to expire.
	start := time.Now()
	b, err := viaStandby.Acquire(ctx, "r", "B", time.Second, 10*time.Second)
	if err != nil || b.Token != a.Token+1 || time.Since(start) < 500*time.Millisecond {
		t.Fatalf("B's waiting acquire through the standby=%+v, %v after %s; want token %d after A's lease ended", b, err, time.Since(start), a.Token+1)
	}
	var fenced *fence.FencedError
	if _, err := viaStandby.Put(ctx, "r", "k", []byte("stale"), a.Token, fence.Cond{}); !errors.As(err, &fenced) || fenced.LastFence != b.Token {
		t.Fatalf("A's stale put through the standby: err=%v, want FencedError with last fence %d", err, b.Token)
	}

	// Every primitive through the standby: a permit, a shared group, a
	// multi-acquire, a session with a lease in it and its renewal's list of
	// leases asked to let go, a request to let go, and a handover.
	p, err := viaStandby.AcquirePermit(ctx, "pool", "P", 2, time.Minute, 0)
	if err != nil || p.Resource != fence.SlotResource("pool", 1, 2) {
		t.Fatalf("a permit through the standby=%+v, %v", p, err)
	}
	r1, err1 := viaStandby.AcquireShared(ctx, "doc", "R1", time.Minute, 0)
	r2, err2 := viaStandby.AcquireShared(ctx, "doc", "R2", time.Minute, 0)
	if err1 != nil || err2 != nil || r1.Token != r2.Token {
		t.Fatalf("a shared group through the standby: %+v, %v; %+v, %v", r1, err1, r2, err2)
	}
	if _, err := viaStandby.AcquireAll(ctx, []string{"m1", "m2"}, "M", time.Minute, 0); err != nil {
		t.Fatalf("a multi-acquire through the standby: %v", err)
	}
	sess, err := viaStandby.Acquire(ctx, fence.SessionResource("via-standby"), "S", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	ref := fence.SessionRef{Resource: sess.Resource, Token: sess.Token}
	in, err := viaStandby.Acquire(fence.WithSession(ctx, ref), "in-session", "S", 0, 0)
	if err != nil || in.Session != ref {
		t.Fatalf("a lease in a session through the standby=%+v, %v", in, err)
	}
	asked, _, err := viaStandby.RequestRevoke(ctx, "in-session", time.Minute)
	if err != nil || asked.Token != in.Token {
		t.Fatalf("a request to let go through the standby=%+v, %v", asked, err)
	}
	if _, list, err := viaStandby.RenewSession(ctx, ref, 0); err != nil || len(list) != 1 || list[0].Resource != "in-session" || !list[0].RevokeAt.Equal(asked.RevokeAt) {
		t.Fatalf("the session's renewal through the standby lists %+v, %v; want in-session asked", list, err)
	}
	old, err := viaStandby.Acquire(ctx, "handed", "first", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan fence.Lease, 1)
	go func() {
		l, err := viaStandby.Acquire(ctx, "handed", "next", time.Minute, 10*time.Second)
		if err != nil {
			t.Errorf("the successor's acquire through the standby: %v", err)
		}
		got <- l
	}()
	waitFor(t, "the successor waiting", func() bool {
		ls, _, err := viaStandby.List(ctx, "handed", "", 1)
		return err == nil && len(ls) == 1 && ls[0].Waiters == 1
	})
	next, err := viaStandby.Transfer(ctx, "handed", old.Token, "next")
	if err != nil || next.Token <= old.Token || (<-got).Token != next.Token {
		t.Fatalf("a handover through the standby=%+v, %v", next, err)
	}

	// A request already forwarded once is not forwarded again.
	req, _ := http.NewRequestWithContext(ctx, "GET", standbyURL+"/v1/fences/r", nil)
	req.Header.Set(wire.ForwardedHeader, "http://127.0.0.1:1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), `"not_leader"`) {
		t.Fatalf("a forwarded request at a standby: %d %s; want 503 not_leader", resp.StatusCode, body)
	}
}

// TestServer_Resign checks that a leader that closes hands over at once:
// the standby leads well before the election TTL would have run out.
func TestServer_Resign(t *testing.T) {
	prefixN++
	prefix := fmt.Sprintf("/server-test/%d/", prefixN)
	first, firstURL := startServer(t, prefix)
	waitFor(t, "leading", func() bool { return cluster(t, firstURL).Role == wire.RoleLeader })
	_, nextURL := startServer(t, prefix)
	waitFor(t, "standing by", func() bool { return status(nextURL+"/readyz") == 200 })
	api, _ := client.NewAPI(firstURL)
	l, err := api.Acquire(t.Context(), "r", "A", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	closed := time.Now()
	first.Close()
	waitFor(t, "leading after the resignation", func() bool { return cluster(t, nextURL).Role == wire.RoleLeader })
	if took := time.Since(closed); took > 1500*time.Millisecond {
		t.Errorf("takeover after a resignation took %s, want well under the election TTL", took)
	}
	next, _ := client.NewAPI(nextURL)
	if _, err := next.Renew(context.Background(), "r", l.Token, 0); err != nil {
		t.Fatalf("the lease after the handover: %v", err)
	}
}

// TestServer_LockDelayTakeover checks that a lock-delay in progress
// survives a takeover, with its full length from the takeover.
func TestServer_LockDelayTakeover(t *testing.T) {
	prefixN++
	prefix := fmt.Sprintf("/server-test/%d/", prefixN)
	first, firstURL := startServer(t, prefix, 3*time.Second)
	waitFor(t, "leading", func() bool { return cluster(t, firstURL).Role == wire.RoleLeader })
	_, nextURL := startServer(t, prefix, 3*time.Second)
	api, _ := client.NewAPI(firstURL)
	api.RetryFor = 0
	if _, err := api.Acquire(t.Context(), "r", "A", 50*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // expired: a delay of 3s started, and is recorded
	if _, err := api.Acquire(t.Context(), "r", "B", time.Second, 0); !errors.Is(err, fence.ErrLockHeld) {
		t.Fatalf("during the delay: err=%v, want ErrLockHeld", err)
	}
	first.Close()
	waitFor(t, "leading", func() bool { return cluster(t, nextURL).Role == wire.RoleLeader })
	next, _ := client.NewAPI(nextURL)
	next.RetryFor = 0
	_, err := next.Acquire(t.Context(), "r", "B", time.Second, 0)
	var held *fence.LockHeldError
	if !errors.As(err, &held) || held.RetryAfter < 2*time.Second {
		t.Fatalf("after the takeover: err=%v, want LockHeldError with the delay's full length left", err)
	}
}

func TestOpen_BadConfig(t *testing.T) {
	for _, cfg := range []server.Config{
		{},
		{Store: "redis://127.0.0.1:6379", Advertise: "http://127.0.0.1:1"},
		{Store: "etcd://127.0.0.1:1/x"},
		{Store: "etcd://127.0.0.1:1/x", Advertise: "ftp://x"},
		{Store: "etcd://127.0.0.1:1/x", Advertise: "http://127.0.0.1:1/path"},
	} {
		if s, err := server.Open(t.Context(), cfg); err == nil {
			s.Close()
			t.Errorf("Open(%+v): want an error", cfg)
		}
	}
}

// TestOpen_KeyMismatch checks that a server whose signing key differs from
// that of a server already on the store (or that signs with none) is
// refused with ErrKeyMismatch: fence serve exits 2 for it, a configuration
// that cannot work rather than a store that is down.
func TestOpen_KeyMismatch(t *testing.T) {
	testserver.Require(t, startErr)
	prefixN++
	store := etcdStore + fmt.Sprintf("/server-test/%d/", prefixN)
	a, err := fence.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := fence.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	open := func(port int, signer *fence.SigningKey) (*server.Server, error) {
		return server.Open(t.Context(), server.Config{
			Store:     store,
			Advertise: fmt.Sprintf("http://127.0.0.1:%d", port),
			Signer:    signer,
			Logger:    slog.New(slog.DiscardHandler),
		})
	}
	first, err := open(1, &a)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	for _, signer := range []*fence.SigningKey{&b, nil} {
		s, err := open(2, signer)
		if err == nil {
			s.Close()
			t.Fatalf("Open with key %v beside a server with key %s: want an error", signer, a.ID)
		}
		if !errors.Is(err, server.ErrKeyMismatch) || !strings.Contains(err.Error(), a.ID) {
			t.Fatalf("Open with another key: %v; want ErrKeyMismatch naming key %s", err, a.ID)
		}
	}
	same, err := open(3, &a)
	if err != nil {
		t.Fatalf("Open with the same key: %v", err)
	}
	same.Close()
}

// TestServer_CloseWithoutEngine checks that servers close while their
// engine does not answer (fence serve stopped during an etcd outage, or
// together with etcd): a standby's campaign, cancelled, resigned with a
// context that only closing the etcd client ends, and Close waited for it
// before closing the client, until etcd came back.
func TestServer_CloseWithoutEngine(t *testing.T) {
	dir := testserver.TempDir(t)
	e, err := testserver.StartEtcd(dir, 1)
	testserver.Require(t, err)
	t.Cleanup(func() { e.Close() })
	store := "etcd://" + strings.TrimPrefix(e.Members[0].ClientURL, "http://") + "/close/"
	var servers []*server.Server
	for i := range 2 {
		hs := httptest.NewUnstartedServer(nil)
		s, err := server.Open(t.Context(), server.Config{
			Store:     store,
			Advertise: "http://" + hs.Listener.Addr().String(),
			Logger:    slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		hs.Config.Handler = s
		hs.Start()
		t.Cleanup(hs.Close)
		servers = append(servers, s)
		if i == 0 {
			waitFor(t, "the first server leading", func() bool { return status(hs.URL+"/readyz") == http.StatusOK })
		}
	}
	time.Sleep(500 * time.Millisecond) // the second one campaigns, behind the first
	if err := e.Members[0].Kill(); err != nil {
		t.Fatal(err)
	}
	for i, s := range servers {
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- s.Close() }()
		select {
		case <-done:
			t.Logf("server %d closed in %v", i, time.Since(start).Round(time.Millisecond))
		case <-time.After(15 * time.Second):
			t.Fatalf("server %d: Close has not returned 15 s after etcd died", i)
		}
	}
}
