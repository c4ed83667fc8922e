package e2e

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	fenceserver "github.com/fence-lock/fence/server"
)

// newService runs a fence server (fenceserver.Open, the embedded store) behind
// the HTTP API in this process, on a loopback port, with the logs in a buffer.
func newService(t testing.TB) (url string, logs *lockedBuffer) {
	t.Helper()
	logs = &lockedBuffer{}
	s, err := fenceserver.Open(t.Context(), fenceserver.Config{
		Data:   t.TempDir(),
		Logger: slog.New(slog.NewJSONHandler(lineWriter{logs}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		srv.Close()
		s.Close()
	})
	return srv.URL, logs
}

type lineWriter struct{ b *lockedBuffer }

func (w lineWriter) Write(p []byte) (int, error) {
	w.b.WriteLine(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func put(t *testing.T, url, resource, key, value string, token uint64, out any) int {
	t.Helper()
	return call(t, "PUT", url+"/v1/kv/"+resource+"/"+key, value, map[string]string{"Fencing-Token": fmt.Sprint(token)}, out)
}

func acquireLease(t *testing.T, url, resource, holder string, ttlMS int) lease {
	t.Helper()
	var l lease
	body := fmt.Sprintf(`{"holder":%q,"ttl_ms":%d}`, holder, ttlMS)
	if code := call(t, "POST", url+"/v1/locks/"+resource+"/acquire", body, nil, &l); code != 200 {
		t.Fatalf("acquire %s by %s: status %d", resource, holder, code)
	}
	return l
}

func getValue(t *testing.T, url, resource, key string) string {
	t.Helper()
	var b []byte
	if code := call(t, "GET", url+"/v1/kv/"+resource+"/"+key, "", nil, &b); code != 200 {
		t.Fatalf("get %s/%s: status %d", resource, key, code)
	}
	return string(b)
}

// TestStaleHolder is the seed's story: A holds token N and pauses past its
// TTL; B acquires N+1 and writes; A's write is rejected with 409 fenced naming
// both tokens, and B's value stands.
func TestStaleHolder(t *testing.T) {
	url, logs := newService(t)
	a := acquireLease(t, url, "orders", "A", 100)
	time.Sleep(150 * time.Millisecond) // A pauses past its TTL
	b := acquireLease(t, url, "orders", "B", 10000)
	if b.Token != a.Token+1 {
		t.Fatalf("B Token=%d, want %d", b.Token, a.Token+1)
	}
	if code := put(t, url, "orders", "total", "B", b.Token, nil); code != 200 {
		t.Fatalf("B's write: status %d", code)
	}
	var p problem
	if code := put(t, url, "orders", "total", "A", a.Token, &p); code != 409 || p.Code != "fenced" || p.Presented != a.Token || p.LastFence != b.Token {
		t.Fatalf("A's write: %d %+v, want 409 fenced presented %d last_fence %d", code, p, a.Token, b.Token)
	}
	if got := getValue(t, url, "orders", "total"); got != "B" {
		t.Fatalf("value=%q, want B's", got)
	}
	// Invariant 8: the expiry, both grants, the write and the rejection are logged.
	for _, want := range []string{
		`"msg":"lock expired","resource":"orders","holder":"A","token":1`,
		`"msg":"lock acquired","resource":"orders","holder":"B","token":2,"last_fence":2`,
		`"msg":"write accepted"`,
		`"code":"fenced"`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, logs)
		}
	}
}

// TestZombieFencedBeforeNewHolderWrites checks invariant 3: the grant itself
// fences the storage, so the old holder is rejected before the new one writes.
func TestZombieFencedBeforeNewHolderWrites(t *testing.T) {
	url, _ := newService(t)
	a := acquireLease(t, url, "orders", "A", 50)
	if code := put(t, url, "orders", "total", "A1", a.Token, nil); code != 200 {
		t.Fatalf("A's first write: status %d", code)
	}
	time.Sleep(80 * time.Millisecond)
	b := acquireLease(t, url, "orders", "B", 10000)
	var p problem
	if code := put(t, url, "orders", "total", "A2", a.Token, &p); code != 409 || p.Code != "fenced" || p.LastFence != b.Token {
		t.Fatalf("zombie write: %d %+v, want 409 fenced at %d", code, p, b.Token)
	}
	if got := getValue(t, url, "orders", "total"); got != "A1" {
		t.Fatalf("value=%q, want A1 (the zombie's rejected write changed nothing)", got)
	}
}

// TestConcurrentShortTTL runs many clients with leases short enough to expire
// mid-work, some of them "pausing" past their TTL before writing. Per
// resource, accepted writes in revision order never go down in token order,
// and no write is accepted after a greater token's grant or write was
// acknowledged before it was sent.
func TestConcurrentShortTTL(t *testing.T) {
	url, _ := newService(t)
	const (
		clients   = 16
		resources = 4
		cycles    = 25
	)
	type event struct {
		resource   string
		token, rev uint64
		sent, done time.Time
		accepted   bool
		grant      bool
	}
	var (
		mu     sync.Mutex
		events []event
	)
	record := func(e event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	client := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			for i := range cycles {
				res := fmt.Sprintf("res-%d", rng.IntN(resources))
				var l lease
				sent := time.Now()
				body := fmt.Sprintf(`{"holder":"c%d","ttl_ms":20,"wait_ms":2000}`, c)
				code, err := post(client, url+"/v1/locks/"+res+"/acquire", body, nil, &l)
				if err != nil {
					t.Error(err)
					return
				}
				if code != 200 {
					continue
				}
				record(event{resource: res, token: l.Token, sent: sent, done: time.Now(), accepted: true, grant: true})
				if rng.IntN(3) == 0 {
					time.Sleep(time.Duration(20+rng.IntN(20)) * time.Millisecond) // paused past the TTL
				}
				for j := range 2 {
					req, _ := http.NewRequest("PUT", fmt.Sprintf("%s/v1/kv/%s/k%d", url, res, j), strings.NewReader(fmt.Sprintf("c%d-%d", c, i)))
					req.Header.Set("Fencing-Token", fmt.Sprint(l.Token))
					sent := time.Now()
					resp, err := client.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					var out struct{ Revision uint64 }
					code := resp.StatusCode
					decodeClose(resp, &out)
					if code != 200 && code != 409 {
						t.Errorf("put: status %d", code)
					}
					record(event{resource: res, token: l.Token, rev: out.Revision, sent: sent, done: time.Now(), accepted: code == 200})
				}
				post(client, url+"/v1/locks/"+res+"/release", fmt.Sprintf(`{"token":%d}`, l.Token), nil, nil)
			}
		}()
	}
	wg.Wait()

	var writes, fenced int
	for r := range resources {
		res := fmt.Sprintf("res-%d", r)
		var accepted []event
		for _, e := range events {
			if e.resource == res && !e.grant {
				if e.accepted {
					accepted = append(accepted, e)
				} else {
					fenced++
				}
			}
		}
		writes += len(accepted)
		slices.SortFunc(accepted, func(a, b event) int { return cmp.Compare(a.rev, b.rev) })
		for i := 1; i < len(accepted); i++ {
			if accepted[i].token < accepted[i-1].token {
				t.Fatalf("%s: write at rev %d has token %d after rev %d with token %d",
					res, accepted[i].rev, accepted[i].token, accepted[i-1].rev, accepted[i-1].token)
			}
		}
		for _, w := range accepted {
			for _, e := range events {
				if e.resource == res && e.accepted && e.token > w.token && e.done.Before(w.sent) {
					t.Fatalf("%s: write with token %d accepted though token %d was acknowledged (grant=%v) before it was sent",
						res, w.token, e.token, e.grant)
				}
			}
		}
	}
	t.Logf("%d writes accepted, %d fenced", writes, fenced)
	if writes == 0 || fenced == 0 {
		t.Fatalf("%d writes accepted, %d fenced: the test exercised nothing", writes, fenced)
	}
}

// TestMetrics checks that grants, writes, expiries and every rejection are counted.
func TestMetrics(t *testing.T) {
	url, _ := newService(t)
	before := scrape(t, url)
	a := acquireLease(t, url, "m", "A", 20)
	time.Sleep(40 * time.Millisecond)
	b := acquireLease(t, url, "m", "B", 10000)
	put(t, url, "m", "k", "v", b.Token, nil)
	put(t, url, "m", "k", "v", a.Token, nil)        // fenced
	put(t, url, "m", "k", "v", 99, nil)             // token_not_issued
	put(t, url, "m", "k", "v", 0, nil)              // invalid_token
	call(t, "PUT", url+"/v1/kv/m/k", "v", nil, nil) // fence_required
	call(t, "PUT", url+"/v1/kv/m/k", "v", map[string]string{"Fencing-Token": fmt.Sprint(b.Token), "If-None-Match": "*"}, nil)
	after := scrape(t, url)
	for _, m := range []string{
		"fence_lock_grants_total",
		"fence_lock_expirations_total",
		`fence_storage_writes_total{op="put"}`,
		`fence_storage_rejections_total{reason="fenced"}`,
		`fence_storage_rejections_total{reason="token_not_issued"}`,
		`fence_storage_rejections_total{reason="invalid_token"}`,
		`fence_storage_rejections_total{reason="fence_required"}`,
		`fence_storage_rejections_total{reason="precondition_failed"}`,
	} {
		if after[m] <= before[m] {
			t.Errorf("%s: %v before, %v after; want it to grow", m, before[m], after[m])
		}
	}
	for _, m := range []string{"fence_lock_leases_held", "fence_http_request_duration_seconds_count", "fence_storage_commit_batch_size_count"} {
		found := false
		for name := range after {
			found = found || strings.HasPrefix(name, m)
		}
		if !found {
			t.Errorf("metric %s missing", m)
		}
	}
}

// scrape reads /metrics into name{labels} -> value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	var b []byte
	if code := call(t, "GET", url+"/metrics", "", nil, &b); code != 200 {
		t.Fatalf("/metrics: status %d", code)
	}
	m := map[string]float64{}
	for line := range bytes.Lines(b) {
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		var v float64
		i := bytes.LastIndexByte(line, ' ')
		if _, err := fmt.Sscan(string(line[i+1:]), &v); err == nil {
			m[string(line[:i])] = v
		}
	}
	return m
}

