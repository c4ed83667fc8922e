package e2e

// A black-box conformance test of the v1 HTTP API (docs: API.md) against the
// real lock service and storage, on every engine (engines: the embedded
// store, etcd, PostgreSQL), each test served by the newService it is given.
// Every helper of this file is prefixed "api" so that it cannot clash with
// the package's other tests.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// apiMiB is the value limit of the API: 1 MiB.
const apiMiB = 1 << 20

var apiClient = &http.Client{Timeout: 20 * time.Second}

// apiResp is a whole response.
type apiResp struct {
	status int
	header http.Header
	body   []byte
}

func (r apiResp) String() string {
	b := r.body
	if len(b) > 300 {
		b = append(b[:300:300], "..."...)
	}
	return fmt.Sprintf("%d %s", r.status, b)
}

// apiCase is one request, relative to a service's URL.
type apiCase struct {
	name   string
	method string
	path   string
	body   []byte
	header http.Header
}

func (c apiCase) do(t *testing.T, url string) apiResp {
	t.Helper()
	return apiDo(t, c.method, url+c.path, c.body, c.header)
}

// apiDo sends a request with a body of known length (none if body is nil).
func apiDo(t *testing.T, method, url string, body []byte, header http.Header) apiResp {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	return apiSend(t, method, url, rd, header)
}

// apiSend sends a request; a body that is not a *bytes.Reader goes chunked,
// without Content-Length.
func apiSend(t *testing.T, method, url string, body io.Reader, header http.Header) apiResp {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	sent := apiSent(req) // for the OpenAPI check (openapi_test.go)
	resp, err := apiClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	r := apiResp{status: resp.StatusCode, header: resp.Header, body: b}
	apiCheckOpenAPI(t, req, sent(), r)
	return r
}

// apiHdr builds a header from name, value pairs; a name may repeat and a
// value may be empty.
func apiHdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// apiTok is a Fencing-Token header with token, plus the pairs in kv.
func apiTok(token uint64, kv ...string) http.Header {
	return apiHdr(append([]string{"Fencing-Token", strconv.FormatUint(token, 10)}, kv...)...)
}

// apiETag is the entity tag of a revision.
func apiETag(rev uint64) string { return `"` + strconv.FormatUint(rev, 10) + `"` }

// members decodes the body as one JSON object, numbers kept as json.Number.
func (r apiResp) members(t *testing.T) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		t.Fatalf("body is not a JSON object (%v): %s", err, r)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("data after the JSON object: %s", r)
	}
	return m
}

// apiPred is an expected member value described by a predicate.
type apiPred struct {
	desc string
	ok   func(v any) bool
}

func (p apiPred) String() string { return p.desc }

var (
	apiText   = apiPred{"a non-empty string", func(v any) bool { s, ok := v.(string); return ok && s != "" }}
	apiPosInt = apiPred{"an integer >= 1", func(v any) bool { n, ok := apiUint(v); return ok && n >= 1 }}
	apiAnyInt = apiPred{"an integer >= 0", func(v any) bool { _, ok := apiUint(v); return ok }}
)

// apiExpiresIn matches an RFC 3339 UTC timestamp about ttl from now.
func apiExpiresIn(ttl time.Duration) apiPred {
	return apiPred{fmt.Sprintf("an RFC 3339 UTC time about %v from now", ttl), func(v any) bool {
		s, ok := v.(string)
		if !ok || !strings.HasSuffix(s, "Z") {
			return false
		}
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return false
		}
		d := time.Until(ts)
		return d > ttl-5*time.Second && d <= ttl+time.Second
	}}
}

// apiUint returns a JSON integer as a uint64.
func apiUint(v any) (uint64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	u, err := strconv.ParseUint(n.String(), 10, 64)
	return u, err == nil
}

func apiMatch(got, want any) bool {
	switch w := want.(type) {
	case apiPred:
		return w.ok(got)
	case string:
		g, ok := got.(string)
		return ok && g == w
	case bool:
		g, ok := got.(bool)
		return ok && g == w
	case int:
		n, ok := got.(json.Number)
		return ok && n.String() == strconv.Itoa(w)
	case uint64:
		n, ok := got.(json.Number)
		return ok && n.String() == strconv.FormatUint(w, 10)
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !apiMatch(g[i], w[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k := range w {
			if !apiMatch(g[k], w[k]) {
				return false
			}
		}
		return true
	}
	panic(fmt.Sprintf("apiMatch: unsupported expectation %T", want))
}

// apiMembers checks that got has exactly the members of want (plus, if
// present, those in optional) with matching values.
func apiMembers(t *testing.T, what string, got, want map[string]any, optional ...string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok && !slices.Contains(optional, k) {
			t.Errorf("%s: unexpected member %q: %v", what, k, got[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s: member %q missing (want %v)", what, k, want[k])
		case !apiMatch(g, want[k]):
			t.Errorf("%s: member %q is %#v, want %v", what, k, g, want[k])
		}
	}
}

// apiOK checks a 200 JSON answer with exactly the members of want.
func apiOK(t *testing.T, r apiResp, want map[string]any) map[string]any {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %s, want 200", r)
	}
	if mt, _, _ := mime.ParseMediaType(r.header.Get("Content-Type")); mt != "application/json" {
		t.Errorf("Content-Type %q, want application/json", r.header.Get("Content-Type"))
	}
	m := r.members(t)
	apiMembers(t, "response", m, want)
	return m
}

// apiProblem checks an RFC 9457 problem: the status, the media type, the
// members every problem has and exactly the extra members of its code.
func apiProblem(t *testing.T, r apiResp, status int, code string, extra map[string]any, optional ...string) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %s, want %d %s", r, status, code)
	}
	if mt, _, _ := mime.ParseMediaType(r.header.Get("Content-Type")); mt != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", r.header.Get("Content-Type"))
	}
	m := r.members(t)
	want := map[string]any{"type": apiText, "title": apiText, "status": status, "detail": apiText, "code": code}
	if code == "" { // a code the API does not name: any non-empty one
		want["code"] = apiText
	}
	maps.Copy(want, extra)
	apiMembers(t, "problem", m, want, optional...)
	return m
}

// apiAcquire acquires res (escaped) for holder and returns the token.
func apiAcquire(t *testing.T, url, res, holder string, ttlMS int) uint64 {
	t.Helper()
	r := apiDo(t, "POST", url+"/v1/locks/"+res+"/acquire", fmt.Appendf(nil, `{"holder":%q,"ttl_ms":%d}`, holder, ttlMS), nil)
	if r.status != http.StatusOK {
		t.Fatalf("acquire %s by %s: %s", res, holder, r)
	}
	n, ok := apiUint(r.members(t)["token"])
	if !ok || n == 0 {
		t.Fatalf("acquire %s by %s: no token: %s", res, holder, r)
	}
	return n
}

func apiRelease(t *testing.T, url, res string, token uint64) {
	t.Helper()
	if r := apiDo(t, "POST", url+"/v1/locks/"+res+"/release", fmt.Appendf(nil, `{"token":%d}`, token), nil); r.status != http.StatusOK {
		t.Fatalf("release %s %d: %s", res, token, r)
	}
}

// apiStale leaves res held by holder "new" with token cur, and returns also
// the token of an earlier, released lease, which storage must now fence.
func apiStale(t *testing.T, url, res string) (stale, cur uint64) {
	t.Helper()
	stale = apiAcquire(t, url, res, "old", 60000)
	apiRelease(t, url, res, stale)
	cur = apiAcquire(t, url, res, "new", 60000)
	if cur <= stale {
		t.Fatalf("%s: token %d after %d", res, cur, stale)
	}
	return stale, cur
}

// apiPut writes and returns the revision.
func apiPut(t *testing.T, url, res, key string, value []byte, h http.Header) uint64 {
	t.Helper()
	r := apiDo(t, "PUT", url+"/v1/kv/"+res+"/"+key, value, h)
	if r.status != http.StatusOK {
		t.Fatalf("PUT %s/%s: %s", res, key, r)
	}
	rev, ok := apiUint(r.members(t)["revision"])
	if !ok {
		t.Fatalf("PUT %s/%s: no revision: %s", res, key, r)
	}
	return rev
}

// apiGetKV checks a GET of a stored value: the raw bytes, its ETag and the
// token of the write that stored it.
func apiGetKV(t *testing.T, url, res, key string, value []byte, rev, token uint64) {
	t.Helper()
	r := apiDo(t, "GET", url+"/v1/kv/"+res+"/"+key, nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET %s/%s: %s", res, key, r)
	}
	if !bytes.Equal(r.body, value) {
		t.Errorf("GET %s/%s: value %q (%d bytes), want %q (%d bytes)", res, key, apiClip(r.body), len(r.body), apiClip(value), len(value))
	}
	if got := r.header.Get("ETag"); got != apiETag(rev) {
		t.Errorf("GET %s/%s: ETag %s, want %s", res, key, got, apiETag(rev))
	}
	if got := r.header.Get("Fencing-Token"); got != strconv.FormatUint(token, 10) {
		t.Errorf("GET %s/%s: Fencing-Token %q, want %d", res, key, got, token)
	}
}

func apiClip(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

// apiTxnPut is a txn that fences res with tok (raw JSON) and puts res/key.
func apiTxnPut(res, tok string) []byte {
	return fmt.Appendf(nil, `{"fences":{%q:%s},"then":[{"op":"put","resource":%q,"key":"k","value":"x"}]}`, res, tok, res)
}

// TestAPI runs the API suite on every engine, as subtests named
// engine/test: TestAPI/etcd/ErrorCodes.
func TestAPI(t *testing.T) {
	suite := []struct {
		name string
		test func(*testing.T, newServiceFunc)
	}{
		{"SuccessBodies", testAPISuccessBodies},
		{"ErrorCodes", testAPIErrorCodes},
		{"Precedence", testAPIPrecedence},
		{"Txn", testAPITxn},
		{"Names", testAPINames},
		{"RejectionsChangeNothing", testAPIRejectionsChangeNothing},
		{"Routing", testAPIRouting},
		{"ValueLimits", testAPIValueLimits},
		{"List", testAPIList},
		{"Permits", testAPIPermits},
		{"AcquireAll", testAPIAcquireAll},
		{"Sessions", testAPISessions},
		{"Shared", testAPIShared},
		{"RevokeRequested", testAPIRevokeRequested},
		{"Transfer", testAPITransfer},
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			for _, s := range suite {
				t.Run(s.name, func(t *testing.T) { s.test(t, e.newService) })
			}
		})
	}
}

