package demo

import (
	"bytes"
	"encoding/json"
	"github.com/fence-lock/fence/fencetest"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// testTTL keeps the runs short: each takes TTL + DefaultPauseMargin.
const testTTL = 200 * time.Millisecond

// newExternalServer runs a fence server in this process, as a stand-in for
// one the demo is pointed at with Config.Addr, and returns its URL.
func newExternalServer(t *testing.T) string {
	t.Helper()
	return fencetest.NewServer(t, nil)
}

// checkResult checks that both runs told the story: the stale write won
// against the last-writer-wins store and was fenced against fence's storage.
func checkResult(t *testing.T, res Result) {
	t.Helper()
	if !res.OK {
		t.Errorf("OK=false, want true")
	}
	u := res.Unsafe
	if u.Outcome != OutcomeStaleWon || u.Final != "A" || !u.FinalFound {
		t.Errorf("unsafe run: Outcome=%s Final=%q, want %s and %q (A's stale write won)\n%s", u.Outcome, u.Final, OutcomeStaleWon, "A", u.Summary)
	}
	if !u.WriteA.Accepted() || !u.WriteB.Accepted() {
		t.Errorf("unsafe run: WriteA=%+v WriteB=%+v, want both accepted", u.WriteA, u.WriteB)
	}
	f := res.Fenced
	if f.TokenB != f.TokenA+1 {
		t.Errorf("fenced run: TokenB=%d, want TokenA+1=%d", f.TokenB, f.TokenA+1)
	}
	a := f.WriteA
	if a.Status != http.StatusConflict || a.Code != "fenced" || a.Presented != f.TokenA || a.LastFence != f.TokenA+1 {
		t.Errorf("fenced run: WriteA=%+v, want 409 fenced presented %d last_fence %d", a, f.TokenA, f.TokenA+1)
	}
	if !f.WriteB.Accepted() {
		t.Errorf("fenced run: WriteB=%+v, want accepted", f.WriteB)
	}
	if f.Outcome != OutcomeStaleRejected || f.Final != "B" || !f.FinalFound {
		t.Errorf("fenced run: Outcome=%s Final=%q, want %s and %q\n%s", f.Outcome, f.Final, OutcomeStaleRejected, "B", f.Summary)
	}
	if u.Resource == f.Resource || !strings.HasPrefix(u.Resource, "demo-") {
		t.Errorf("resources %q and %q, want two distinct demo-<random>-... names", u.Resource, f.Resource)
	}
	for _, rr := range []RunResult{u, f} {
		var kinds []string
		for i, e := range rr.Events {
			kinds = append(kinds, e.Actor+":"+string(e.Kind))
			if i > 0 && e.At < rr.Events[i-1].At {
				t.Errorf("%s run: event %d at %s before event %d at %s", rr.Name, i, e.At, i-1, rr.Events[i-1].At)
			}
		}
		want := "A:acquire A:pause fence:expire B:acquire B:put A:resume A:put"
		if got := strings.Join(kinds, " "); got != want {
			t.Errorf("%s run: events %s, want %s", rr.Name, got, want)
		}
		if n := len(rr.Events); n > 0 {
			// A's write comes after its pause, and its lease had expired by then.
			last := rr.Events[n-1]
			if last.At < res.Pause || rr.Events[2].At < res.TTL {
				t.Errorf("%s run: A wrote at %s (pause %s), expiry seen at %s (ttl %s)", rr.Name, last.At, res.Pause, rr.Events[2].At, res.TTL)
			}
		}
	}
}

func TestRun(t *testing.T) {
	t.Run("Embedded", func(t *testing.T) {
		t.Parallel()
		res, err := Run(t.Context(), Config{TTL: testTTL})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Embedded || !strings.HasPrefix(res.Addr, "http://127.0.0.1:") {
			t.Errorf("Embedded=%v Addr=%q, want an embedded server on loopback", res.Embedded, res.Addr)
		}
		if res.TTL != testTTL || res.Pause != testTTL+DefaultPauseMargin {
			t.Errorf("TTL=%s Pause=%s, want %s and %s", res.TTL, res.Pause, testTTL, testTTL+DefaultPauseMargin)
		}
		checkResult(t, res)

		// The embedded server is gone.
		if resp, err := http.Get(res.Addr + "/healthz"); err == nil {
			resp.Body.Close()
			t.Errorf("the embedded server still answers at %s", res.Addr)
		}
	})

	t.Run("Addr", func(t *testing.T) {
		t.Parallel()
		url := newExternalServer(t)
		res, err := Run(t.Context(), Config{Addr: url + "/", TTL: testTTL, Pause: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if res.Embedded || res.Addr != url || res.Fenced.StoreAddr != url {
			t.Errorf("Embedded=%v Addr=%q StoreAddr=%q, want the server at %s", res.Embedded, res.Addr, res.Fenced.StoreAddr, url)
		}
		checkResult(t, res)

		// A second demo against the same server uses resources of its own,
		// and so gets the same tokens.
		again, err := Run(t.Context(), Config{Addr: url, TTL: testTTL, Pause: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, again)
		if again.Fenced.Resource == res.Fenced.Resource {
			t.Errorf("both demos used resource %q", res.Fenced.Resource)
		}
	})

	t.Run("Unreachable", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		res, err := Run(t.Context(), Config{Addr: url, TTL: testTTL})
		if err == nil || !strings.Contains(err.Error(), "A's acquire") {
			t.Fatalf("err=%v, want A's acquire to fail", err)
		}
		if res.OK {
			t.Errorf("OK=true after an error")
		}
	})
}

func TestConfig_Validate(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"Defaults", Config{}, true},
		{"ShortTTL", Config{TTL: 10 * time.Millisecond}, true},
		{"PauseJustLonger", Config{TTL: time.Second, Pause: time.Second + time.Millisecond}, true},
		{"TTLTooShort", Config{TTL: time.Millisecond}, false},
		{"TTLTooLong", Config{TTL: 2 * time.Minute}, false},
		{"PauseNotLonger", Config{TTL: time.Second, Pause: time.Second}, false},
		{"PauseTooLong", Config{Pause: 3 * time.Minute}, false},
		{"BadAddr", Config{Addr: "127.0.0.1:7700"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.cfg.Validate(); (err == nil) != c.ok {
				t.Fatalf("Validate()=%v, want ok=%v", err, c.ok)
			}
		})
	}
}

func TestLWWStore(t *testing.T) {
	srv := httptest.NewServer(newLWWStore().handler())
	defer srv.Close()
	put := func(value, token string) (status int, rev uint64) {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/v1/kv/orders/a/b", strings.NewReader(value))
		if token != "" {
			req.Header.Set("Fencing-Token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a putAnswer
		json.NewDecoder(resp.Body).Decode(&a)
		return resp.StatusCode, a.Revision
	}
	get := func() (int, string) {
		resp, err := http.Get(srv.URL + "/v1/kv/orders/a/b")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, _ := get(); status != http.StatusNotFound {
		t.Fatalf("GET before any PUT: %d, want 404", status)
	}
	// The token is ignored: a lower one, or none, still overwrites.
	for i, w := range []struct{ value, token string }{{"B", "2"}, {"A", "1"}, {"C", ""}} {
		status, rev := put(w.value, w.token)
		if status != http.StatusOK || rev != uint64(i+1) {
			t.Fatalf("PUT %s with token %q: %d rev %d, want 200 rev %d", w.value, w.token, status, rev, i+1)
		}
		if status, got := get(); status != http.StatusOK || got != w.value {
			t.Fatalf("GET after PUT %s: %d %q, want 200 %q", w.value, status, got, w.value)
		}
	}
}

func TestResult_Render(t *testing.T) {
	ev := func(at time.Duration, actor, to string, kind Kind, msg, reply string) Event {
		return Event{At: at, Actor: actor, To: to, Kind: kind, Message: msg, Reply: reply}
	}
	run := func(name string, writeA Write, final string, outcome Outcome) RunResult {
		return RunResult{Name: name, Store: "x", StoreAddr: "http://127.0.0.1:1", Resource: "demo-1-" + name, Key: Key,
			TokenA: 1, TokenB: 2, WriteA: writeA, WriteB: Write{Holder: "B", Value: "B", Token: 2, Status: 200, Revision: 1},
			Final: final, FinalFound: true, Outcome: outcome, Summary: "s",
			Events: []Event{
				ev(0, ActorA, ActorLock, KindAcquire, "acquire", "token 1, ttl 1s"),
				ev(time.Millisecond, ActorA, "", KindPause, "paused (GC, swap, partition) for 1.5s, not renewing", ""),
				ev(time.Second, ActorLock, "", KindExpire, "lease 1 expired: A no longer holds the lock", ""),
				ev(1005*time.Millisecond, ActorB, ActorLock, KindAcquire, "acquire", "token 2"),
				ev(1007*time.Millisecond, ActorB, ActorStore, KindPut, "PUT total=B, token 2", "200 OK rev 1"),
				ev(1501*time.Millisecond, ActorA, "", KindResume, "wakes up, still believes it holds token 1", ""),
				ev(1509*time.Millisecond, ActorA, ActorStore, KindPut, "PUT total=A, token 1", writeA.Reply()),
			}}
	}
	res := Result{Addr: "http://127.0.0.1:2", Embedded: true, TTL: time.Second, Pause: 1500 * time.Millisecond, OK: true,
		Unsafe: run(RunUnsafe, Write{Holder: "A", Value: "A", Token: 1, Status: 200, Revision: 2}, "A", OutcomeStaleWon),
		Fenced: run(RunFenced, Write{Holder: "A", Value: "A", Token: 1, Status: 409, Code: "fenced", Presented: 1, LastFence: 2}, "B", OutcomeStaleRejected),
	}

	t.Run("Text", func(t *testing.T) {
		var b bytes.Buffer
		if err := res.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"  +0.000s  A      ──acquire──▶               fence    token 1, ttl 1s\n",
			"  +0.001s  A      ⏸ paused (GC, swap, partition) for 1.5s, not renewing\n",
			"  +1.000s  fence  ⌛ lease 1 expired",
			"  +1.509s  A      ──PUT total=A, token 1──▶  storage  409 fenced (presented 1, last_fence 2)\n",
			`result: total = "A"  ✘ the stale write won`,
			`result: total = "B"  ✔ the stale write was rejected`,
		} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("text lacks %q:\n%s", want, b.String())
			}
		}
	})

	t.Run("Mermaid", func(t *testing.T) {
		var b bytes.Buffer
		if err := res.WriteMermaid(&b); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if !strings.HasPrefix(out, "sequenceDiagram\n") {
			t.Errorf("diagram does not start with sequenceDiagram:\n%s", out)
		}
		for _, want := range []string{
			"    participant Lock as fence\n",
			"    A->>Lock: +0.000s acquire demo-1-fenced\n",
			"    Lock-->>A: token 1, ttl 1s\n",
			"    Note over A: +0.001s paused (GC, swap, partition) for 1.5s, not renewing\n",
			"    Note over Lock: +1.000s lease 1 expired: A no longer holds the lock\n",
			"    Store-->>A: 409 fenced (presented 1, last_fence 2)\n",
			"    Note over A,Store: total = B - ✔ the stale write was rejected, B's value stands\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("diagram lacks %q:\n%s", want, out)
			}
		}
		if strings.Count(out, "    rect ") != 2 || strings.Count(out, "    end\n") != 2 {
			t.Errorf("want one rect per run:\n%s", out)
		}
	})

	t.Run("JSON", func(t *testing.T) {
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			TTLMS   float64 `json:"ttl_ms"`
			PauseMS float64 `json:"pause_ms"`
			OK      bool    `json:"ok"`
			Fenced  struct {
				Outcome string `json:"outcome"`
				Events  []struct {
					AtMS  float64 `json:"at_ms"`
					Actor string  `json:"actor"`
					To    string  `json:"to"`
				} `json:"events"`
			} `json:"fenced"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if got.TTLMS != 1000 || got.PauseMS != 1500 || !got.OK || got.Fenced.Outcome != string(OutcomeStaleRejected) {
			t.Errorf("JSON %s", b)
		}
		if e := got.Fenced.Events[6]; e.AtMS != 1509 || e.Actor != "A" || e.To != "storage" {
			t.Errorf("last event %+v, want at_ms 1509 from A to storage", e)
		}
	})
}