// TestWaiterGoneLeavesQueue checks that a long-polling acquire whose HTTP
// request is cancelled leaves the queue: the lock goes to the next waiter.
func TestWaiterGoneLeavesQueue(t *testing.T) {
	url, _ := newService(t)
	a := acquireLease(t, url, "q", "A", 60000)
	ctx, cancel := context.WithCancel(t.Context())
	bDone := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/locks/q/acquire", strings.NewReader(`{"holder":"B","wait_ms":30000}`))
		_, err := http.DefaultClient.Do(req)
		bDone <- err
	}()
	waitForWaiters(t, url, 1)
	cDone := make(chan lease, 1)
	go func() {
		var l lease
		post(http.DefaultClient, url+"/v1/locks/q/acquire", `{"holder":"C","wait_ms":30000}`, nil, &l)
		cDone <- l
	}()
	waitForWaiters(t, url, 2)
	cancel()
	if err := <-bDone; err == nil {
		t.Fatal("B's cancelled request returned no error")
	}
	waitForWaiters(t, url, 1) // B left the queue
	call(t, "POST", url+"/v1/locks/q/release", fmt.Sprintf(`{"token":%d}`, a.Token), nil, nil)
	if l := <-cDone; l.Holder != "C" || l.Token != a.Token+1 {
		t.Fatalf("after A's release: %+v, want C with token %d", l, a.Token+1)
	}
}

// waitForWaiters waits until the fence_lock_waiters gauge reads n.
func waitForWaiters(t *testing.T, url string, n float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for scrape(t, url)["fence_lock_waiters"] != n {
		if time.Now().After(deadline) {
			t.Fatalf("fence_lock_waiters never reached %v", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