// testAPISuccessBodies checks the success status and the exact members of
// every endpoint.
func testAPISuccessBodies(t *testing.T, newService newServiceFunc) {
	url, _ := newService(t)
	var tok, rev uint64

	t.Run("acquire", func(t *testing.T) {
		r := apiDo(t, "POST", url+"/v1/locks/jobs/acquire", []byte(`{"holder":"worker-a","ttl_ms":60000,"wait_ms":0}`), nil)
		m := apiOK(t, r, map[string]any{"resource": "jobs", "holder": "worker-a", "token": apiPosInt, "ttl_ms": 60000, "expires_at": apiExpiresIn(time.Minute)})
		tok, _ = apiUint(m["token"])
	})
	if tok == 0 {
		t.Fatal("no lease: the other subtests need one")
	}
	t.Run("acquire defaults ttl_ms to 10000", func(t *testing.T) {
		r := apiDo(t, "POST", url+"/v1/locks/jobs-default/acquire", []byte(`{"holder":"worker-b"}`), nil)
		apiOK(t, r, map[string]any{"resource": "jobs-default", "holder": "worker-b", "token": apiPosInt, "ttl_ms": 10000, "expires_at": apiExpiresIn(10 * time.Second)})
	})
	t.Run("acquire by the holder is a retry with the same token and the new ttl_ms", func(t *testing.T) {
		r := apiDo(t, "POST", url+"/v1/locks/jobs/acquire", []byte(`{"holder":"worker-a","ttl_ms":30000}`), nil)
		apiOK(t, r, map[string]any{"resource": "jobs", "holder": "worker-a", "token": tok, "ttl_ms": 30000, "expires_at": apiExpiresIn(30 * time.Second)})
	})
	t.Run("renew with ttl_ms", func(t *testing.T) {
		r := apiDo(t, "POST", url+"/v1/locks/jobs/renew", fmt.Appendf(nil, `{"token":%d,"ttl_ms":20000}`, tok), nil)
		apiOK(t, r, map[string]any{"resource": "jobs", "holder": "worker-a", "token": tok, "ttl_ms": 20000, "expires_at": apiExpiresIn(20 * time.Second)})
	})
	t.Run("renew without ttl_ms keeps the lease's ttl", func(t *testing.T) {
		r := apiDo(t, "POST", url+"/v1/locks/jobs/renew", fmt.Appendf(nil, `{"token":%d}`, tok), nil)
		apiOK(t, r, map[string]any{"resource": "jobs", "holder": "worker-a", "token": tok, "ttl_ms": 20000, "expires_at": apiExpiresIn(20 * time.Second)})
	})
	t.Run("GET lock while held", func(t *testing.T) {
		r := apiDo(t, "GET", url+"/v1/locks/jobs", nil, nil)
		apiOK(t, r, map[string]any{"resource": "jobs", "held": true, "holder": "worker-a", "token": tok, "expires_at": apiExpiresIn(20 * time.Second), "last_token": tok})
	})
	t.Run("PUT", func(t *testing.T) {
		r := apiDo(t, "PUT", url+"/v1/kv/jobs/a/b", []byte("hello"), apiTok(tok))
		m := apiOK(t, r, map[string]any{"resource": "jobs", "key": "a/b", "revision": apiPosInt, "fence": tok})
		rev, _ = apiUint(m["revision"])
	})
	t.Run("GET kv", func(t *testing.T) {
		r := apiDo(t, "GET", url+"/v1/kv/jobs/a/b", nil, nil)
		if r.status != http.StatusOK || string(r.body) != "hello" {
			t.Fatalf("got %s, want 200 hello", r)
		}
		if ct := r.header.Get("Content-Type"); ct != "application/octet-stream" {
			t.Errorf("Content-Type %q, want application/octet-stream (raw bytes)", ct)
		}
		if got := r.header.Get("ETag"); got != apiETag(rev) {
			t.Errorf("ETag %s, want %s", got, apiETag(rev))
		}
		if got := r.header.Get("Fencing-Token"); got != strconv.FormatUint(tok, 10) {
			t.Errorf("Fencing-Token %q, want %d", got, tok)
		}
	})
	t.Run("PUT with If-Match", func(t *testing.T) {
		r := apiDo(t, "PUT", url+"/v1/kv/jobs/a/b", []byte("hello2"), apiTok(tok, "If-Match", apiETag(rev)))
		apiOK(t, r, map[string]any{"resource": "jobs", "key": "a/b", "revision": rev + 1, "fence": tok})
		rev++
		apiGetKV(t, url, "jobs", "a/b", []byte("hello2"), rev, tok)
	})
	t.Run("PUT with If-None-Match * on an absent key", func(t *testing.T) {
		r := apiDo(t, "PUT", url+"/v1/kv/jobs/new", []byte("n"), apiTok(tok, "If-None-Match", "*"))
		apiOK(t, r, map[string]any{"resource": "jobs", "key": "new", "revision": rev + 1, "fence": tok})
		rev++
	})
	t.Run("DELETE with If-Match", func(t *testing.T) {
		r := apiDo(t, "DELETE", url+"/v1/kv/jobs/new", nil, apiTok(tok, "If-Match", apiETag(rev)))
		apiOK(t, r, map[string]any{"resource": "jobs", "key": "new", "revision": rev + 1})
		rev++
		apiProblem(t, apiDo(t, "GET", url+"/v1/kv/jobs/new", nil, nil), 404, "not_found", nil)
	})
	t.Run("DELETE", func(t *testing.T) {
		rev = apiPut(t, url, "jobs", "gone", []byte("g"), apiTok(tok))
		r := apiDo(t, "DELETE", url+"/v1/kv/jobs/gone", nil, apiTok(tok))
		apiOK(t, r, map[string]any{"resource": "jobs", "key": "gone", "revision": rev + 1})
		rev++
		apiProblem(t, apiDo(t, "GET", url+"/v1/kv/jobs/gone", nil, nil), 404, "not_found", nil)
	})
	t.Run("GET fences", func(t *testing.T) {
		apiOK(t, apiDo(t, "GET", url+"/v1/fences/jobs", nil, nil), map[string]any{"resource": "jobs", "last_fence": tok})
	})
	t.Run("GET fences of an unknown resource", func(t *testing.T) {
		apiOK(t, apiDo(t, "GET", url+"/v1/fences/unknown", nil, nil), map[string]any{"resource": "unknown", "last_fence": 0})
	})
	t.Run("POST fences", func(t *testing.T) {
		apiOK(t, apiDo(t, "POST", url+"/v1/fences/jobs", nil, apiTok(tok)), map[string]any{"resource": "jobs", "last_fence": tok})
	})
	t.Run("POST txn", func(t *testing.T) {
		body := fmt.Appendf(nil, `{"fences":{"jobs":%d},"then":[{"op":"put","resource":"jobs","key":"t","value":"v"}]}`, tok)
		// POST fences raised the fence "without writing": no revision used.
		apiOK(t, apiDo(t, "POST", url+"/v1/txn", body, nil), map[string]any{"revision": rev + 1})
		rev++
		apiGetKV(t, url, "jobs", "t", []byte("v"), rev, tok)
	})
	t.Run("release", func(t *testing.T) {
		r := apiDo(t, "POST", url+"/v1/locks/jobs/release", fmt.Appendf(nil, `{"token":%d}`, tok), nil)
		apiOK(t, r, map[string]any{"resource": "jobs", "released": true})
	})
	t.Run("GET lock while free", func(t *testing.T) {
		apiOK(t, apiDo(t, "GET", url+"/v1/locks/jobs", nil, nil), map[string]any{"resource": "jobs", "held": false, "last_token": tok})
	})
	t.Run("GET lock of an unknown resource", func(t *testing.T) {
		apiOK(t, apiDo(t, "GET", url+"/v1/locks/never-locked", nil, nil), map[string]any{"resource": "never-locked", "held": false, "last_token": 0})
	})
	t.Run("acquire after release gets a greater token", func(t *testing.T) {
		r := apiDo(t, "POST", url+"/v1/locks/jobs/acquire", []byte(`{"holder":"worker-c","ttl_ms":60000}`), nil)
		m := apiOK(t, r, map[string]any{"resource": "jobs", "holder": "worker-c", "token": apiPosInt, "ttl_ms": 60000, "expires_at": apiExpiresIn(time.Minute)})
		if n, _ := apiUint(m["token"]); n <= tok {
			t.Errorf("token %d after %d", n, tok)
		}
	})
	for _, p := range []string{"/healthz", "/readyz"} {
		t.Run(p, func(t *testing.T) {
			if r := apiDo(t, "GET", url+p, nil, nil); r.status != http.StatusOK {
				t.Errorf("GET %s: %s", p, r)
			}
		})
	}
	t.Run("/metrics", func(t *testing.T) {
		r := apiDo(t, "GET", url+"/metrics", nil, nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET /metrics: %s", r)
		}
		if mt, _, _ := mime.ParseMediaType(r.header.Get("Content-Type")); mt != "text/plain" {
			t.Errorf("Content-Type %q, want Prometheus text (text/plain)", r.header.Get("Content-Type"))
		}
		if !bytes.Contains(r.body, []byte("# TYPE ")) || !bytes.Contains(r.body, []byte("fence_")) {
			t.Errorf("/metrics is not Prometheus text with fence metrics:\n%s", apiClip(r.body))
		}
	})
}

// apiBadHeaderTokens are the Fencing-Token values API.md lists as invalid.
var apiBadHeaderTokens = []string{
	"0b9a1c3e-6f0e-4a55-9d5e-0c9f1f2b7a10", "abc", "-1", "0", "1.5", "+5", "0x10", "1e3", "9223372036854775808",
}

// apiBadJSONTokens are JSON values that are not a token: not a JSON integer
// in 1..2^63-1.
var apiBadJSONTokens = []string{`"5"`, `null`, `1.5`, `0`, `-1`, `1e3`, `9223372036854775808`, `true`, `"abc"`, `5.0`, `[5]`}

