package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// testAPIPermits takes the permits of a semaphore through the API: each is a
// lease on its own slot resource, which storage fences on its own: the
// permit that ended is fenced while the other permit's writes go on.
func testAPIPermits(t *testing.T, newService newServiceFunc) {
	url, _ := newService(t)
	permit := func(holder string, limit int) map[string]any {
		t.Helper()
		r := apiDo(t, "POST", url+"/v1/locks/pool/acquire", fmt.Appendf(nil, `{"holder":%q,"ttl_ms":60000,"limit":%d}`, holder, limit), nil)
		return apiOK(t, r, map[string]any{"resource": apiText, "holder": holder, "token": apiPosInt, "ttl_ms": 60000, "expires_at": apiExpiresIn(time.Minute)})
	}
	a, b := permit("a", 2), permit("b", 2)
	if a["resource"] != "pool/permit-1-of-2" || b["resource"] != "pool/permit-2-of-2" {
		t.Fatalf("permits on %v and %v, want pool/permit-1-of-2 and pool/permit-2-of-2", a["resource"], b["resource"])
	}
	apiProblem(t, apiDo(t, "POST", url+"/v1/locks/pool/acquire", []byte(`{"holder":"c","limit":2}`), nil), http.StatusConflict, "lock_held",
		map[string]any{"resource": "pool", "retry_after_ms": apiAnyInt})
	apiProblem(t, apiDo(t, "POST", url+"/v1/locks/pool/acquire", []byte(`{"holder":"c","limit":5}`), nil), http.StatusBadRequest, "bad_request", nil)
	apiProblem(t, apiDo(t, "POST", url+"/v1/locks/pool%2Fpermit-1-of-2/acquire", []byte(`{"holder":"c"}`), nil), http.StatusBadRequest, "bad_request", nil)

	aTok, _ := apiUint(a["token"])
	bTok, _ := apiUint(b["token"])
	slot1, slot2 := "pool%2Fpermit-1-of-2", "pool%2Fpermit-2-of-2"
	apiPut(t, url, slot1, "k", []byte("a"), apiTok(aTok))
	apiRelease(t, url, slot1, aTok)
	c := permit("c", 2)
	cTok, _ := apiUint(c["token"])
	if c["resource"] != "pool/permit-1-of-2" || cTok <= aTok {
		t.Fatalf("c got %v after a released, want slot 1 with a token above %d", c, aTok)
	}
	apiProblem(t, apiDo(t, "PUT", url+"/v1/kv/"+slot1+"/k", []byte("stale"), apiTok(aTok)), http.StatusConflict, "fenced",
		map[string]any{"resource": "pool/permit-1-of-2", "presented": aTok, "last_fence": cTok})
	apiPut(t, url, slot2, "k", []byte("b"), apiTok(bTok))
	apiPut(t, url, slot1, "k", []byte("c"), apiTok(cTok))
}

