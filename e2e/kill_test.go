package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// acked is what one worker was told before the server died.
type acked struct {
	resource  string
	maxToken  uint64            // the highest token acknowledged (grant or write)
	held      uint64            // the token of an acknowledged grant not yet released, 0 if none
	releasing bool              // a release of held was in flight at the kill
	writes    map[string]string // key -> value, acknowledged
	revs      map[string]string // key -> ETag, acknowledged
}

// TestServe_Kill9 runs the real binary under load, kills it with SIGKILL at a
// random moment, restarts it on the same data directory, and checks that every
// acknowledged write, fence, token and unexpired lease survived (invariants 1,
// 2, 4 and 7). Three rounds on the same directory.
func TestServe_Kill9(t *testing.T) {
	dir := t.TempDir()
	const workers = 8
	states := make([]*acked, workers)
	for i := range states {
		states[i] = &acked{resource: fmt.Sprintf("r-%d", i), writes: map[string]string{}, revs: map[string]string{}}
	}
	for round := range 3 {
		srv := start(t, dir)
		checkSurvived(t, srv.URL, states)

		var ops atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		client := &http.Client{Timeout: 10 * time.Second}
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				work(client, srv.URL, states[w], round, w, &ops, stop)
			}()
		}
		// Kill at a random moment once some load has been acknowledged.
		deadline := time.Now().Add(20 * time.Second)
		target := int64(100 + rand.IntN(200))
		for ops.Load() < target && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		srv.cmd.Process.Signal(syscall.SIGKILL)
		<-srv.exited
		close(stop)
		wg.Wait()
		if ops.Load() < target {
			t.Fatalf("round %d: only %d operations acknowledged in 20 s:\n%s", round, ops.Load(), srv.logs)
		}
		t.Logf("round %d: killed after %d acknowledged operations", round, ops.Load())
	}
	srv := start(t, dir)
	checkSurvived(t, srv.URL, states)
}

// work runs acquire -> put -> put -> release cycles, recording what was
// acknowledged, until the server dies.
func work(client *http.Client, url string, st *acked, round, w int, ops *atomic.Int64, stop chan struct{}) {
	holder := fmt.Sprintf("worker-%d", w)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		var l lease
		body := fmt.Sprintf(`{"holder":%q,"ttl_ms":60000}`, holder)
		if code, err := post(client, url+"/v1/locks/"+st.resource+"/acquire", body, nil, &l); err != nil || code != 200 {
			return
		}
		st.held, st.maxToken = l.Token, max(st.maxToken, l.Token)
		ops.Add(1)
		for j := range 2 {
			key := fmt.Sprintf("k-%d-%d-%d", round, i, j)
			value := fmt.Sprintf("v-%d-%d-%d-%d", round, w, i, j)
			req, _ := http.NewRequest(http.MethodPut, url+"/v1/kv/"+st.resource+"/"+key, strings.NewReader(value))
			req.Header.Set("Fencing-Token", strconv.FormatUint(l.Token, 10))
			resp, err := client.Do(req)
			if err != nil {
				return
			}
			var res struct{ Revision uint64 }
			code := resp.StatusCode
			decodeClose(resp, &res)
			if code != 200 {
				panic(fmt.Sprintf("put %s: status %d", key, code))
			}
			st.writes[key], st.revs[key] = value, fmt.Sprintf("%q", strconv.FormatUint(res.Revision, 10))
			ops.Add(1)
		}
		st.releasing = true
		if code, err := post(client, url+"/v1/locks/"+st.resource+"/release", fmt.Sprintf(`{"token":%d}`, l.Token), nil, nil); err != nil || code != 200 {
			return
		}
		st.held, st.releasing = 0, false
		ops.Add(1)
	}
}

// checkSurvived checks the acknowledged state after a restart, then releases
// every surviving lease so that the next round starts clean.
func checkSurvived(t *testing.T, url string, states []*acked) {
	t.Helper()
	for _, st := range states {
		for key, value := range st.writes {
			resp, err := http.Get(url + "/v1/kv/" + st.resource + "/" + key)
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			got, _ = readClose(resp)
			if resp.StatusCode != 200 || string(got) != value || resp.Header.Get("ETag") != st.revs[key] {
				t.Fatalf("%s/%s: %d %q ETag %s, want acknowledged %q ETag %s",
					st.resource, key, resp.StatusCode, got, resp.Header.Get("ETag"), value, st.revs[key])
			}
		}
		var f struct {
			LastFence uint64 `json:"last_fence"`
		}
		call(t, "GET", url+"/v1/fences/"+st.resource, "", nil, &f)
		if f.LastFence < st.maxToken {
			t.Fatalf("%s: last_fence=%d, below acknowledged token %d", st.resource, f.LastFence, st.maxToken)
		}
		var status struct {
			Held      bool   `json:"held"`
			Token     uint64 `json:"token"`
			LastToken uint64 `json:"last_token"`
		}
		call(t, "GET", url+"/v1/locks/"+st.resource, "", nil, &status)
		if status.LastToken < st.maxToken {
			t.Fatalf("%s: last_token=%d, below acknowledged token %d", st.resource, status.LastToken, st.maxToken)
		}
		if st.held != 0 && !st.releasing && (!status.Held || status.Token != st.held) {
			t.Fatalf("%s: status %+v, want the acknowledged unexpired lease %d still held", st.resource, status, st.held)
		}
		if status.Held {
			// Its holder can renew it (invariant 7), and nobody else gets it.
			var p problem
			if code := call(t, "POST", url+"/v1/locks/"+st.resource+"/acquire", `{"holder":"intruder"}`, nil, &p); code != 409 || p.Code != "lock_held" {
				t.Fatalf("%s: intruder acquire: %d %+v, want 409 lock_held", st.resource, code, p)
			}
			body := fmt.Sprintf(`{"token":%d}`, status.Token)
			if code := call(t, "POST", url+"/v1/locks/"+st.resource+"/renew", body, nil, nil); code != 200 {
				t.Fatalf("%s: renew of surviving lease %d: %d", st.resource, status.Token, code)
			}
			if code := call(t, "POST", url+"/v1/locks/"+st.resource+"/release", body, nil, nil); code != 200 {
				t.Fatalf("%s: release of surviving lease %d: %d", st.resource, status.Token, code)
			}
		}
		st.held, st.releasing = 0, false
		// A new grant is above every token issued before the crash.
		var l lease
		if code := call(t, "POST", url+"/v1/locks/"+st.resource+"/acquire", `{"holder":"checker"}`, nil, &l); code != 200 || l.Token <= status.LastToken {
			t.Fatalf("%s: acquire after restart: %d token %d, want > %d", st.resource, code, l.Token, status.LastToken)
		}
		st.maxToken = l.Token
		call(t, "POST", url+"/v1/locks/"+st.resource+"/release", fmt.Sprintf(`{"token":%d}`, l.Token), nil, nil)
	}
}