// testAPIErrorCodes checks every code of API.md's table: its status, media
// type and members.
func testAPIErrorCodes(t *testing.T, newService newServiceFunc) {
	url, _ := newService(t)
	stale, cur := apiStale(t, url, "e")
	apiPut(t, url, "e", "k", []byte("v"), apiTok(cur))

	// writes lists the storage writes of resource e with header h.
	writes := func(h http.Header) []apiCase {
		return []apiCase{
			{"PUT", "PUT", "/v1/kv/e/k", []byte("x"), h},
			{"DELETE", "DELETE", "/v1/kv/e/k", nil, h},
			{"POST fences", "POST", "/v1/fences/e", nil, h},
		}
	}
	u := strconv.FormatUint

	t.Run("fenced", func(t *testing.T) {
		cases := append(writes(apiTok(stale)), apiCase{"POST txn", "POST", "/v1/txn", apiTxnPut("e", u(stale, 10)), nil})
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				apiProblem(t, c.do(t, url), 409, "fenced", map[string]any{"resource": "e", "presented": stale, "last_fence": cur})
			})
		}
	})
	t.Run("token_not_issued", func(t *testing.T) {
		cases := append(writes(apiTok(cur+1)), apiCase{"POST txn", "POST", "/v1/txn", apiTxnPut("e", u(cur+1, 10)), nil})
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				apiProblem(t, c.do(t, url), 409, "token_not_issued", map[string]any{"resource": "e", "presented": cur + 1, "last_token": cur})
			})
		}
		t.Run("the largest token on a resource never granted", func(t *testing.T) {
			r := apiDo(t, "PUT", url+"/v1/kv/virgin/k", []byte("x"), apiHdr("Fencing-Token", "9223372036854775807"))
			apiProblem(t, r, 409, "token_not_issued", map[string]any{"resource": "virgin", "presented": uint64(1<<63 - 1), "last_token": 0})
		})
	})
	t.Run("lock_held", func(t *testing.T) {
		// retryAfter checks lock_held on res and returns its Retry-After.
		retryAfter := func(t *testing.T, res, body string) int {
			t.Helper()
			r := apiDo(t, "POST", url+"/v1/locks/"+res+"/acquire", []byte(body), nil)
			// retry_after_ms is this server's extension member.
			apiProblem(t, r, 409, "lock_held", map[string]any{"resource": res}, "retry_after_ms")
			ra := r.header.Get("Retry-After")
			n, err := strconv.Atoi(ra)
			if err != nil || n < 1 || strconv.Itoa(n) != ra {
				t.Fatalf("Retry-After %q, want whole seconds >= 1", ra)
			}
			return n
		}
		t.Run("wait_ms 0", func(t *testing.T) {
			if n := retryAfter(t, "e", `{"holder":"intruder","wait_ms":0}`); n < 55 || n > 60 {
				t.Errorf("Retry-After %d for a lease of 60 s granted just now", n)
			}
		})
		t.Run("after wait_ms", func(t *testing.T) {
			start := time.Now()
			retryAfter(t, "e", `{"holder":"intruder","wait_ms":50}`)
			if d := time.Since(start); d < 50*time.Millisecond {
				t.Errorf("lock_held after %v, before wait_ms 50", d)
			}
		})
		t.Run("Retry-After rounds up", func(t *testing.T) {
			apiAcquire(t, url, "held-1500", "A", 1500)
			if n := retryAfter(t, "held-1500", `{"holder":"B"}`); n != 2 {
				t.Errorf("Retry-After %d for a lease expiring in 1-1.5 s, want 2", n)
			}
		})
		t.Run("Retry-After is at least 1", func(t *testing.T) {
			apiAcquire(t, url, "held-800", "A", 800)
			if n := retryAfter(t, "held-800", `{"holder":"B"}`); n != 1 {
				t.Errorf("Retry-After %d for a lease expiring in under 0.8 s, want 1", n)
			}
		})
	})
	t.Run("lease_lost", func(t *testing.T) {
		free := apiAcquire(t, url, "free", "A", 60000)
		apiRelease(t, url, "free", free)
		for _, c := range []struct {
			name, path    string
			token, curTok uint64
			res           string
		}{
			{"renew with a stale token", "/renew", stale, cur, "e"},
			{"release with a stale token", "/release", stale, cur, "e"},
			{"renew with a token never issued", "/renew", cur + 1, cur, "e"},
			{"renew of a released lease", "/renew", free, 0, "free"},
			{"release of a released lease", "/release", free, 0, "free"},
			{"renew on an unknown resource", "/renew", 1, 0, "nobody"},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := apiDo(t, "POST", url+"/v1/locks/"+c.res+c.path, fmt.Appendf(nil, `{"token":%d}`, c.token), nil)
				apiProblem(t, r, 409, "lease_lost", map[string]any{"resource": c.res, "presented": c.token, "current": c.curTok})
			})
		}
		t.Run("the stale release left the current lease", func(t *testing.T) {
			apiOK(t, apiDo(t, "GET", url+"/v1/locks/e", nil, nil), map[string]any{
				"resource": "e", "held": true, "holder": "new", "token": cur, "expires_at": apiExpiresIn(time.Minute), "last_token": cur})
		})
	})
	t.Run("fence_required", func(t *testing.T) {
		for _, h := range []struct {
			name string
			h    http.Header
		}{{"absent header", nil}, {"empty header", apiHdr("Fencing-Token", "")}} {
			for _, c := range writes(h.h) {
				t.Run(c.name+" with "+h.name, func(t *testing.T) {
					apiProblem(t, c.do(t, url), 428, "fence_required", nil)
				})
			}
		}
		t.Run("POST txn with an op on a resource without fences entry", func(t *testing.T) {
			body := []byte(`{"then":[{"op":"put","resource":"e","key":"k","value":"x"}]}`)
			apiProblem(t, apiDo(t, "POST", url+"/v1/txn", body, nil), 428, "fence_required", nil)
		})
	})
	t.Run("invalid_token in the header", func(t *testing.T) {
		for _, tok := range apiBadHeaderTokens {
			for _, c := range writes(apiHdr("Fencing-Token", tok)) {
				t.Run(c.name+" "+tok, func(t *testing.T) {
					apiProblem(t, c.do(t, url), 400, "invalid_token", nil)
				})
			}
		}
	})
	t.Run("invalid_token in JSON", func(t *testing.T) {
		for _, tok := range apiBadJSONTokens {
			for _, c := range []apiCase{
				{"renew", "POST", "/v1/locks/e/renew", fmt.Appendf(nil, `{"token":%s}`, tok), nil},
				{"renew with ttl_ms", "POST", "/v1/locks/e/renew", fmt.Appendf(nil, `{"token":%s,"ttl_ms":1000}`, tok), nil},
				{"release", "POST", "/v1/locks/e/release", fmt.Appendf(nil, `{"token":%s}`, tok), nil},
				{"txn fences", "POST", "/v1/txn", apiTxnPut("e", tok), nil},
				{"txn fences without ops", "POST", "/v1/txn", fmt.Appendf(nil, `{"fences":{"e":%s}}`, tok), nil},
			} {
				t.Run(c.name+" "+tok, func(t *testing.T) {
					apiProblem(t, c.do(t, url), 400, "invalid_token", nil)
				})
			}
		}
	})
	t.Run("bad_request for a missing token", func(t *testing.T) {
		for _, c := range []apiCase{
			{"renew {}", "POST", "/v1/locks/e/renew", []byte(`{}`), nil},
			{"renew with ttl_ms only", "POST", "/v1/locks/e/renew", []byte(`{"ttl_ms":1000}`), nil},
			{"release {}", "POST", "/v1/locks/e/release", []byte(`{}`), nil},
		} {
			t.Run(c.name, func(t *testing.T) {
				apiProblem(t, c.do(t, url), 400, "bad_request", nil)
			})
		}
	})
	t.Run("precondition_failed", func(t *testing.T) {
		for _, c := range []apiCase{
			{"PUT If-Match at another revision", "PUT", "/v1/kv/e/k", []byte("x"), apiTok(cur, "If-Match", `"999999"`)},
			{"PUT If-None-Match * on a present key", "PUT", "/v1/kv/e/k", []byte("x"), apiTok(cur, "If-None-Match", "*")},
			{"PUT If-Match * on an absent key", "PUT", "/v1/kv/e/absent", []byte("x"), apiTok(cur, "If-Match", "*")},
			{"DELETE If-Match at another revision", "DELETE", "/v1/kv/e/k", nil, apiTok(cur, "If-Match", `"999999"`)},
			{"txn if at another revision", "POST", "/v1/txn", fmt.Appendf(nil,
				`{"fences":{"e":%d},"if":[{"resource":"e","key":"k","revision":999999}],"then":[{"op":"put","resource":"e","key":"k","value":"x"}]}`, cur), nil},
		} {
			t.Run(c.name, func(t *testing.T) {
				apiProblem(t, c.do(t, url), 412, "precondition_failed", nil)
			})
		}
	})
	t.Run("not_found", func(t *testing.T) {
		for _, c := range []apiCase{
			{"GET an absent key", "GET", "/v1/kv/e/absent", nil, nil},
			{"GET on a resource never used", "GET", "/v1/kv/virgin/k", nil, nil},
			{"DELETE an absent key", "DELETE", "/v1/kv/e/absent", nil, apiTok(cur)},
		} {
			t.Run(c.name, func(t *testing.T) {
				apiProblem(t, c.do(t, url), 404, "not_found", nil)
			})
		}
	})
	t.Run("bad_request", func(t *testing.T) {
		for _, c := range []apiCase{
			{"acquire with malformed JSON", "POST", "/v1/locks/e/acquire", []byte(`{"holder":`), nil},
			{"PUT with a bad key", "PUT", "/v1/kv/e/a//b", []byte("x"), apiTok(cur)},
			{"txn with an unknown member", "POST", "/v1/txn", []byte(`{"fence":{}}`), nil},
		} {
			t.Run(c.name, func(t *testing.T) {
				apiProblem(t, c.do(t, url), 400, "bad_request", nil)
			})
		}
	})
	t.Run("too_large", func(t *testing.T) {
		txn := fmt.Appendf(nil, `{"fences":{"e":%d},"then":[{"op":"put","resource":"e","key":"k","value":"x"}]}`, cur)
		txn = append(txn, bytes.Repeat([]byte(" "), 4<<20+1-len(txn))...) // valid JSON, 4 MiB + 1
		for _, c := range []apiCase{
			{"PUT of 1 MiB + 1", "PUT", "/v1/kv/e/k", bytes.Repeat([]byte("x"), apiMiB+1), apiTok(cur)},
			{"acquire body over 64 KiB", "POST", "/v1/locks/e/acquire", fmt.Appendf(nil, `{"holder":"a"%s}`, bytes.Repeat([]byte(" "), 64<<10)), nil},
			{"txn body over 4 MiB", "POST", "/v1/txn", txn, nil},
		} {
			t.Run(c.name, func(t *testing.T) {
				apiProblem(t, c.do(t, url), 413, "too_large", nil)
			})
		}
	})
}