// testAPIAcquireAll takes several resources in one request: each gets its
// own token and fences its storage; a request that finds one held gets
// none of them.
func testAPIAcquireAll(t *testing.T, newService newServiceFunc) {
	url, _ := newService(t)
	stale, cur := apiStale(t, url, "multi-b")
	apiRelease(t, url, "multi-b", cur)
	r := apiDo(t, "POST", url+"/v1/locks", []byte(`{"resources":["multi-b","multi-a"],"holder":"m","ttl_ms":60000}`), nil)
	if r.status != http.StatusOK {
		t.Fatalf("multi-acquire: %s", r)
	}
	var body struct {
		Leases []struct {
			Resource string `json:"resource"`
			Token    uint64 `json:"token"`
		} `json:"leases"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || len(body.Leases) != 2 {
		t.Fatalf("multi-acquire answered %s (%v)", r, err)
	}
	b, a := body.Leases[0], body.Leases[1]
	if b.Resource != "multi-b" || a.Resource != "multi-a" || b.Token <= cur || a.Token != 1 {
		t.Fatalf("leases %+v, want multi-b above %d then multi-a with 1", body.Leases, cur)
	}
	apiProblem(t, apiDo(t, "PUT", url+"/v1/kv/multi-b/k", []byte("stale"), apiTok(stale)), http.StatusConflict, "fenced",
		map[string]any{"resource": "multi-b", "presented": stale, "last_fence": b.Token})
	apiPut(t, url, "multi-a", "k", []byte("a"), apiTok(a.Token))

	apiProblem(t, apiDo(t, "POST", url+"/v1/locks", []byte(`{"resources":["multi-c","multi-a"],"holder":"x"}`), nil), http.StatusConflict, "lock_held",
		map[string]any{"resource": "multi-a", "retry_after_ms": apiAnyInt})
	apiRelease(t, url, "multi-c", apiAcquire(t, url, "multi-c", "y", 1000)) // free: nothing was kept
}

// testAPISessions opens a session through the API (a lease on its
// resource), takes two locks in it, renews it, and closes it: the leases
// in it have its TTL, are renewed with it and released with it, and a
// renew of their own or a join of a closed session is refused.
func testAPISessions(t *testing.T, newService newServiceFunc) {
	url, _ := newService(t)
	sessTok := apiAcquire(t, url, ".session%2Fw", "w", 60000)
	join := fmt.Appendf(nil, `{"holder":"w","session":{"resource":".session/w","token":%d}}`, sessTok)
	session := apiPred{fmt.Sprintf(".session/w with token %d", sessTok), func(v any) bool {
		m, ok := v.(map[string]any)
		tok, _ := apiUint(m["token"])
		return ok && len(m) == 2 && m["resource"] == ".session/w" && tok == sessTok
	}}
	held := func(res string) uint64 {
		t.Helper()
		r := apiDo(t, "POST", url+"/v1/locks/"+res+"/acquire", join, nil)
		m := apiOK(t, r, map[string]any{"resource": res, "holder": "w", "token": apiPosInt, "ttl_ms": 60000,
			"expires_at": apiExpiresIn(time.Minute), "session": session})
		n, _ := apiUint(m["token"])
		return n
	}
	aTok, bTok := held("sess-a"), held("sess-b")
	// So do a multi-acquire's leases.
	mr := apiDo(t, "POST", url+"/v1/locks", fmt.Appendf(nil, `{"resources":["sess-m1","sess-m2"],"holder":"w","session":{"resource":".session/w","token":%d}}`, sessTok), nil)
	var multi struct {
		Leases []struct {
			Session struct {
				Resource string `json:"resource"`
				Token    uint64 `json:"token"`
			} `json:"session"`
			TTLMS int64 `json:"ttl_ms"`
		} `json:"leases"`
	}
	if mr.status != http.StatusOK || json.Unmarshal(mr.body, &multi) != nil || len(multi.Leases) != 2 {
		t.Fatalf("multi-acquire in the session: %s", mr)
	}
	for _, l := range multi.Leases {
		if l.Session.Resource != ".session/w" || l.Session.Token != sessTok || l.TTLMS != 60000 {
			t.Fatalf("multi-acquire in the session: %s", mr)
		}
	}
	// A permit joins the session too.
	pr := apiDo(t, "POST", url+"/v1/locks/sess-pool/acquire", fmt.Appendf(nil, `{"holder":"w","limit":2,"session":{"resource":".session/w","token":%d}}`, sessTok), nil)
	apiOK(t, pr, map[string]any{"resource": "sess-pool/permit-1-of-2", "holder": "w", "token": apiPosInt, "ttl_ms": 60000,
		"expires_at": apiExpiresIn(time.Minute), "session": session})
	apiProblem(t, apiDo(t, "POST", url+"/v1/locks/sess-a/renew", fmt.Appendf(nil, `{"token":%d}`, aTok), nil), http.StatusBadRequest, "bad_request", nil)
	apiProblem(t, apiDo(t, "POST", url+"/v1/locks/sess-c/acquire", fmt.Appendf(nil, `{"holder":"w","ttl_ms":5000,"session":{"resource":".session/w","token":%d}}`, sessTok), nil),
		http.StatusBadRequest, "bad_request", nil)
	apiOK(t, apiDo(t, "POST", url+"/v1/locks/.session%2Fw/renew", fmt.Appendf(nil, `{"token":%d}`, sessTok), nil),
		map[string]any{"resource": ".session/w", "holder": "w", "token": sessTok, "ttl_ms": 60000, "expires_at": apiExpiresIn(time.Minute)})
	apiPut(t, url, "sess-a", "k", []byte("a"), apiTok(aTok))
	// Its status and the listing say which session a lease is in.
	apiOK(t, apiDo(t, "GET", url+"/v1/locks/sess-a", nil, nil), map[string]any{"resource": "sess-a", "held": true, "holder": "w",
		"token": aTok, "expires_at": apiExpiresIn(time.Minute), "last_token": apiPosInt, "session": session})
	lr := apiDo(t, "GET", url+"/v1/locks?prefix=sess-b", nil, nil)
	var list struct {
		Locks []map[string]any `json:"locks"`
	}
	if lr.status != http.StatusOK || json.Unmarshal(lr.body, &list) != nil || len(list.Locks) != 1 || list.Locks[0]["session"] == nil {
		t.Fatalf("the listing of sess-b: %s, want it with its session", lr)
	}

	apiRelease(t, url, ".session%2Fw", sessTok)
	for _, res := range []string{"sess-a", "sess-b", "sess-pool%2Fpermit-1-of-2", "sess-m1", "sess-m2"} {
		r := apiDo(t, "GET", url+"/v1/locks/"+res, nil, nil)
		if m := r.members(t); r.status != http.StatusOK || m["held"] != false {
			t.Fatalf("%s after the session closed: %s, want free", res, r)
		}
	}
	apiProblem(t, apiDo(t, "POST", url+"/v1/locks/sess-c/acquire", join, nil), http.StatusConflict, "lease_lost",
		map[string]any{"resource": ".session/w", "presented": sessTok, "current": 0})
	next := apiAcquire(t, url, "sess-a", "x", 60000)
	if next <= aTok || bTok == 0 {
		t.Fatalf("sess-a after the session: token %d, want above %d", next, aTok)
	}
	apiProblem(t, apiDo(t, "PUT", url+"/v1/kv/sess-a/k", []byte("stale"), apiTok(aTok)), http.StatusConflict, "fenced",
		map[string]any{"resource": "sess-a", "presented": aTok, "last_fence": next})
}

// testAPIShared takes shared holds through the API: readers share one
// token, a writer waiting stops new readers, the writer's token fences the
// readers and the next group's fences the writer; renew and release name
// their holder; a reader cannot upgrade; the writer downgrades.
func testAPIShared(t *testing.T, newService newServiceFunc) {
	url, _ := newService(t)
	read := func(holder string) uint64 {
		t.Helper()
		r := apiDo(t, "POST", url+"/v1/locks/doc/acquire", fmt.Appendf(nil, `{"holder":%q,"ttl_ms":60000,"mode":"shared"}`, holder), nil)
		m := apiOK(t, r, map[string]any{"resource": "doc", "holder": holder, "token": apiPosInt, "ttl_ms": 60000,
			"expires_at": apiExpiresIn(time.Minute), "mode": "shared"})
		n, _ := apiUint(m["token"])
		return n
	}
	r1, r2 := read("r1"), read("r2")
	if r1 != r2 {
		t.Fatalf("readers got tokens %d and %d, want one group token", r1, r2)
	}
	apiPut(t, url, "doc", "k", []byte("r1"), apiTok(r1))
	apiOK(t, apiDo(t, "GET", url+"/v1/locks/doc", nil, nil), map[string]any{"resource": "doc", "held": true, "token": r1,
		"expires_at": apiExpiresIn(time.Minute), "last_token": r1, "mode": "shared", "holders": []any{"r1", "r2"}})
	lr := apiDo(t, "GET", url+"/v1/locks?prefix=doc", nil, nil)
	var list struct {
		Locks []map[string]any `json:"locks"`
	}
	if lr.status != http.StatusOK || json.Unmarshal(lr.body, &list) != nil || len(list.Locks) != 1 || list.Locks[0]["mode"] != "shared" {
		t.Fatalf("the listing of doc: %s, want it shared", lr)
	}
	apiProblem(t, apiDo(t, "POST", url+"/v1/locks/doc/acquire", []byte(`{"holder":"w"}`), nil), http.StatusConflict, "lock_held",
		map[string]any{"resource": "doc", "retry_after_ms": apiAnyInt})
	// A reader cannot upgrade; a group's token names no holder.
	apiProblem(t, apiDo(t, "POST", url+"/v1/locks/doc/acquire", []byte(`{"holder":"r1","wait_ms":1000}`), nil), http.StatusBadRequest, "bad_request", nil)
	apiProblem(t, apiDo(t, "POST", url+"/v1/locks/doc/renew", fmt.Appendf(nil, `{"token":%d}`, r1), nil), http.StatusBadRequest, "bad_request", nil)
	apiProblem(t, apiDo(t, "POST", url+"/v1/locks/doc/release", fmt.Appendf(nil, `{"token":%d,"holder":"x"}`, r1), nil), http.StatusConflict, "lease_lost",
		map[string]any{"resource": "doc", "presented": r1, "current": r1})
	apiProblem(t, apiDo(t, "POST", url+"/v1/locks/doc/acquire", []byte(`{"holder":"r1","mode":"shared","limit":2}`), nil), http.StatusBadRequest, "bad_request", nil)
	apiOK(t, apiDo(t, "POST", url+"/v1/locks/doc/renew", fmt.Appendf(nil, `{"token":%d,"holder":"r1","ttl_ms":30000}`, r1), nil),
		map[string]any{"resource": "doc", "holder": "r1", "token": r1, "ttl_ms": 30000, "expires_at": apiExpiresIn(30 * time.Second), "mode": "shared"})

	// A writer waits; a reader arriving meanwhile waits behind it.
	writer := make(chan apiResp, 1)
	go func() {
		writer <- apiDo(t, "POST", url+"/v1/locks/doc/acquire", []byte(`{"holder":"w","ttl_ms":60000,"wait_ms":60000}`), nil)
	}()
	waitWaiters(t, url, "doc", 1)
	apiProblem(t, apiDo(t, "POST", url+"/v1/locks/doc/acquire", []byte(`{"holder":"r3","mode":"shared"}`), nil), http.StatusConflict, "lock_held",
		map[string]any{"resource": "doc", "retry_after_ms": apiAnyInt})
	for _, h := range []string{"r1", "r2"} {
		apiOK(t, apiDo(t, "POST", url+"/v1/locks/doc/release", fmt.Appendf(nil, `{"token":%d,"holder":%q}`, r1, h), nil),
			map[string]any{"resource": "doc", "released": true})
	}
	w := apiOK(t, <-writer, map[string]any{"resource": "doc", "holder": "w", "token": apiPosInt, "ttl_ms": 60000, "expires_at": apiExpiresIn(time.Minute)})
	wTok, _ := apiUint(w["token"])
	if wTok <= r1 {
		t.Fatalf("the writer's token %d, want above the readers' %d", wTok, r1)
	}
	apiProblem(t, apiDo(t, "PUT", url+"/v1/kv/doc/k", []byte("stale reader"), apiTok(r1)), http.StatusConflict, "fenced",
		map[string]any{"resource": "doc", "presented": r1, "last_fence": wTok})
	// The writer downgrades: a new group's token fences its own.
	d := read("w")
	if d <= wTok {
		t.Fatalf("the downgrade's token %d, want above the writer's %d", d, wTok)
	}
	apiProblem(t, apiDo(t, "PUT", url+"/v1/kv/doc/k", []byte("stale writer"), apiTok(wTok)), http.StatusConflict, "fenced",
		map[string]any{"resource": "doc", "presented": wTok, "last_fence": d})
	if r3 := read("r3"); r3 != d {
		t.Fatalf("r3 joined with token %d, want the group's %d", r3, d)
	}
}

// testAPIRevokeRequested asks a holder to let go through the API: 202
// with the deadline; renewals and status carry revoke_at; at the deadline
// the lease is revoked and its token fenced; a free resource is revoked at
// once.
func testAPIRevokeRequested(t *testing.T, newService newServiceFunc) {
	url, _ := newService(t)
	tok := apiAcquire(t, url, "asked", "a", 60000)
	r := apiDo(t, "POST", url+"/v1/locks/asked/revoke", []byte(`{"grace_ms":1500}`), nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("revoke with grace_ms: %s, want 202", r)
	}
	m := r.members(t)
	apiMembers(t, "202", m, map[string]any{"resource": "asked", "holder": "a", "token": tok, "revoke_at": apiExpiresIn(1500 * time.Millisecond)})
	apiOK(t, apiDo(t, "POST", url+"/v1/locks/asked/renew", fmt.Appendf(nil, `{"token":%d}`, tok), nil), map[string]any{"resource": "asked",
		"holder": "a", "token": tok, "ttl_ms": 60000, "expires_at": apiExpiresIn(time.Minute), "revoke_at": m["revoke_at"].(string)})
	apiOK(t, apiDo(t, "GET", url+"/v1/locks/asked", nil, nil), map[string]any{"resource": "asked", "held": true, "holder": "a", "token": tok,
		"expires_at": apiExpiresIn(time.Minute), "last_token": tok, "revoke_at": m["revoke_at"].(string)})
	time.Sleep(2 * time.Second)
	apiProblem(t, apiDo(t, "PUT", url+"/v1/kv/asked/k", []byte("late"), apiTok(tok)), http.StatusConflict, "fenced",
		map[string]any{"resource": "asked", "presented": tok, "last_fence": tok + 1})
	apiOK(t, apiDo(t, "POST", url+"/v1/locks/free-asked/revoke", []byte(`{"grace_ms":1000}`), nil),
		map[string]any{"resource": "free-asked", "revoked_token": 0, "last_fence": 1})
	apiProblem(t, apiDo(t, "POST", url+"/v1/locks/asked/revoke", []byte(`{"grace_ms":5}`), nil), http.StatusBadRequest, "bad_request", nil)

	// A lease in a session renews nothing of its own: the session's
	// renewals list it as asked, until it ends.
	sess := apiAcquire(t, url, ".session%2Fasker", "s", 60000)
	renewSession := func() map[string]any {
		t.Helper()
		r := apiDo(t, "POST", url+"/v1/locks/.session%2Fasker/renew", fmt.Appendf(nil, `{"token":%d}`, sess), nil)
		if r.status != http.StatusOK {
			t.Fatalf("renew of the session: %s", r)
		}
		return r.members(t)
	}
	r = apiDo(t, "POST", url+"/v1/locks/in-session/acquire", fmt.Appendf(nil, `{"holder":"s","session":{"resource":".session/asker","token":%d}}`, sess), nil)
	in := apiOK(t, r, map[string]any{"resource": "in-session", "holder": "s", "token": apiPosInt, "ttl_ms": 60000,
		"expires_at": apiExpiresIn(time.Minute), "session": map[string]any{"resource": ".session/asker", "token": sess}})
	if m := renewSession(); m["asked"] != nil {
		t.Fatalf("a session's renewal lists %v before any request", m["asked"])
	}
	r = apiDo(t, "POST", url+"/v1/locks/in-session/revoke", []byte(`{"grace_ms":60000}`), nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("revoke with grace_ms of a lease in a session: %s, want 202", r)
	}
	at := r.members(t)["revoke_at"].(string)
	inTok, _ := apiUint(in["token"])
	m = renewSession()
	if want := []any{map[string]any{"resource": "in-session", "token": inTok, "revoke_at": at}}; !apiMatch(m["asked"], want) {
		t.Fatalf("the session's renewal: asked %v, want %v", m["asked"], want)
	}
	apiRelease(t, url, "in-session", inTok)
	if m := renewSession(); m["asked"] != nil {
		t.Fatalf("a session's renewal lists %v after the lease asked was released", m["asked"])
	}
}

// testAPITransfer hands a lease to a named waiter, in one change: the
// waiter's acquire returns the successor's lease, whose token is greater
// and fences the old one at once; a waiter of another name keeps its
// place; nobody of that name waiting is 404 and changes nothing.
func testAPITransfer(t *testing.T, newService newServiceFunc) {
	url, _ := newService(t)
	old := apiAcquire(t, url, "handed", "a", 60000)
	waiting := func(holder string) <-chan apiResp {
		got := make(chan apiResp, 1)
		go func() {
			got <- apiDo(t, "POST", url+"/v1/locks/handed/acquire", fmt.Appendf(nil, `{"holder":%q,"ttl_ms":60000,"wait_ms":30000}`, holder), nil)
		}()
		return got
	}
	first := waiting("first")
	waitForListedWaiters(t, url, "handed", 1)
	named := waiting("named")
	waitForListedWaiters(t, url, "handed", 2)
	apiProblem(t, apiDo(t, "POST", url+"/v1/locks/handed/transfer", fmt.Appendf(nil, `{"token":%d,"to":"nobody"}`, old), nil),
		http.StatusNotFound, "not_found", nil)
	r := apiDo(t, "POST", url+"/v1/locks/handed/transfer", fmt.Appendf(nil, `{"token":%d,"to":"named"}`, old), nil)
	apiOK(t, r, map[string]any{"resource": "handed", "holder": "named", "token": old + 1, "expires_at": apiExpiresIn(time.Minute)})
	apiOK(t, <-named, map[string]any{"resource": "handed", "holder": "named", "token": old + 1, "ttl_ms": 60000, "expires_at": apiExpiresIn(time.Minute)})
	apiProblem(t, apiDo(t, "PUT", url+"/v1/kv/handed/k", []byte("stale"), apiTok(old)), http.StatusConflict, "fenced",
		map[string]any{"resource": "handed", "presented": old, "last_fence": old + 1})
	apiProblem(t, apiDo(t, "POST", url+"/v1/locks/handed/transfer", fmt.Appendf(nil, `{"token":%d}`, old), nil), http.StatusConflict, "lease_lost",
		map[string]any{"resource": "handed", "presented": old, "current": old + 1})
	// The first waiter kept its place: the next transfer, to nobody named, is its.
	apiOK(t, apiDo(t, "POST", url+"/v1/locks/handed/transfer", fmt.Appendf(nil, `{"token":%d}`, old+1), nil),
		map[string]any{"resource": "handed", "holder": "first", "token": old + 2, "expires_at": apiExpiresIn(time.Minute)})
	apiOK(t, <-first, map[string]any{"resource": "handed", "holder": "first", "token": old + 2, "ttl_ms": 60000, "expires_at": apiExpiresIn(time.Minute)})
}

// waitForListedWaiters waits until the listing shows n acquires waiting
// for resource.
func waitForListedWaiters(t *testing.T, url, resource string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := apiDo(t, "GET", url+"/v1/locks?prefix="+resource, nil, nil)
		var body struct {
			Locks []struct {
				Resource string `json:"resource"`
				Waiters  int    `json:"waiters"`
			} `json:"locks"`
		}
		if err := json.Unmarshal(r.body, &body); err == nil {
			for _, l := range body.Locks {
				if l.Resource == resource && l.Waiters >= n {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters for %s never showed: %s", n, resource, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