// testAPIPrecedence checks API.md's order: too_large, bad_request,
// fence_required, invalid_token, token_not_issued, fenced,
// precondition_failed, not_found.
func testAPIPrecedence(t *testing.T, newService newServiceFunc) {
	url, _ := newService(t)
	staleP, curP := apiStale(t, url, "p")
	staleA, _ := apiStale(t, url, "pa")
	curB := apiAcquire(t, url, "pb", "B", 60000)
	rev := apiPut(t, url, "p", "k", []byte("v"), apiTok(curP))
	big := strings.Repeat("x", apiMiB+1)
	putP := `{"op":"put","resource":"p","key":"k","value":"x"}`

	for _, c := range []struct {
		apiCase
		status int
		code   string
		extra  map[string]any
	}{
		// too_large beats everything.
		{apiCase{"too_large beats bad_request and fence_required: PUT over 1 MiB with a bad name and no token",
			"PUT", "/v1/kv/%01/a//b", []byte(big), nil}, 413, "too_large", nil},
		{apiCase{"too_large beats bad_request and invalid_token: PUT over 1 MiB with a bad key and a bad token",
			"PUT", "/v1/kv/p/..", []byte(big), apiHdr("Fencing-Token", "abc")}, 413, "too_large", nil},
		{apiCase{"too_large beats a bad key and fence_required in other ops of a txn", "POST", "/v1/txn",
			[]byte(`{"then":[{"op":"put","resource":"p","key":"a//b","value":"x"},{"op":"put","resource":"zz","key":"k","value":"` + big + `"}]}`), nil},
			413, "too_large", nil},
		{apiCase{"too_large beats invalid_token in a txn", "POST", "/v1/txn",
			[]byte(`{"fences":{"p":"5"},"then":[{"op":"put","resource":"p","key":"k","value":"` + big + `"}]}`), nil},
			413, "too_large", nil},
		{apiCase{"too_large beats a bad key in the same txn op", "POST", "/v1/txn",
			fmt.Appendf(nil, `{"fences":{"p":%d},"then":[{"op":"put","resource":"p","key":"a//b","value":"%s"}]}`, curP, big), nil},
			413, "too_large", nil},
		{apiCase{"too_large beats an unknown member of a txn", "POST", "/v1/txn",
			fmt.Appendf(nil, `{"fences":{"p":%d},"color":"red","then":[{"op":"put","resource":"p","key":"k","value":"%s"}]}`, curP, big), nil},
			413, "too_large", nil},
		// bad_request beats fence_required and invalid_token.
		{apiCase{"bad_request beats fence_required: PUT with a bad key and no token", "PUT", "/v1/kv/p/a//b", []byte("x"), nil},
			400, "bad_request", nil},
		{apiCase{"bad_request beats fence_required: PUT with a malformed If-Match and no token", "PUT", "/v1/kv/p/k", []byte("x"),
			apiHdr("If-Match", "W/\"1\"")}, 400, "bad_request", nil},
		{apiCase{"bad_request beats fence_required: DELETE with a bad key and no token", "DELETE", "/v1/kv/p/..", nil, nil},
			400, "bad_request", nil},
		{apiCase{"bad_request beats fence_required: POST fences with a bad name and no token", "POST", "/v1/fences/%ff", nil, nil},
			400, "bad_request", nil},
		{apiCase{"bad_request beats fence_required in a txn", "POST", "/v1/txn",
			fmt.Appendf(nil, `{"fences":{"p":%d},"then":[{"op":"put","resource":"zz","key":"k","value":"x"},{"op":"put","resource":"p","key":"a//b","value":"x"}]}`, curP), nil},
			400, "bad_request", nil},
		{apiCase{"bad_request beats invalid_token: PUT with a bad key and a bad token", "PUT", "/v1/kv/p/a//b", []byte("x"),
			apiHdr("Fencing-Token", "abc")}, 400, "bad_request", nil},
		{apiCase{"bad_request beats invalid_token: PUT with a malformed If-None-Match and a bad token", "PUT", "/v1/kv/p/k", []byte("x"),
			apiHdr("Fencing-Token", "abc", "If-None-Match", `"1"`)}, 400, "bad_request", nil},
		{apiCase{"bad_request beats invalid_token: renew with ttl_ms 9 and token \"5\"", "POST", "/v1/locks/p/renew",
			[]byte(`{"token":"5","ttl_ms":9}`), nil}, 400, "bad_request", nil},
		{apiCase{"bad_request beats invalid_token in a txn", "POST", "/v1/txn",
			[]byte(`{"fences":{"p":"5"},"if":[{"resource":"p","key":"k"}]}`), nil}, 400, "bad_request", nil},
		// fence_required beats invalid_token.
		{apiCase{"fence_required beats invalid_token in a txn", "POST", "/v1/txn",
			[]byte(`{"fences":{"p":"5"},"then":[{"op":"put","resource":"q","key":"k","value":"x"}]}`), nil},
			428, "fence_required", nil},
		// invalid_token beats the store's checks.
		{apiCase{"invalid_token beats token_not_issued and fenced in a txn", "POST", "/v1/txn",
			fmt.Appendf(nil, `{"fences":{"pa":%d,"pb":%d,"p":0}}`, staleA, curB+1), nil}, 400, "invalid_token", nil},
		// token_not_issued beats fenced, across resources too.
		{apiCase{"token_not_issued beats fenced in a txn, though the fenced resource is first in byte order", "POST", "/v1/txn",
			fmt.Appendf(nil, `{"fences":{"pa":%d,"pb":%d},"then":[{"op":"put","resource":"pa","key":"k","value":"x"},{"op":"put","resource":"pb","key":"k","value":"x"}]}`, staleA, curB+1), nil},
			409, "token_not_issued", map[string]any{"resource": "pb", "presented": curB + 1, "last_token": curB}},
		// token_not_issued and fenced beat precondition_failed and not_found.
		{apiCase{"token_not_issued beats precondition_failed: PUT with If-Match at another revision", "PUT", "/v1/kv/p/k", []byte("x"),
			apiTok(curP+1, "If-Match", `"999999"`)}, 409, "token_not_issued", map[string]any{"resource": "p", "presented": curP + 1, "last_token": curP}},
		{apiCase{"token_not_issued beats precondition_failed: PUT with If-None-Match * on a present key", "PUT", "/v1/kv/p/k", []byte("x"),
			apiTok(curP+1, "If-None-Match", "*")}, 409, "token_not_issued", map[string]any{"resource": "p", "presented": curP + 1, "last_token": curP}},
		{apiCase{"token_not_issued beats precondition_failed in a txn", "POST", "/v1/txn",
			fmt.Appendf(nil, `{"fences":{"p":%d},"if":[{"resource":"p","key":"k","revision":999999}],"then":[%s]}`, curP+1, putP), nil},
			409, "token_not_issued", map[string]any{"resource": "p", "presented": curP + 1, "last_token": curP}},
		{apiCase{"token_not_issued beats not_found: DELETE of an absent key", "DELETE", "/v1/kv/p/absent", nil, apiTok(curP + 1)},
			409, "token_not_issued", map[string]any{"resource": "p", "presented": curP + 1, "last_token": curP}},
		{apiCase{"fenced beats precondition_failed: PUT with If-Match at another revision", "PUT", "/v1/kv/p/k", []byte("x"),
			apiTok(staleP, "If-Match", `"999999"`)}, 409, "fenced", map[string]any{"resource": "p", "presented": staleP, "last_fence": curP}},
		{apiCase{"fenced beats precondition_failed: PUT with If-None-Match * on a present key", "PUT", "/v1/kv/p/k", []byte("x"),
			apiTok(staleP, "If-None-Match", "*")}, 409, "fenced", map[string]any{"resource": "p", "presented": staleP, "last_fence": curP}},
		{apiCase{"fenced beats precondition_failed in a txn", "POST", "/v1/txn",
			fmt.Appendf(nil, `{"fences":{"p":%d},"if":[{"resource":"p","key":"k","revision":999999}],"then":[%s]}`, staleP, putP), nil},
			409, "fenced", map[string]any{"resource": "p", "presented": staleP, "last_fence": curP}},
		{apiCase{"fenced beats not_found: DELETE of an absent key with a stale token", "DELETE", "/v1/kv/p/absent", nil, apiTok(staleP)},
			409, "fenced", map[string]any{"resource": "p", "presented": staleP, "last_fence": curP}},
		{apiCase{"fenced beats not_found and precondition_failed: DELETE of an absent key with If-Match", "DELETE", "/v1/kv/p/absent", nil,
			apiTok(staleP, "If-Match", `"1"`)}, 409, "fenced", map[string]any{"resource": "p", "presented": staleP, "last_fence": curP}},
		// precondition_failed beats not_found.
		{apiCase{"precondition_failed beats not_found: DELETE of an absent key with If-Match", "DELETE", "/v1/kv/p/absent", nil,
			apiTok(curP, "If-Match", apiETag(rev))}, 412, "precondition_failed", nil},
		{apiCase{"precondition_failed: PUT with If-Match on a present key at another revision", "PUT", "/v1/kv/p/k", []byte("x"),
			apiTok(curP, "If-Match", apiETag(rev+1000))}, 412, "precondition_failed", nil},
		{apiCase{"precondition_failed: DELETE with If-Match on a present key at another revision", "DELETE", "/v1/kv/p/k", nil,
			apiTok(curP, "If-Match", apiETag(rev+1000))}, 412, "precondition_failed", nil},
		{apiCase{"not_found: DELETE of an absent key with a good token", "DELETE", "/v1/kv/p/absent", nil, apiTok(curP)},
			404, "not_found", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			apiProblem(t, c.do(t, url), c.status, c.code, c.extra)
		})
	}
	t.Run("too_large beats everything with a chunked body (no Content-Length)", func(t *testing.T) {
		r := apiSend(t, "PUT", url+"/v1/kv/%01/a//b", io.MultiReader(strings.NewReader(big)), nil)
		apiProblem(t, r, 413, "too_large", nil)
	})
	t.Run("nothing changed", func(t *testing.T) {
		apiGetKV(t, url, "p", "k", []byte("v"), rev, curP)
		if got := apiPut(t, url, "p", "k2", []byte("v"), apiTok(curP)); got != rev+1 {
			t.Errorf("next write at revision %d, want %d: a rejected request used a revision", got, rev+1)
		}
	})
}

// testAPITxn checks POST /v1/txn: all or nothing across resources.
func testAPITxn(t *testing.T, newService newServiceFunc) {
	url, _ := newService(t)
	ta := apiAcquire(t, url, "ta", "A", 60000)
	staleB, curB := apiStale(t, url, "tb")
	tc := apiAcquire(t, url, "tc", "C", 60000)
	rev := apiPut(t, url, "ta", "seed", []byte("s"), apiTok(ta))
	var xRev uint64 // the revision of ta/x
	txn := func(t *testing.T, body string) apiResp {
		t.Helper()
		return apiDo(t, "POST", url+"/v1/txn", []byte(body), nil)
	}

	t.Run("writes to several resources share one new revision", func(t *testing.T) {
		r := txn(t, fmt.Sprintf(`{"fences":{"ta":%d,"tb":%d},"then":[
			{"op":"put","resource":"ta","key":"x","value":"1"},
			{"op":"put","resource":"tb","key":"y/z","value":"2"},
			{"op":"delete","resource":"ta","key":"seed"}]}`, ta, curB))
		apiOK(t, r, map[string]any{"revision": rev + 1})
		rev++
		apiGetKV(t, url, "ta", "x", []byte("1"), rev, ta)
		apiGetKV(t, url, "tb", "y/z", []byte("2"), rev, curB)
		apiProblem(t, apiDo(t, "GET", url+"/v1/kv/ta/seed", nil, nil), 404, "not_found", nil)
	})
	t.Run("a fenced resource rejects the writes to every resource", func(t *testing.T) {
		r := txn(t, fmt.Sprintf(`{"fences":{"ta":%d,"tb":%d},"then":[
			{"op":"put","resource":"ta","key":"x","value":"3"},
			{"op":"put","resource":"tb","key":"y/z","value":"4"}]}`, ta, staleB))
		apiProblem(t, r, 409, "fenced", map[string]any{"resource": "tb", "presented": staleB, "last_fence": curB})
		apiGetKV(t, url, "ta", "x", []byte("1"), rev, ta)
		apiGetKV(t, url, "tb", "y/z", []byte("2"), rev, curB)
	})
	t.Run("a fences entry without ops is checked", func(t *testing.T) {
		r := txn(t, fmt.Sprintf(`{"fences":{"ta":%d,"tb":%d},"then":[{"op":"put","resource":"ta","key":"x","value":"5"}]}`, ta, staleB))
		apiProblem(t, r, 409, "fenced", map[string]any{"resource": "tb", "presented": staleB, "last_fence": curB})
		apiGetKV(t, url, "ta", "x", []byte("1"), rev, ta)
	})
	t.Run("a failed compare rejects every write", func(t *testing.T) {
		r := txn(t, fmt.Sprintf(`{"fences":{"ta":%d,"tb":%d},
			"if":[{"resource":"ta","key":"x","revision":%d},{"resource":"tb","key":"y/z","revision":%d}],
			"then":[{"op":"put","resource":"ta","key":"x","value":"6"},{"op":"put","resource":"tb","key":"y/z","value":"6"}]}`, ta, curB, rev, rev+7))
		apiProblem(t, r, 412, "precondition_failed", nil)
		apiGetKV(t, url, "ta", "x", []byte("1"), rev, ta)
		apiGetKV(t, url, "tb", "y/z", []byte("2"), rev, curB)
	})
	t.Run("compares that hold apply the writes", func(t *testing.T) {
		r := txn(t, fmt.Sprintf(`{"fences":{"ta":%d},
			"if":[{"resource":"ta","key":"x","revision":%d},{"resource":"tb","key":"y/z","revision":%d}],
			"then":[{"op":"put","resource":"ta","key":"x","value":"7"}]}`, ta, rev, rev))
		apiOK(t, r, map[string]any{"revision": rev + 1})
		rev++
		xRev = rev
		apiGetKV(t, url, "ta", "x", []byte("7"), rev, ta)
	})
	t.Run("fences entries without ops are accepted", func(t *testing.T) {
		r := txn(t, fmt.Sprintf(`{"fences":{"ta":%d,"tc":%d},"then":[{"op":"put","resource":"ta","key":"w","value":"w"}]}`, ta, tc))
		apiOK(t, r, map[string]any{"revision": rev + 1})
		rev++
		apiOK(t, apiDo(t, "GET", url+"/v1/fences/tc", nil, nil), map[string]any{"resource": "tc", "last_fence": tc})
		r = txn(t, fmt.Sprintf(`{"fences":{"tc":%d}}`, tc))
		apiOK(t, r, map[string]any{"revision": apiAnyInt})
		apiOK(t, apiDo(t, "GET", url+"/v1/fences/tc", nil, nil), map[string]any{"resource": "tc", "last_fence": tc})
	})
	t.Run("a resource only in if needs no fence", func(t *testing.T) {
		r := txn(t, fmt.Sprintf(`{"fences":{"ta":%d},"if":[{"resource":"elsewhere","key":"k","revision":0}],
			"then":[{"op":"put","resource":"ta","key":"v","value":"v"}]}`, ta))
		apiOK(t, r, map[string]any{"revision": apiPosInt})
		rev = apiPut(t, url, "ta", "sync", nil, apiTok(ta)) // learn the revision
		apiOK(t, apiDo(t, "GET", url+"/v1/fences/elsewhere", nil, nil), map[string]any{"resource": "elsewhere", "last_fence": 0})
	})
	t.Run("an op without a fences entry is fence_required", func(t *testing.T) {
		r := txn(t, fmt.Sprintf(`{"fences":{"ta":%d},"then":[{"op":"put","resource":"ta","key":"x","value":"8"},
			{"op":"delete","resource":"tc","key":"x"}]}`, ta))
		apiProblem(t, r, 428, "fence_required", nil)
		apiGetKV(t, url, "ta", "x", []byte("7"), xRev, ta)
	})
	t.Run("value_base64", func(t *testing.T) {
		value := []byte{0, 1, 2, '\n', '"', 0xfe, 0xff}
		r := txn(t, fmt.Sprintf(`{"fences":{"ta":%d},"then":[{"op":"put","resource":"ta","key":"bin","value_base64":%q}]}`,
			ta, base64.StdEncoding.EncodeToString(value)))
		apiOK(t, r, map[string]any{"revision": rev + 1})
		rev++
		apiGetKV(t, url, "ta", "bin", value, rev, ta)
	})
	t.Run("revision 0 in if means absent", func(t *testing.T) {
		body := fmt.Sprintf(`{"fences":{"ta":%d},"if":[{"resource":"ta","key":"once","revision":0}],
			"then":[{"op":"put","resource":"ta","key":"once","value":"first"}]}`, ta)
		apiOK(t, txn(t, body), map[string]any{"revision": rev + 1})
		rev++
		apiProblem(t, txn(t, strings.Replace(body, "first", "second", 1)), 412, "precondition_failed", nil)
		apiGetKV(t, url, "ta", "once", []byte("first"), rev, ta)
	})
	t.Run("the failing resource named is the first in byte order", func(t *testing.T) {
		// "B" (0x42) sorts before "a" (0x61) in byte order, not in case-folded order.
		staleA, curA := apiStale(t, url, "a")
		staleBB, curBB := apiStale(t, url, "B")
		ops := `"then":[{"op":"put","resource":"a","key":"k","value":"x"},{"op":"put","resource":"B","key":"k","value":"x"}]`
		r := txn(t, fmt.Sprintf(`{"fences":{"a":%d,"B":%d},%s}`, staleA, staleBB, ops))
		apiProblem(t, r, 409, "fenced", map[string]any{"resource": "B", "presented": staleBB, "last_fence": curBB})
		r = txn(t, fmt.Sprintf(`{"fences":{"a":%d,"B":%d},%s}`, curA+1, curBB+1, ops))
		apiProblem(t, r, 409, "token_not_issued", map[string]any{"resource": "B", "presented": curBB + 1, "last_token": curBB})
		r = txn(t, fmt.Sprintf(`{"fences":{"zz":%d,"a":%d,"B":%d}}`, 5, staleA, curBB))
		apiProblem(t, r, 409, "token_not_issued", map[string]any{"resource": "zz", "presented": 5, "last_token": 0})
		r = txn(t, fmt.Sprintf(`{"fences":{"a":%d,"B":%d}}`, staleA, staleBB))
		apiProblem(t, r, 409, "fenced", map[string]any{"resource": "B", "presented": staleBB, "last_fence": curBB})
	})
	t.Run("malformed ops are bad_request", func(t *testing.T) {
		for name, op := range map[string]string{
			"invalid base64":                `{"op":"put","resource":"ta","key":"k","value_base64":"!!"}`,
			"both value and value_base64":   `{"op":"put","resource":"ta","key":"k","value":"x","value_base64":"eA=="}`,
			"a put without a value":         `{"op":"put","resource":"ta","key":"k"}`,
			"a delete with a value":         `{"op":"delete","resource":"ta","key":"k","value":"x"}`,
			"an unknown op":                 `{"op":"patch","resource":"ta","key":"k","value":"x"}`,
			"an unknown member":             `{"op":"put","resource":"ta","key":"k","value":"x","ttl":1}`,
			"a missing key":                 `{"op":"put","resource":"ta","value":"x"}`,
			"a value that is not a string":  `{"op":"put","resource":"ta","key":"k","value":5}`,
			"a key with an empty segment":   `{"op":"put","resource":"ta","key":"a//b","value":"x"}`,
			"an op in the wrong case (Put)": `{"op":"Put","resource":"ta","key":"k","value":"x"}`,
		} {
			t.Run(name, func(t *testing.T) {
				r := txn(t, fmt.Sprintf(`{"fences":{"ta":%d},"then":[%s]}`, ta, op))
				apiProblem(t, r, 400, "bad_request", nil)
			})
		}
	})
	t.Run("nothing rejected used a revision", func(t *testing.T) {
		if got := apiPut(t, url, "ta", "last", []byte("l"), apiTok(ta)); got != rev+1 {
			t.Errorf("next write at revision %d, want %d", got, rev+1)
		}
	})
}

// testAPINames checks resource and key names, holders and the bounds of
// lock request bodies.
func testAPINames(t *testing.T, newService newServiceFunc) {
	url, _ := newService(t)
	tok := apiAcquire(t, url, "names", "N", 60000)

	t.Run("percent-encoded slash in a resource is one segment", func(t *testing.T) {
		r := apiDo(t, "POST", url+"/v1/locks/orders%2F17/acquire", []byte(`{"holder":"x","ttl_ms":60000}`), nil)
		m := apiOK(t, r, map[string]any{"resource": "orders/17", "holder": "x", "token": apiPosInt, "ttl_ms": 60000, "expires_at": apiExpiresIn(time.Minute)})
		slashTok, _ := apiUint(m["token"])
		plainTok := apiAcquire(t, url, "orders", "y", 60000)

		r = apiDo(t, "PUT", url+"/v1/kv/orders%2F17/k", []byte("slash"), apiTok(slashTok))
		m = apiOK(t, r, map[string]any{"resource": "orders/17", "key": "k", "revision": apiPosInt, "fence": slashTok})
		slashRev, _ := apiUint(m["revision"])
		r = apiDo(t, "PUT", url+"/v1/kv/orders/17", []byte("plain"), apiTok(plainTok))
		m = apiOK(t, r, map[string]any{"resource": "orders", "key": "17", "revision": slashRev + 1, "fence": plainTok})

		apiGetKV(t, url, "orders%2F17", "k", []byte("slash"), slashRev, slashTok)
		apiGetKV(t, url, "orders%2f17", "k", []byte("slash"), slashRev, slashTok) // lower-case hex is the same name
		apiGetKV(t, url, "orders", "17", []byte("plain"), slashRev+1, plainTok)
		apiProblem(t, apiDo(t, "GET", url+"/v1/kv/orders/17/k", nil, nil), 404, "not_found", nil)
		apiOK(t, apiDo(t, "GET", url+"/v1/locks/orders%2F17", nil, nil), map[string]any{
			"resource": "orders/17", "held": true, "holder": "x", "token": slashTok, "expires_at": apiExpiresIn(time.Minute), "last_token": slashTok})
		apiOK(t, apiDo(t, "GET", url+"/v1/fences/orders%2F17", nil, nil), map[string]any{"resource": "orders/17", "last_fence": slashTok})
	})
	t.Run("a key may hold slashes", func(t *testing.T) {
		r := apiDo(t, "PUT", url+"/v1/kv/names/a/b/c", []byte("abc"), apiTok(tok))
		m := apiOK(t, r, map[string]any{"resource": "names", "key": "a/b/c", "revision": apiPosInt, "fence": tok})
		rev, _ := apiUint(m["revision"])
		apiGetKV(t, url, "names", "a/b/c", []byte("abc"), rev, tok)
		apiGetKV(t, url, "names", "a%2Fb%2Fc", []byte("abc"), rev, tok) // the key is the decoded rest of the path
		apiProblem(t, apiDo(t, "GET", url+"/v1/kv/names/a/b", nil, nil), 404, "not_found", nil)
	})
	t.Run("names at the limits are accepted", func(t *testing.T) {
		long := strings.Repeat("r", 512)
		lt := apiAcquire(t, url, long, "L", 60000)
		apiOK(t, apiDo(t, "PUT", url+"/v1/kv/"+long+"/"+strings.Repeat("k", 512), []byte("x"), apiTok(lt)),
			map[string]any{"resource": long, "key": strings.Repeat("k", 512), "revision": apiPosInt, "fence": lt})
		ut := apiAcquire(t, url, "z%C3%BCrich", "U", 60000)
		apiOK(t, apiDo(t, "PUT", url+"/v1/kv/z%C3%BCrich/caf%C3%A9%20au%20lait", []byte("x"), apiTok(ut)),
			map[string]any{"resource": "zürich", "key": "café au lait", "revision": apiPosInt, "fence": ut})
	})

	long := strings.Repeat("r", 513)
	for _, c := range []struct{ name, res, key string }{
		{"empty resource", "", "k"},
		{"513-byte resource", long, "k"},
		{"control character %01 in a resource", "a%01b", "k"},
		{"DEL in a resource", "a%7Fb", "k"},
		{"C1 control U+0085 in a resource", "a%C2%85b", "k"},
		{"invalid UTF-8 %ff in a resource", "a%ffb", "k"},
		{"truncated UTF-8 in a resource", "a%C3", "k"},
		{"empty key", "names", ""},
		{"empty key segment", "names", "a//b"},
		{"leading empty key segment", "names", "/a"},
		{"trailing empty key segment", "names", "a/"},
		{". key", "names", "."},
		{".. key", "names", ".."},
		{". key segment", "names", "a/./b"},
		{".. key segment", "names", "a/../b"},
		{"percent-encoded .. key", "names", "%2E%2E"},
		{"percent-encoded .. segment", "names", "a%2F..%2Fb"},
		{"513-byte key", "names", strings.Repeat("k", 513)},
		{"control character %01 in a key", "names", "a%01"},
		{"newline in a key", "names", "a%0Ab"},
		{"invalid UTF-8 %ff in a key", "names", "%ff"},
	} {
		t.Run("bad_request for "+c.name, func(t *testing.T) {
			path := "/v1/kv/" + c.res + "/" + c.key
			apiProblem(t, apiDo(t, "PUT", url+path, []byte("x"), apiTok(tok)), 400, "bad_request", nil)
			apiProblem(t, apiDo(t, "GET", url+path, nil, nil), 400, "bad_request", nil)
			apiProblem(t, apiDo(t, "DELETE", url+path, nil, apiTok(tok)), 400, "bad_request", nil)
			if c.res != "names" {
				for _, lc := range []apiCase{
					{"", "POST", "/v1/locks/" + c.res + "/acquire", []byte(`{"holder":"h"}`), nil},
					{"", "POST", "/v1/locks/" + c.res + "/renew", []byte(`{"token":1}`), nil},
					{"", "POST", "/v1/locks/" + c.res + "/release", []byte(`{"token":1}`), nil},
					{"", "GET", "/v1/fences/" + c.res, nil, nil},
					{"", "POST", "/v1/fences/" + c.res, nil, apiTok(1)},
				} {
					if c.res == "" && lc.method == "GET" {
						continue // "/v1/fences/" has no resource segment: see TestAPIRouting
					}
					r := lc.do(t, url)
					if r.status != 400 || !bytes.Contains(r.body, []byte(`"bad_request"`)) {
						t.Errorf("%s %s: %s, want 400 bad_request", lc.method, lc.path, r)
					}
				}
				if c.res != "" {
					apiProblem(t, apiDo(t, "GET", url+"/v1/locks/"+c.res, nil, nil), 400, "bad_request", nil)
				}
			}
		})
	}
	t.Run("bad_request for a txn name", func(t *testing.T) {
		for _, body := range []string{
			fmt.Sprintf(`{"fences":{%q:1}}`, long),
			`{"fences":{"a\u0001b":1}}`,
			`{"fences":{"":1}}`,
			fmt.Sprintf(`{"fences":{"names":%d},"then":[{"op":"put","resource":"names","key":"a/../b","value":"x"}]}`, tok),
			fmt.Sprintf(`{"fences":{"names":%d},"if":[{"resource":"names","key":"","revision":0}]}`, tok),
			`{"if":[{"resource":"a\u0085","key":"k","revision":0}]}`,
		} {
			apiProblem(t, apiDo(t, "POST", url+"/v1/txn", []byte(body), nil), 400, "bad_request", nil)
		}
	})

	acquires := []struct {
		name   string
		body   string
		status int
	}{
		{"holder of 256 bytes", `{"holder":"` + strings.Repeat("h", 256) + `"}`, 200},
		{"holder of 257 bytes", `{"holder":"` + strings.Repeat("h", 257) + `"}`, 400},
		{"empty holder", `{"holder":""}`, 400},
		{"missing holder", `{"ttl_ms":1000}`, 400},
		{"holder that is not a string", `{"holder":5}`, 400},
		{"holder with a control character", `{"holder":"a\u0001"}`, 400},
		{"ttl_ms 10", `{"holder":"h","ttl_ms":10}`, 200},
		{"ttl_ms 86400000", `{"holder":"h","ttl_ms":86400000}`, 200},
		{"ttl_ms 9", `{"holder":"h","ttl_ms":9}`, 400},
		{"ttl_ms 86400001", `{"holder":"h","ttl_ms":86400001}`, 400},
		{"ttl_ms -1", `{"holder":"h","ttl_ms":-1}`, 400},
		{"ttl_ms 1000.5", `{"holder":"h","ttl_ms":1000.5}`, 400},
		{"ttl_ms as a string", `{"holder":"h","ttl_ms":"1000"}`, 400},
		{"wait_ms 300000", `{"holder":"h","wait_ms":300000}`, 200},
		{"wait_ms 300001", `{"holder":"h","wait_ms":300001}`, 400},
		{"wait_ms -1", `{"holder":"h","wait_ms":-1}`, 400},
		{"unknown member", `{"holder":"h","priority":1}`, 400},
		{"duplicate member", `{"holder":"h","holder":"i"}`, 400},
		{"member in the wrong case", `{"Holder":"h"}`, 400},
		{"trailing garbage", `{"holder":"h"} x`, 400},
		{"a second object", `{"holder":"h"}{}`, 400},
		{"an array", `[{"holder":"h"}]`, 400},
		{"null", `null`, 400},
		{"empty body", ``, 400},
		{"invalid UTF-8", "{\"holder\":\"\xff\"}", 400},
	}
	for i, c := range acquires {
		t.Run("acquire with "+c.name, func(t *testing.T) {
			r := apiDo(t, "POST", fmt.Sprintf("%s/v1/locks/acq-%d/acquire", url, i), []byte(c.body), nil)
			if c.status == 200 {
				if r.status != 200 {
					t.Fatalf("%s, want 200", r)
				}
				return
			}
			apiProblem(t, r, 400, "bad_request", nil)
			apiOK(t, apiDo(t, "GET", fmt.Sprintf("%s/v1/locks/acq-%d", url, i), nil, nil),
				map[string]any{"resource": fmt.Sprintf("acq-%d", i), "held": false, "last_token": 0})
		})
	}
	for _, c := range []struct{ name, body string }{
		{"ttl_ms 9", fmt.Sprintf(`{"token":%d,"ttl_ms":9}`, tok)},
		{"ttl_ms 86400001", fmt.Sprintf(`{"token":%d,"ttl_ms":86400001}`, tok)},
		{"an unknown member", fmt.Sprintf(`{"token":%d,"owner":"N"}`, tok)},
		{"a duplicate token", fmt.Sprintf(`{"token":%d,"token":%d}`, tok, tok)},
		{"Token in the wrong case", fmt.Sprintf(`{"Token":%d}`, tok)},
		{"trailing garbage", fmt.Sprintf(`{"token":%d},`, tok)},
	} {
		t.Run("renew with "+c.name, func(t *testing.T) {
			apiProblem(t, apiDo(t, "POST", url+"/v1/locks/names/renew", []byte(c.body), nil), 400, "bad_request", nil)
		})
	}
}

// apiSnap is what a client can see of the state: fences, locks and values.
type apiSnap map[string]string

// apiSnapshot reads GET /v1/fences and GET /v1/locks of resources and GET
// /v1/kv of keys (value, ETag, Fencing-Token). The store-wide revision is
// checked apart, by the next accepted write.
func apiSnapshot(t *testing.T, url string, resources []string, keys []string) apiSnap {
	t.Helper()
	s := apiSnap{}
	for _, res := range resources {
		r := apiDo(t, "GET", url+"/v1/fences/"+res, nil, nil)
		s["fence "+res] = r.String()
		r = apiDo(t, "GET", url+"/v1/locks/"+res, nil, nil)
		s["lock "+res] = r.String()
	}
	for _, k := range keys {
		r := apiDo(t, "GET", url+"/v1/kv/"+k, nil, nil)
		s["kv "+k] = fmt.Sprintf("%s ETag=%s Fencing-Token=%s", r, r.header.Get("ETag"), r.header.Get("Fencing-Token"))
	}
	return s
}

// testAPIRejectionsChangeNothing checks invariant 5 end to end: after every
// kind of rejected request the fences, locks, values and the store-wide
// revision are as before.
func testAPIRejectionsChangeNothing(t *testing.T, newService newServiceFunc) {
	url, _ := newService(t)
	stale1, cur1 := apiStale(t, url, "r1")
	cur2 := apiAcquire(t, url, "r2", "R2", 60000)
	probe := apiAcquire(t, url, "probe", "P", 60000)
	rev1 := apiPut(t, url, "r1", "k1", []byte("v1"), apiTok(cur1))
	apiPut(t, url, "r1", "k2", []byte("v2"), apiTok(cur1))
	apiPut(t, url, "r2", "k1", []byte("w1"), apiTok(cur2))
	resources := []string{"r1", "r2", "probe", "virgin", "r3"}
	keys := []string{"r1/k1", "r1/k2", "r1/absent", "r2/k1", "r2/absent", "virgin/k", "probe/p", "r3/k"}

	big := bytes.Repeat([]byte("x"), apiMiB+1)
	u := func(n uint64) string { return strconv.FormatUint(n, 10) }
	txnBoth := func(f1, f2 string) []byte {
		return fmt.Appendf(nil, `{"fences":{"r1":%s,"r2":%s},"then":[{"op":"put","resource":"r1","key":"k1","value":"bad"},
			{"op":"delete","resource":"r2","key":"k1"},{"op":"put","resource":"r2","key":"new","value":"bad"}]}`, f1, f2)
	}
	cases := []struct {
		apiCase
		status int
		code   string
	}{
		{apiCase{"PUT fenced", "PUT", "/v1/kv/r1/k1", []byte("bad"), apiTok(stale1)}, 409, "fenced"},
		{apiCase{"PUT fenced on an absent key", "PUT", "/v1/kv/r1/absent", []byte("bad"), apiTok(stale1)}, 409, "fenced"},
		{apiCase{"PUT token_not_issued", "PUT", "/v1/kv/r1/k1", []byte("bad"), apiTok(cur1 + 1)}, 409, "token_not_issued"},
		{apiCase{"PUT token_not_issued on a resource never granted", "PUT", "/v1/kv/virgin/k", []byte("bad"), apiTok(1)}, 409, "token_not_issued"},
		{apiCase{"PUT precondition_failed If-Match", "PUT", "/v1/kv/r1/k1", []byte("bad"), apiTok(cur1, "If-Match", apiETag(rev1+1000))}, 412, "precondition_failed"},
		{apiCase{"PUT precondition_failed If-None-Match", "PUT", "/v1/kv/r1/k1", []byte("bad"), apiTok(cur1, "If-None-Match", "*")}, 412, "precondition_failed"},
		{apiCase{"PUT precondition_failed If-Match on an absent key", "PUT", "/v1/kv/r1/absent", []byte("bad"), apiTok(cur1, "If-Match", apiETag(rev1))}, 412, "precondition_failed"},
		{apiCase{"PUT invalid_token abc", "PUT", "/v1/kv/r1/k1", []byte("bad"), apiHdr("Fencing-Token", "abc")}, 400, "invalid_token"},
		{apiCase{"PUT invalid_token 2^63", "PUT", "/v1/kv/r1/k1", []byte("bad"), apiHdr("Fencing-Token", "9223372036854775808")}, 400, "invalid_token"},
		{apiCase{"PUT invalid_token with two headers", "PUT", "/v1/kv/r1/k1", []byte("bad"), apiHdr("Fencing-Token", u(cur1), "Fencing-Token", u(cur1))}, 400, "invalid_token"},
		{apiCase{"PUT fence_required", "PUT", "/v1/kv/r1/k1", []byte("bad"), nil}, 428, "fence_required"},
		{apiCase{"PUT fence_required on a new resource", "PUT", "/v1/kv/r3/k", []byte("bad"), nil}, 428, "fence_required"},
		{apiCase{"PUT fence_required with an empty header", "PUT", "/v1/kv/r1/absent", []byte("bad"), apiHdr("Fencing-Token", "")}, 428, "fence_required"},
		{apiCase{"PUT bad_request key", "PUT", "/v1/kv/r1/k1/", []byte("bad"), apiTok(cur1)}, 400, "bad_request"},
		{apiCase{"PUT bad_request If-Match", "PUT", "/v1/kv/r1/k1", []byte("bad"), apiTok(cur1, "If-Match", "W/"+apiETag(rev1))}, 400, "bad_request"},
		{apiCase{"PUT bad_request If-Match and If-None-Match", "PUT", "/v1/kv/r1/k1", []byte("bad"), apiTok(cur1, "If-Match", apiETag(rev1), "If-None-Match", "*")}, 400, "bad_request"},
		{apiCase{"PUT too_large", "PUT", "/v1/kv/r1/k1", big, apiTok(cur1)}, 413, "too_large"},
		{apiCase{"PUT too_large on an absent key", "PUT", "/v1/kv/r1/absent", big, apiTok(cur1)}, 413, "too_large"},

		{apiCase{"DELETE fenced", "DELETE", "/v1/kv/r1/k1", nil, apiTok(stale1)}, 409, "fenced"},
		{apiCase{"DELETE token_not_issued", "DELETE", "/v1/kv/r1/k1", nil, apiTok(cur1 + 1)}, 409, "token_not_issued"},
		{apiCase{"DELETE precondition_failed", "DELETE", "/v1/kv/r1/k1", nil, apiTok(cur1, "If-Match", apiETag(rev1+1000))}, 412, "precondition_failed"},
		{apiCase{"DELETE not_found", "DELETE", "/v1/kv/r1/absent", nil, apiTok(cur1)}, 404, "not_found"},
		{apiCase{"DELETE invalid_token", "DELETE", "/v1/kv/r1/k1", nil, apiHdr("Fencing-Token", "0")}, 400, "invalid_token"},
		{apiCase{"DELETE fence_required", "DELETE", "/v1/kv/r1/k1", nil, nil}, 428, "fence_required"},
		{apiCase{"DELETE bad_request", "DELETE", "/v1/kv/r1/k1/..", nil, apiTok(cur1)}, 400, "bad_request"},

		{apiCase{"POST fences fenced", "POST", "/v1/fences/r1", nil, apiTok(stale1)}, 409, "fenced"},
		{apiCase{"POST fences token_not_issued", "POST", "/v1/fences/r1", nil, apiTok(cur1 + 1)}, 409, "token_not_issued"},
		{apiCase{"POST fences token_not_issued on a resource never granted", "POST", "/v1/fences/virgin", nil, apiTok(1)}, 409, "token_not_issued"},
		{apiCase{"POST fences invalid_token", "POST", "/v1/fences/r1", nil, apiHdr("Fencing-Token", "+5")}, 400, "invalid_token"},
		{apiCase{"POST fences fence_required", "POST", "/v1/fences/r1", nil, nil}, 428, "fence_required"},
		{apiCase{"POST fences bad_request", "POST", "/v1/fences/r%ff", nil, apiTok(cur1)}, 400, "bad_request"},

		{apiCase{"txn fenced", "POST", "/v1/txn", txnBoth(u(stale1), u(cur2)), nil}, 409, "fenced"},
		{apiCase{"txn fenced by an entry without ops", "POST", "/v1/txn",
			fmt.Appendf(nil, `{"fences":{"r1":%d,"r2":%d},"then":[{"op":"put","resource":"r2","key":"k1","value":"bad"}]}`, stale1, cur2), nil}, 409, "fenced"},
		{apiCase{"txn token_not_issued", "POST", "/v1/txn", txnBoth(u(cur1), u(cur2+1)), nil}, 409, "token_not_issued"},
		{apiCase{"txn token_not_issued on a resource never granted", "POST", "/v1/txn",
			fmt.Appendf(nil, `{"fences":{"r2":%d,"virgin":1},"then":[{"op":"put","resource":"virgin","key":"k","value":"bad"}]}`, cur2), nil}, 409, "token_not_issued"},
		{apiCase{"txn precondition_failed", "POST", "/v1/txn",
			fmt.Appendf(nil, `{"fences":{"r1":%d,"r2":%d},"if":[{"resource":"r1","key":"k1","revision":%d}],"then":[{"op":"put","resource":"r1","key":"k1","value":"bad"},{"op":"put","resource":"r2","key":"k1","value":"bad"}]}`, cur1, cur2, rev1+1000), nil},
			412, "precondition_failed"},
		{apiCase{"txn precondition_failed revision 0 of a present key", "POST", "/v1/txn",
			fmt.Appendf(nil, `{"fences":{"r1":%d,"r2":%d},"if":[{"resource":"r2","key":"k1","revision":0}],"then":[{"op":"put","resource":"r1","key":"k2","value":"bad"}]}`, cur1, cur2), nil},
			412, "precondition_failed"},
		{apiCase{"txn invalid_token", "POST", "/v1/txn", txnBoth(u(cur1), `"5"`), nil}, 400, "invalid_token"},
		{apiCase{"txn fence_required", "POST", "/v1/txn",
			fmt.Appendf(nil, `{"fences":{"r1":%d},"then":[{"op":"put","resource":"r1","key":"k1","value":"bad"},{"op":"put","resource":"r2","key":"k1","value":"bad"}]}`, cur1), nil},
			428, "fence_required"},
		{apiCase{"txn bad_request unknown member", "POST", "/v1/txn", []byte(`{"x":1,` + string(txnBoth(u(cur1), u(cur2))[1:])), nil}, 400, "bad_request"},
		{apiCase{"txn bad_request key", "POST", "/v1/txn",
			fmt.Appendf(nil, `{"fences":{"r1":%d},"then":[{"op":"put","resource":"r1","key":"k1","value":"bad"},{"op":"delete","resource":"r1","key":"./k2"}]}`, cur1), nil},
			400, "bad_request"},
		{apiCase{"txn bad_request trailing garbage", "POST", "/v1/txn", append(txnBoth(u(cur1), u(cur2)), " {}"...), nil}, 400, "bad_request"},
		{apiCase{"txn too_large", "POST", "/v1/txn",
			fmt.Appendf(nil, `{"fences":{"r1":%d,"r2":%d},"then":[{"op":"put","resource":"r2","key":"k1","value":"bad"},{"op":"put","resource":"r1","key":"k1","value":"%s"}]}`, cur1, cur2, big), nil},
			413, "too_large"},

		{apiCase{"acquire lock_held", "POST", "/v1/locks/r1/acquire", []byte(`{"holder":"intruder"}`), nil}, 409, "lock_held"},
		{apiCase{"acquire bad_request", "POST", "/v1/locks/r1/acquire", []byte(`{"holder":"intruder","ttl_ms":9}`), nil}, 400, "bad_request"},
		{apiCase{"renew lease_lost", "POST", "/v1/locks/r1/renew", fmt.Appendf(nil, `{"token":%d,"ttl_ms":1000}`, stale1), nil}, 409, "lease_lost"},
		{apiCase{"release lease_lost", "POST", "/v1/locks/r1/release", fmt.Appendf(nil, `{"token":%d}`, stale1), nil}, 409, "lease_lost"},
		{apiCase{"release invalid_token", "POST", "/v1/locks/r1/release", []byte(`{"token":"` + u(cur1) + `"}`), nil}, 400, "invalid_token"},
		{apiCase{"renew bad_request", "POST", "/v1/locks/r1/renew", fmt.Appendf(nil, `{"token":%d,"ttl_ms":86400001}`, cur1), nil}, 400, "bad_request"},
	}

	rev := apiPut(t, url, "probe", "p", []byte("0"), apiTok(probe))
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := apiSnapshot(t, url, resources, keys)
			r := c.do(t, url)
			if r.status != c.status || !bytes.Contains(r.body, []byte(`"code":"`+c.code+`"`)) {
				t.Errorf("%s, want %d %s", r, c.status, c.code)
			}
			after := apiSnapshot(t, url, resources, keys)
			for _, k := range slices.Sorted(maps.Keys(before)) {
				if before[k] != after[k] {
					t.Errorf("%s changed:\nbefore: %s\nafter:  %s", k, before[k], after[k])
				}
			}
			// The next accepted write gets the next revision: the rejected
			// request used none.
			next := apiPut(t, url, "probe", "p", []byte(strconv.Itoa(i+1)), apiTok(probe))
			if next != rev+1 {
				t.Errorf("the next write got revision %d, want %d: the rejected request changed the revision", next, rev+1)
			}
			rev = next
		})
	}
}

// testAPIRouting checks the problems for an unknown path and a wrong method.
func testAPIRouting(t *testing.T, newService newServiceFunc) {
	url, _ := newService(t)
	for _, p := range []string{"/", "/v2/kv/a/b", "/v1", "/v1/kv/a", "/v1/locks/a/steal", "/v1/locks/a/b/c", "/v1/fences/a/b", "/v1/txn/x", "/v1/nothing/a", "/healthz/x"} {
		t.Run("404 for "+p, func(t *testing.T) {
			apiProblem(t, apiDo(t, "GET", url+p, nil, nil), 404, "", nil)
		})
	}
	for _, c := range []struct {
		method, path string
		allow        []string
	}{
		{"PATCH", "/v1/kv/a/b", []string{"GET", "PUT", "DELETE"}},
		{"POST", "/v1/kv/a/b", []string{"GET", "PUT", "DELETE"}},
		{"GET", "/v1/txn", []string{"POST"}},
		{"PUT", "/v1/txn", []string{"POST"}},
		{"PUT", "/v1/locks/a", []string{"GET"}},
		{"GET", "/v1/locks/a/acquire", []string{"POST"}},
		{"DELETE", "/v1/locks/a/renew", []string{"POST"}},
		{"GET", "/v1/locks/a/release", []string{"POST"}},
		{"DELETE", "/v1/fences/a", []string{"GET", "POST"}},
		{"POST", "/healthz", []string{"GET"}},
		{"POST", "/readyz", []string{"GET"}},
		{"DELETE", "/metrics", []string{"GET"}},
	} {
		t.Run("405 for "+c.method+" "+c.path, func(t *testing.T) {
			r := apiDo(t, c.method, url+c.path, nil, nil)
			apiProblem(t, r, 405, "", nil)
			var allow []string
			for _, v := range r.header.Values("Allow") {
				for m := range strings.SplitSeq(v, ",") {
					allow = append(allow, strings.TrimSpace(m))
				}
			}
			for _, m := range c.allow {
				if !slices.Contains(allow, m) {
					t.Errorf("Allow %q lacks %s", allow, m)
				}
			}
			if slices.Contains(allow, c.method) {
				t.Errorf("Allow %q contains the refused %s", allow, c.method)
			}
		})
	}
}

// testAPIValueLimits checks the value limit of 1 MiB on PUT and in a txn.
func testAPIValueLimits(t *testing.T, newService newServiceFunc) {
	url, _ := newService(t)
	tok := apiAcquire(t, url, "big", "B", 60000)
	value := make([]byte, apiMiB)
	for i := range value {
		value[i] = byte(i*7 + i>>8)
	}

	var rev uint64
	t.Run("PUT of exactly 1 MiB is accepted and read back", func(t *testing.T) {
		rev = apiPut(t, url, "big", "v", value, apiTok(tok))
		apiGetKV(t, url, "big", "v", value, rev, tok)
	})
	t.Run("PUT of 1 MiB + 1 is too_large", func(t *testing.T) {
		r := apiDo(t, "PUT", url+"/v1/kv/big/v", append(value[:apiMiB:apiMiB], 'x'), apiTok(tok))
		apiProblem(t, r, 413, "too_large", nil)
		r = apiSend(t, "PUT", url+"/v1/kv/big/v", io.MultiReader(bytes.NewReader(value), strings.NewReader("x")), apiTok(tok))
		apiProblem(t, r, 413, "too_large", nil)
		apiGetKV(t, url, "big", "v", value, rev, tok)
	})
	t.Run("txn value of exactly 1 MiB is accepted", func(t *testing.T) {
		body := fmt.Appendf(nil, `{"fences":{"big":%d},"then":[{"op":"put","resource":"big","key":"b64","value_base64":%q},{"op":"put","resource":"big","key":"str","value":"%s"}]}`,
			tok, base64.StdEncoding.EncodeToString(value), strings.Repeat("s", apiMiB))
		apiOK(t, apiDo(t, "POST", url+"/v1/txn", body, nil), map[string]any{"revision": rev + 1})
		rev++
		apiGetKV(t, url, "big", "b64", value, rev, tok)
		apiGetKV(t, url, "big", "str", bytes.Repeat([]byte("s"), apiMiB), rev, tok)
	})
	t.Run("txn value of 1 MiB + 1 is too_large", func(t *testing.T) {
		for name, op := range map[string]string{
			"value":        `"value":"` + strings.Repeat("s", apiMiB+1) + `"`,
			"value_base64": `"value_base64":"` + base64.StdEncoding.EncodeToString(append(value[:apiMiB:apiMiB], 'x')) + `"`,
		} {
			t.Run(name, func(t *testing.T) {
				body := fmt.Appendf(nil, `{"fences":{"big":%d},"then":[{"op":"put","resource":"big","key":"v",%s}]}`, tok, op)
				apiProblem(t, apiDo(t, "POST", url+"/v1/txn", body, nil), 413, "too_large", nil)
			})
		}
		apiGetKV(t, url, "big", "v", value, rev-1, tok)
	})
}

// testAPIList checks GET /v1/locks: held locks only, in byte order, with
// holder, token, expiry and waiters; prefix, pages and their bounds.
func testAPIList(t *testing.T, newService newServiceFunc) {
	url, _ := newService(t)
	get := func(query string) (locks []map[string]any, next string) {
		t.Helper()
		r := apiDo(t, "GET", url+"/v1/locks"+query, nil, nil)
		var body struct {
			Locks []map[string]any `json:"locks"`
			Next  string           `json:"next"`
		}
		dec := json.NewDecoder(bytes.NewReader(r.body))
		dec.UseNumber()
		if r.status != 200 || dec.Decode(&body) != nil || body.Locks == nil {
			t.Fatalf("GET /v1/locks%s: %s", query, r)
		}
		return body.Locks, body.Next
	}
	if locks, next := get(""); len(locks) != 0 || next != "" {
		t.Fatalf("an empty service lists %v, next %q", locks, next)
	}
	tokens := map[string]uint64{}
	for _, res := range []string{"jobs/b", "jobs/a", "orders", "jobs/c"} {
		tokens[res] = apiAcquire(t, url, strings.ReplaceAll(res, "/", "%2F"), "h-"+res, 60000)
	}
	released := apiAcquire(t, url, "jobs%2Fgone", "x", 60000)
	if r := apiDo(t, "POST", url+"/v1/locks/jobs%2Fgone/release", fmt.Appendf(nil, `{"token":%d}`, released), nil); r.status != 200 {
		t.Fatal(r)
	}
	// A waiter on jobs/a.
	waitDone := make(chan struct{})
	go func() {
		defer close(waitDone)
		apiDo(t, "POST", url+"/v1/locks/jobs%2Fa/acquire", []byte(`{"holder":"w","ttl_ms":1000,"wait_ms":3000}`), nil)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		locks, _ := get("?prefix=jobs%2Fa")
		if len(locks) == 1 && locks[0]["waiters"] == json.Number("1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter never showed: %v", locks)
		}
		time.Sleep(10 * time.Millisecond)
	}
	locks, next := get("?prefix=jobs%2F")
	var names []string
	for _, l := range locks {
		names = append(names, l["resource"].(string))
	}
	if strings.Join(names, ",") != "jobs/a,jobs/b,jobs/c" || next != "" {
		t.Fatalf("prefix jobs/: %v, next %q; want jobs/a,jobs/b,jobs/c in order, released ones out", names, next)
	}
	apiMembers(t, "lock", locks[1], map[string]any{"resource": "jobs/b", "holder": "h-jobs/b", "token": tokens["jobs/b"],
		"expires_at": apiExpiresIn(time.Minute), "waiters": 0})
	// Pages.
	page, next := get("?limit=2")
	if len(page) != 2 || page[0]["resource"] != "jobs/a" || page[1]["resource"] != "jobs/b" || next != "jobs/b" {
		t.Fatalf("limit=2: %v, next %q", page, next)
	}
	page, next = get("?limit=2&after=" + next)
	if len(page) != 2 || page[0]["resource"] != "jobs/c" || page[1]["resource"] != "orders" || next != "" {
		t.Fatalf("second page: %v, next %q", page, next)
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?limit=x", "?nope=1", "?prefix=%00", "?after=%7F"} {
		apiProblem(t, apiDo(t, "GET", url+"/v1/locks"+q, nil, nil), 400, "bad_request", nil)
	}
	<-waitDone
}
