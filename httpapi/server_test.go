package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/fake"
	"github.com/fence-lock/fence/wire"
	"github.com/prometheus/client_golang/prometheus"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// lines returns the log lines decoded, those with msg only if msg != "".
func (b *syncBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(b.b.Bytes()), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("log line %s: %v", l, err)
		}
		if msg == "" || m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func (b *syncBuffer) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.Reset()
}

// env is a Handler over a fake, behind an httptest.Server.
type env struct {
	t    *testing.T
	f    *fake.Service
	srv  *Handler
	ts   *httptest.Server
	logs *syncBuffer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	f := fake.New()
	e := &env{t: t, f: f, srv: NewHandler(f, f), logs: &syncBuffer{}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(Metrics()...)
	e.srv.Gatherer = reg
	e.srv.Logger = slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.ts = httptest.NewServer(e.srv)
	t.Cleanup(e.ts.Close)
	return e
}

// response is an answer read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a map, numbers as json.Number.
func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

// problem checks that r is a problem with status and code, and returns it.
func (r response) problem(t *testing.T, status int, code string) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("Status=%d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type=%q, want application/problem+json", ct)
	}
	p := r.json(t)
	if p["code"] != code {
		t.Fatalf("code=%v, want %s; body %s", p["code"], code, r.body)
	}
	if p["status"] != json.Number(strconv.Itoa(status)) {
		t.Fatalf("status member=%v, want %d", p["status"], status)
	}
	if p["type"] != wire.ProblemTypeBase+code || p["title"] == "" || p["detail"] == "" {
		t.Fatalf("problem %s lacks type, title or detail", r.body)
	}
	return p
}

// ok checks that r is 200 application/json and returns its body.
func (r response) ok(t *testing.T) map[string]any {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("Status=%d, want 200; body %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type=%q, want application/json", ct)
	}
	return r.json(t)
}

// do sends a request; headers are name, value pairs.
func (e *env) do(method, path, body string, headers ...string) response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.ts.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	return e.send(req)
}

func (e *env) send(req *http.Request) response {
	e.t.Helper()
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

// acquire acquires resource for holder and returns the token.
func (e *env) acquire(resource, holder string) fence.Token {
	e.t.Helper()
	b := e.do("POST", "/v1/locks/"+resource+"/acquire", `{"holder":"`+holder+`"}`).ok(e.t)
	n, err := strconv.ParseUint(string(b["token"].(json.Number)), 10, 64)
	if err != nil {
		e.t.Fatal(err)
	}
	return fence.Token(n)
}

func num(n uint64) json.Number { return json.Number(strconv.FormatUint(n, 10)) }

// checkBody compares a decoded body with want, member by member, and checks
// that it has no other members.
func checkBody(t *testing.T, got map[string]any, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(v) {
			t.Errorf("%s=%v, want %v", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected member %s=%v", k, got[k])
		}
	}
}

func TestHandler_Health(t *testing.T) {
	e := newEnv(t)
	t.Run("Healthz", func(t *testing.T) {
		checkBody(t, e.do("GET", "/healthz", "").ok(t), map[string]any{"status": "ok"})
	})
	t.Run("Readyz", func(t *testing.T) {
		checkBody(t, e.do("GET", "/readyz", "").ok(t), map[string]any{"status": "ok"})
	})
	t.Run("NotReady", func(t *testing.T) {
		e.srv.Ready = func() error { return errors.New("store is opening") }
		defer func() { e.srv.Ready = nil }()
		p := e.do("GET", "/readyz", "").problem(t, 503, "not_ready")
		if !strings.Contains(p["detail"].(string), "store is opening") {
			t.Fatalf("detail=%v", p["detail"])
		}
	})
	t.Run("Head", func(t *testing.T) {
		r := e.do("HEAD", "/healthz", "")
		if r.status != 200 || len(r.body) != 0 {
			t.Fatalf("HEAD: %d %q", r.status, r.body)
		}
	})
	t.Run("Metrics", func(t *testing.T) {
		r := e.do("GET", "/metrics", "")
		if r.status != 200 {
			t.Fatalf("Status=%d", r.status)
		}
		for _, want := range []string{
			`fence_storage_rejections_total{reason="token_not_issued"}`,
			`fence_storage_writes_total{op="claim"}`,
			`fence_http_request_duration_seconds_bucket{code="200",method="GET",route="/healthz"`,
		} {
			if !bytes.Contains(r.body, []byte(want)) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
}

func TestHandler_Lock(t *testing.T) {
	e := newEnv(t)
	t.Run("Acquire", func(t *testing.T) {
		b := e.do("POST", "/v1/locks/orders%2F17/acquire", `{"holder":"worker-a","ttl_ms":1500}`).ok(t)
		checkBody(t, b, map[string]any{
			"resource": "orders/17", "holder": "worker-a", "token": 1, "ttl_ms": 1500,
			"expires_at": "2025-01-02T02:04:07.1Z",
		})
		if _, err := time.Parse(time.RFC3339, b["expires_at"].(string)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("SameHolderRetry", func(t *testing.T) {
		b := e.do("POST", "/v1/locks/orders%2F17/acquire", `{"holder":"worker-a"}`).ok(t)
		checkBody(t, b, map[string]any{
			"resource": "orders/17", "holder": "worker-a", "token": 1, "ttl_ms": 10000,
			"expires_at": "2025-01-02T02:04:15.6Z",
		})
	})
	t.Run("ErrLockHeld", func(t *testing.T) {
		r := e.do("POST", "/v1/locks/orders%2F17/acquire", `{"holder":"worker-b"}`)
		p := r.problem(t, 409, "lock_held")
		checkBody(t, p, map[string]any{
			"type": wire.ProblemTypeBase + "lock_held", "title": "Lock held", "status": 409, "code": "lock_held",
			"detail": p["detail"], "resource": "orders/17", "retry_after_ms": 10000,
		})
		if got := r.header.Get("Retry-After"); got != "10" {
			t.Fatalf("Retry-After=%q, want 10", got)
		}
	})
	t.Run("Status", func(t *testing.T) {
		checkBody(t, e.do("GET", "/v1/locks/orders%2F17", "").ok(t), map[string]any{
			"resource": "orders/17", "held": true, "holder": "worker-a", "token": 1,
			"expires_at": "2025-01-02T02:04:15.6Z", "last_token": 1,
		})
	})
	t.Run("StatusUnknown", func(t *testing.T) {
		checkBody(t, e.do("GET", "/v1/locks/nobody", "").ok(t), map[string]any{
			"resource": "nobody", "held": false, "last_token": 0,
		})
	})
	t.Run("Renew", func(t *testing.T) {
		checkBody(t, e.do("POST", "/v1/locks/orders%2F17/renew", `{"token":1,"ttl_ms":20000}`).ok(t), map[string]any{
			"resource": "orders/17", "holder": "worker-a", "token": 1, "ttl_ms": 20000,
			"expires_at": "2025-01-02T02:04:25.6Z",
		})
		checkBody(t, e.do("POST", "/v1/locks/orders%2F17/renew", `{"token":1}`).ok(t), map[string]any{
			"resource": "orders/17", "holder": "worker-a", "token": 1, "ttl_ms": 20000,
			"expires_at": "2025-01-02T02:04:25.6Z",
		})
	})
	t.Run("ErrLeaseLost", func(t *testing.T) {
		p := e.do("POST", "/v1/locks/orders%2F17/renew", `{"token":7}`).problem(t, 409, "lease_lost")
		checkBody(t, p, map[string]any{
			"type": p["type"], "title": p["title"], "status": 409, "code": "lease_lost", "detail": p["detail"],
			"resource": "orders/17", "presented": 7, "current": 1,
		})
		p = e.do("POST", "/v1/locks/free/release", `{"token":7}`).problem(t, 409, "lease_lost")
		if p["current"] != json.Number("0") {
			t.Fatalf("current=%v, want 0", p["current"])
		}
	})
	t.Run("Release", func(t *testing.T) {
		checkBody(t, e.do("POST", "/v1/locks/orders%2F17/release", `{"token":1}`).ok(t), map[string]any{
			"resource": "orders/17", "released": true,
		})
		checkBody(t, e.do("GET", "/v1/locks/orders%2F17", "").ok(t), map[string]any{
			"resource": "orders/17", "held": false, "last_token": 1,
		})
	})
	t.Run("BadRequest", func(t *testing.T) {
		for _, tt := range []struct{ path, body, code string }{
			{"/v1/locks/r/acquire", `{"holder":"w","ttl_ms":5}`, "bad_request"},
			{"/v1/locks/r/acquire", `{"holder":"w","Wait_ms":5}`, "bad_request"},
			{"/v1/locks/r/acquire", ``, "bad_request"},
			{"/v1/locks/%00/acquire", `{"holder":"w"}`, "bad_request"},
			{"/v1/locks/r/renew", `{"token":"1"}`, "invalid_token"},
			{"/v1/locks/r/renew", `{}`, "bad_request"},
			{"/v1/locks/r/release", `{"token":1.0}`, "invalid_token"},
			{"/v1/locks/r/release", `{"token":1}{"token":2}`, "bad_request"},
		} {
			e.do("POST", tt.path, tt.body).problem(t, 400, tt.code)
		}
	})
}

func TestHandler_Revoke(t *testing.T) {
	e := newEnv(t)
	tok := e.acquire("orders%2F17", "worker-a")
	t.Run("OK", func(t *testing.T) {
		checkBody(t, e.do("POST", "/v1/locks/orders%2F17/revoke", "").ok(t), map[string]any{
			"resource": "orders/17", "revoked_token": tok, "last_fence": tok + 1,
		})
		checkBody(t, e.do("GET", "/v1/locks/orders%2F17", "").ok(t), map[string]any{
			"resource": "orders/17", "held": false, "last_token": tok + 1,
		})
		checkBody(t, e.do("GET", "/v1/fences/orders%2F17", "").ok(t), map[string]any{
			"resource": "orders/17", "last_fence": tok + 1,
		})
		p := e.do("POST", "/v1/locks/orders%2F17/renew", `{"token":`+tok.String()+`}`).problem(t, 409, "lease_lost")
		if p["current"] != json.Number("0") {
			t.Fatalf("current=%v, want 0", p["current"])
		}
	})
	t.Run("Free", func(t *testing.T) {
		checkBody(t, e.do("POST", "/v1/locks/free/revoke", "{}").ok(t), map[string]any{
			"resource": "free", "revoked_token": 0, "last_fence": 1,
		})
	})
	t.Run("BadRequest", func(t *testing.T) {
		before := e.f.Calls("Revoke")
		for _, tt := range []struct{ path, body string }{
			{"/v1/locks/%00/revoke", ""},
			{"/v1/locks//revoke", ""},
			{"/v1/locks/" + strings.Repeat("a", 513) + "/revoke", ""},
			{"/v1/locks/r/revoke", `{"token":1}`},
			{"/v1/locks/r/revoke", `[]`},
			{"/v1/locks/r/revoke", `{}{}`},
		} {
			e.do("POST", tt.path, tt.body).problem(t, 400, "bad_request")
		}
		if n := e.f.Calls("Revoke") - before; n != 0 {
			t.Fatalf("%d Revoke calls for bad requests, want 0", n)
		}
	})
	t.Run("MethodNotAllowed", func(t *testing.T) {
		r := e.do("GET", "/v1/locks/r/revoke", "")
		r.problem(t, 405, "method_not_allowed")
		if got := r.header.Get("Allow"); got != "POST" {
			t.Fatalf("Allow=%q, want POST", got)
		}
	})
	t.Run("NotARevoker", func(t *testing.T) {
		f := fake.New()
		ts := httptest.NewServer(NewHandler(struct{ fence.Locker }{f}, f))
		t.Cleanup(ts.Close)
		resp, err := ts.Client().Post(ts.URL+"/v1/locks/r/revoke", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Fatalf("Status=%d, want 404", resp.StatusCode)
		}
	})
}

func TestHandler_KV(t *testing.T) {
	e := newEnv(t)
	tok := e.acquire("orders%2F17", "worker-a")
	ft := "Fencing-Token"
	t.Run("Put", func(t *testing.T) {
		checkBody(t, e.do("PUT", "/v1/kv/orders%2F17/o-1/line%2F2", "paid", ft, tok.String()).ok(t), map[string]any{
			"resource": "orders/17", "key": "o-1/line/2", "revision": 1, "fence": 1,
		})
	})
	t.Run("Get", func(t *testing.T) {
		r := e.do("GET", "/v1/kv/orders%2F17/o-1/line/2", "")
		if r.status != 200 || string(r.body) != "paid" {
			t.Fatalf("GET: %d %q", r.status, r.body)
		}
		for k, want := range map[string]string{"Content-Type": "application/octet-stream", "ETag": `"1"`, "Fencing-Token": "1", "Content-Length": "4"} {
			if got := r.header.Get(k); got != want {
				t.Errorf("%s=%q, want %q", k, got, want)
			}
		}
	})
	t.Run("BinaryAndEmpty", func(t *testing.T) {
		for _, v := range []string{"\x00\xff\n", ""} {
			e.do("PUT", "/v1/kv/orders%2F17/bin", v, ft, "1").ok(t)
			if r := e.do("GET", "/v1/kv/orders%2F17/bin", ""); r.status != 200 || string(r.body) != v {
				t.Fatalf("GET: %d %q, want %q", r.status, r.body, v)
			}
		}
	})
	t.Run("IfMatch", func(t *testing.T) {
		e.do("PUT", "/v1/kv/orders%2F17/o-1/line/2", "x", ft, "1", "If-Match", `"99"`).problem(t, 412, "precondition_failed")
		checkBody(t, e.do("PUT", "/v1/kv/orders%2F17/o-1/line/2", "shipped", ft, "1", "If-Match", `"1"`).ok(t), map[string]any{
			"resource": "orders/17", "key": "o-1/line/2", "revision": 4, "fence": 1,
		})
		e.do("PUT", "/v1/kv/orders%2F17/new", "x", ft, "1", "If-Match", `*`).problem(t, 412, "precondition_failed")
	})
	t.Run("IfNoneMatch", func(t *testing.T) {
		e.do("PUT", "/v1/kv/orders%2F17/o-1/line/2", "x", ft, "1", "If-None-Match", `*`).problem(t, 412, "precondition_failed")
		e.do("PUT", "/v1/kv/orders%2F17/new", "x", ft, "1", "If-None-Match", `*`).ok(t)
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		p := e.do("GET", "/v1/kv/orders%2F17/missing", "").problem(t, 404, "not_found")
		checkBody(t, p, map[string]any{"type": p["type"], "title": p["title"], "status": 404, "detail": p["detail"], "code": "not_found"})
		e.do("DELETE", "/v1/kv/orders%2F17/missing", "", ft, "1").problem(t, 404, "not_found")
	})
	t.Run("Delete", func(t *testing.T) {
		checkBody(t, e.do("DELETE", "/v1/kv/orders%2F17/new", "", ft, "1").ok(t), map[string]any{
			"resource": "orders/17", "key": "new", "revision": 6,
		})
		e.do("GET", "/v1/kv/orders%2F17/new", "").problem(t, 404, "not_found")
	})
	t.Run("ErrTokenNotIssued", func(t *testing.T) {
		p := e.do("PUT", "/v1/kv/orders%2F17/k", "x", ft, "9223372036854775807").problem(t, 409, "token_not_issued")
		checkBody(t, p, map[string]any{
			"type": p["type"], "title": p["title"], "status": 409, "detail": p["detail"], "code": "token_not_issued",
			"resource": "orders/17", "presented": "9223372036854775807", "last_token": 1,
		})
	})
	t.Run("ErrFenced", func(t *testing.T) {
		e.f.Expire("orders/17")
		if got := e.acquire("orders%2F17", "worker-b"); got != 2 {
			t.Fatalf("Token=%d, want 2", got)
		}
		p := e.do("PUT", "/v1/kv/orders%2F17/o-1/line/2", "zombie", ft, "1").problem(t, 409, "fenced")
		checkBody(t, p, map[string]any{
			"type": p["type"], "title": p["title"], "status": 409, "detail": p["detail"], "code": "fenced",
			"resource": "orders/17", "presented": 1, "last_fence": 2,
		})
		e.do("DELETE", "/v1/kv/orders%2F17/o-1/line/2", "", ft, "1").problem(t, 409, "fenced")
		if r := e.do("GET", "/v1/kv/orders%2F17/o-1/line/2", ""); string(r.body) != "shipped" {
			t.Fatalf("value=%q after a fenced write, want shipped", r.body)
		}
	})
	t.Run("Head", func(t *testing.T) {
		r := e.do("HEAD", "/v1/kv/orders%2F17/o-1/line/2", "")
		if r.status != 200 || r.header.Get("ETag") != `"4"` || len(r.body) != 0 {
			t.Fatalf("HEAD: %d %v %q", r.status, r.header, r.body)
		}
	})
}

func TestHandler_Fences(t *testing.T) {
	e := newEnv(t)
	t.Run("Unknown", func(t *testing.T) {
		checkBody(t, e.do("GET", "/v1/fences/a%2Fb", "").ok(t), map[string]any{"resource": "a/b", "last_fence": 0})
	})
	e.acquire("a%2Fb", "w")
	e.f.Expire("a/b")
	e.acquire("a%2Fb", "w")
	e.f.SetLastFence("a/b", 1) // as if the store had missed the second grant
	t.Run("Claim", func(t *testing.T) {
		checkBody(t, e.do("POST", "/v1/fences/a%2Fb", "", "Fencing-Token", "2").ok(t), map[string]any{"resource": "a/b", "last_fence": 2})
		checkBody(t, e.do("GET", "/v1/fences/a%2Fb", "").ok(t), map[string]any{"resource": "a/b", "last_fence": 2})
	})
	t.Run("Errors", func(t *testing.T) {
		e.do("POST", "/v1/fences/a%2Fb", "", "Fencing-Token", "1").problem(t, 409, "fenced")
		e.do("POST", "/v1/fences/a%2Fb", "", "Fencing-Token", "3").problem(t, 409, "token_not_issued")
		e.do("POST", "/v1/fences/a%2Fb", "").problem(t, 428, "fence_required")
		e.do("POST", "/v1/fences/a%2Fb", "", "Fencing-Token", "0").problem(t, 400, "invalid_token")
	})
}

func TestHandler_Txn(t *testing.T) {
	e := newEnv(t)
	o, s := e.acquire("orders", "w"), e.acquire("stock", "w")
	e.do("PUT", "/v1/kv/stock/hold-9", "1", "Fencing-Token", s.String()).ok(t)
	body := fmt.Sprintf(`{"fences": {"orders": %d, "stock": %d},
		"if":   [{"resource": "orders", "key": "o-1", "revision": 0}],
		"then": [{"op": "put", "resource": "orders", "key": "o-1", "value": "paid"},
		         {"op": "put", "resource": "orders", "key": "o-2", "value_base64": "AP8="},
		         {"op": "delete", "resource": "stock", "key": "hold-9"}]}`, o, s)
	t.Run("OK", func(t *testing.T) {
		checkBody(t, e.do("POST", "/v1/txn", body).ok(t), map[string]any{"revision": 2})
		if r := e.do("GET", "/v1/kv/orders/o-2", ""); r.status != 200 || string(r.body) != "\x00\xff" || r.header.Get("ETag") != `"2"` {
			t.Fatalf("GET o-2: %d %q %v", r.status, r.body, r.header)
		}
	})
	t.Run("ErrPreconditionFailed", func(t *testing.T) {
		e.do("POST", "/v1/txn", body).problem(t, 412, "precondition_failed")
	})
	t.Run("Empty", func(t *testing.T) {
		checkBody(t, e.do("POST", "/v1/txn", `{}`).ok(t), map[string]any{"revision": 2})
	})
	t.Run("ErrFenced", func(t *testing.T) {
		e.f.Expire("stock")
		e.acquire("stock", "x")
		p := e.do("POST", "/v1/txn", fmt.Sprintf(`{"fences":{"orders":%d,"stock":%d}}`, o, s)).problem(t, 409, "fenced")
		if p["resource"] != "stock" || p["presented"] != num(uint64(s)) || p["last_fence"] != json.Number("2") {
			t.Fatalf("problem %v", p)
		}
	})
	t.Run("ErrFenceRequired", func(t *testing.T) {
		e.do("POST", "/v1/txn", `{"fences":{"orders":1},"then":[{"op":"delete","resource":"stock","key":"k"}]}`).problem(t, 428, "fence_required")
	})
	t.Run("ErrInvalidToken", func(t *testing.T) {
		e.do("POST", "/v1/txn", `{"fences":{"orders":"1"}}`).problem(t, 400, "invalid_token")
	})
	t.Run("ErrTooLarge", func(t *testing.T) {
		big := strings.Repeat("x", fence.MaxValueSize+1)
		e.do("POST", "/v1/txn", `{"fences":{"orders":1},"then":[{"op":"put","resource":"orders","key":"k","value":"`+big+`"}]}`).problem(t, 413, "too_large")
		e.do("POST", "/v1/txn", `{"x":"`+strings.Repeat("x", maxTxnBody)+`"}`).problem(t, 413, "too_large")
	})
}

func TestHandler_Routing(t *testing.T) {
	e := newEnv(t)
	t.Run("NotFound", func(t *testing.T) {
		for _, p := range []string{"/", "/v1", "/v1/fencesx", "/v1/kv/r", "/v2/txn", "/healthz/", "/v1/locks/r/steal", "/favicon.ico"} {
			e.do("GET", p, "").problem(t, 404, "not_found")
		}
	})
	t.Run("NoRedirect", func(t *testing.T) {
		// http.ServeMux would answer these with a redirect.
		e.do("GET", "/v1/kv/r/a//b", "").problem(t, 400, "bad_request")
		e.do("GET", "/v1/kv/r/a/../b", "").problem(t, 400, "bad_request")
		e.do("GET", "/v1/kv/r/./b", "").problem(t, 400, "bad_request")
		e.do("GET", "//v1/txn", "").problem(t, 404, "not_found")
		e.do("GET", "/v1/locks/..", "").ok(t) // ".." is a valid resource name
	})
	t.Run("MethodNotAllowed", func(t *testing.T) {
		for _, tt := range []struct{ method, path, allow string }{
			{"GET", "/v1/txn", "POST"},
			{"DELETE", "/v1/txn", "POST"},
			{"GET", "/v1/locks/r/acquire", "POST"},
			{"PUT", "/v1/locks/r", "GET, HEAD"},
			{"POST", "/v1/kv/r/k", "GET, HEAD, PUT, DELETE"},
			{"PATCH", "/v1/kv/r/k", "GET, HEAD, PUT, DELETE"},
			{"DELETE", "/v1/fences/r", "GET, HEAD, POST"},
			{"POST", "/healthz", "GET, HEAD"},
			{"OPTIONS", "/metrics", "GET, HEAD"},
		} {
			r := e.do(tt.method, tt.path, "")
			r.problem(t, 405, "method_not_allowed")
			if got := r.header.Get("Allow"); got != tt.allow {
				t.Errorf("%s %s: Allow=%q, want %q", tt.method, tt.path, got, tt.allow)
			}
		}
	})
	t.Run("MethodBeforeParams", func(t *testing.T) {
		e.do("POST", "/v1/kv/r/a//b", "").problem(t, 405, "method_not_allowed")
	})
	if n := e.f.Mutations(); n != 0 {
		t.Fatalf("%d mutating calls, want 0", n)
	}
}

// TestHandler_Precedence checks the API's order: too_large, bad_request,
// fence_required, invalid_token, then the store's answers.
func TestHandler_Precedence(t *testing.T) {
	e := newEnv(t)
	big := strings.Repeat("x", fence.MaxValueSize+1)
	tests := []struct {
		name    string
		method  string
		path    string
		body    string
		headers []string
		status  int
		code    string
	}{
		{"TooLargeBeforeInvalidToken", "PUT", "/v1/kv/r/k", big, []string{"Fencing-Token", "abc"}, 413, "too_large"},
		{"TooLargeBeforeBadName", "PUT", "/v1/kv/r/a//b", big, nil, 413, "too_large"},
		{"TooLargeBeforeBadIfMatch", "PUT", "/v1/kv/r/k", big, []string{"If-Match", "junk"}, 413, "too_large"},
		{"TooLargeAcquire", "POST", "/v1/locks/%00/acquire", `{"holder":"` + strings.Repeat("h", maxJSONBody) + `"}`, nil, 413, "too_large"},
		{"BadNameBeforeFenceRequired", "PUT", "/v1/kv/r/a//b", "v", nil, 400, "bad_request"},
		{"BadResourceBeforeFenceRequired", "DELETE", "/v1/kv/%00/k", "", nil, 400, "bad_request"},
		{"BadIfMatchBeforeFenceRequired", "PUT", "/v1/kv/r/k", "v", []string{"If-Match", "junk"}, 400, "bad_request"},
		{"BothCondsBeforeInvalidToken", "DELETE", "/v1/kv/r/k", "", []string{"If-Match", `"1"`, "If-None-Match", "*", "Fencing-Token", "x"}, 400, "bad_request"},
		{"BadNameBeforeInvalidToken", "POST", "/v1/fences/%7F", "", []string{"Fencing-Token", "-1"}, 400, "bad_request"},
		{"FenceRequiredBeforeInvalidToken", "PUT", "/v1/kv/r/k", "v", []string{"Fencing-Token", ""}, 428, "fence_required"},
		{"InvalidTokenBeforeStore", "PUT", "/v1/kv/r/k", "v", []string{"Fencing-Token", "0x10", "If-Match", `"5"`}, 400, "invalid_token"},
		{"TwoTokens", "PUT", "/v1/kv/r/k", "v", []string{"Fencing-Token", "1", "Fencing-Token", "1"}, 400, "invalid_token"},
		{"BadBodyBeforeInvalidToken", "POST", "/v1/locks/r/renew", `{"token":"x","ttl_ms":1}`, nil, 400, "bad_request"},
		{"BadPathBeforeBadBody", "POST", "/v1/locks/%00/release", `{"token":"x"}`, nil, 400, "bad_request"},
		{"TokenNotIssuedBeforePrecondition", "PUT", "/v1/kv/r/k", "v", []string{"Fencing-Token", "5", "If-Match", `"5"`}, 409, "token_not_issued"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := e.do(tt.method, tt.path, tt.body, tt.headers...).problem(t, tt.status, tt.code)
			if tt.status == 413 && len(p) == 0 {
				t.Fatal("empty problem")
			}
		})
	}
	if n := e.f.Calls("Put") + e.f.Calls("Delete") + e.f.Calls("Claim") + e.f.Calls("Acquire") + e.f.Calls("Renew") + e.f.Calls("Release"); n != 1 {
		t.Fatalf("%d mutating calls, want 1 (the token_not_issued put)", n)
	}
}

// TestHandler_RejectedNeverMutates sends requests that the server must reject
// before they reach a mutating method of the Locker or Store.
func TestHandler_RejectedNeverMutates(t *testing.T) {
	e := newEnv(t)
	badTok := []string{"abc", "-1", "0", "1.5", "+5", "0x10", "1e3", "9223372036854775808", "6ba7b810-9dad-11d1-80b4-00c04fd430c8"}
	type req struct {
		method, path, body string
		headers            []string
	}
	var reqs []req
	for _, tok := range badTok {
		reqs = append(reqs,
			req{"PUT", "/v1/kv/r/k", "v", []string{"Fencing-Token", tok}},
			req{"DELETE", "/v1/kv/r/k", "", []string{"Fencing-Token", tok}},
			req{"POST", "/v1/fences/r", "", []string{"Fencing-Token", tok}},
			req{"POST", "/v1/locks/r/renew", `{"token":"` + tok + `"}`, nil},
			req{"POST", "/v1/locks/r/release", `{"token":"` + tok + `"}`, nil},
			req{"POST", "/v1/txn", `{"fences":{"r":"` + tok + `"}}`, nil},
		)
	}
	reqs = append(reqs,
		req{"PUT", "/v1/kv/r/k", "v", nil},
		req{"DELETE", "/v1/kv/r/k", "", nil},
		req{"POST", "/v1/fences/r", "", nil},
		req{"PUT", "/v1/kv/r/k", "v", []string{"Fencing-Token", "1", "If-Match", "1"}},
		req{"PUT", "/v1/kv/r/k", "v", []string{"Fencing-Token", "1", "If-None-Match", `"1"`}},
		req{"POST", "/v1/locks/r/acquire", `{"holder":"w","ttl_ms":1}`, nil},
		req{"POST", "/v1/locks/r/acquire", `{"holder":"w","holder":"v"}`, nil},
		req{"POST", "/v1/locks/r/acquire", `{"holder":""}`, nil},
		req{"POST", "/v1/txn", `{"then":[{"op":"delete","resource":"r","key":"k"}]}`, nil},
		req{"POST", "/v1/txn", `{"fences":{"r":1},"then":[{"op":"put","resource":"r","key":"k","value":"v","value_base64":""}]}`, nil},
	)
	for _, r := range reqs {
		resp := e.do(r.method, r.path, r.body, r.headers...)
		if resp.status < 400 {
			t.Fatalf("%s %s %q %v: Status=%d", r.method, r.path, r.body, r.headers, resp.status)
		}
	}
	if n := e.f.Mutations(); n != 0 {
		t.Fatalf("%d mutating calls, want 0", n)
	}
}

// TestHandler_TooLargeBeforeReading sends a Content-Length over the limit and
// no body: the 413 must come back without the server waiting for the body.
func TestHandler_TooLargeBeforeReading(t *testing.T) {
	e := newEnv(t)
	for _, tt := range []struct{ method, path string }{
		{"PUT", "/v1/kv/r/k"},
		{"POST", "/v1/txn"},
		{"POST", "/v1/locks/r/acquire"},
	} {
		t.Run(tt.method+tt.path, func(t *testing.T) {
			conn, err := net.Dial("tcp", e.ts.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\nContent-Length: 20000000\r\n\r\nabc", tt.method, tt.path)
			start := time.Now()
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("413 took %s", d)
			}
			response{resp.StatusCode, resp.Header, b}.problem(t, 413, "too_large")
			if !resp.Close {
				t.Fatal("connection not closed after a 413 with an unread body")
			}
		})
	}
}

// TestHandler_TooLargeChunked sends a body without Content-Length.
func TestHandler_TooLargeChunked(t *testing.T) {
	e := newEnv(t)
	for _, n := range []int{fence.MaxValueSize, fence.MaxValueSize + 1} {
		pr, pw := io.Pipe()
		go func() {
			chunk := bytes.Repeat([]byte("x"), 4096)
			for left := n; left > 0; left -= len(chunk) {
				if _, err := pw.Write(chunk[:min(left, len(chunk))]); err != nil {
					return
				}
			}
			pw.Close()
		}()
		req, err := http.NewRequestWithContext(t.Context(), "PUT", e.ts.URL+"/v1/kv/r/k", pr)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Fencing-Token", "1")
		r := e.send(req)
		pr.CloseWithError(errors.New("done"))
		if n > fence.MaxValueSize {
			r.problem(t, 413, "too_large")
		} else {
			r.problem(t, 409, "token_not_issued") // read whole, then the store rejected the token
		}
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "1"}, {0, "1"}, {time.Nanosecond, "1"}, {time.Second, "1"},
		{time.Second + time.Nanosecond, "2"}, {1500 * time.Millisecond, "2"}, {2 * time.Second, "2"},
		{fence.MaxTTL, "86400"},
	} {
		if got := wire.RetryAfterHeader(tt.d); got != tt.want {
			t.Errorf("wire.RetryAfterHeader(%s)=%s, want %s", tt.d, got, tt.want)
		}
	}
	// Through the server: a lease with 2.5 s left.
	e := newEnv(t)
	e.do("POST", "/v1/locks/r/acquire", `{"holder":"a","ttl_ms":2500}`).ok(t)
	r := e.do("POST", "/v1/locks/r/acquire", `{"holder":"b"}`)
	p := r.problem(t, 409, "lock_held")
	if got := r.header.Get("Retry-After"); got != "3" || p["retry_after_ms"] != json.Number("2500") {
		t.Fatalf("Retry-After=%q retry_after_ms=%v, want 3 and 2500", got, p["retry_after_ms"])
	}
}

// TestHandler_LongPoll checks that an acquire that waits longer than the
// server's WriteTimeout still gets its answer.
func TestHandler_LongPoll(t *testing.T) {
	f := fake.New()
	srv := NewHandler(f, f)
	srv.Logger = slog.New(slog.DiscardHandler)
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.WriteTimeout = 100 * time.Millisecond
	ts.Start()
	defer ts.Close()
	e := &env{t: t, f: f, ts: ts}
	e.acquire("r", "a")
	start := time.Now()
	r := e.do("POST", "/v1/locks/r/acquire", `{"holder":"b","wait_ms":400}`)
	r.problem(t, 409, "lock_held")
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("answered after %s, before the wait", d)
	}
}

// TestHandler_AcquireCanceled checks that a client that goes away ends its
// waiting acquire.
func TestHandler_AcquireCanceled(t *testing.T) {
	e := newEnv(t)
	e.acquire("r", "a")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.ts.URL+"/v1/locks/r/acquire", strings.NewReader(`{"holder":"b","wait_ms":300000}`))
	start := time.Now()
	if _, err := e.ts.Client().Do(req); err == nil {
		t.Fatal("no error from a canceled request")
	}
	// The fake's Acquire returns when its context ends; the server logs it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		lines := e.logs.lines(t, "request rejected")
		if len(lines) > 0 && lines[len(lines)-1]["code"] == "unavailable" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no rejection logged after the client went away: %v", lines)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("acquire ran %s after the client went away", d)
	}
}

func TestHandler_Panic(t *testing.T) {
	e := newEnv(t)
	e.f.Panic = true
	p := e.do("GET", "/v1/kv/r/k", "").problem(t, 500, "internal")
	if p["detail"] != wire.InternalDetail {
		t.Fatalf("detail=%v", p["detail"])
	}
	if l := e.logs.lines(t, "panic serving request"); len(l) != 1 || !strings.Contains(fmt.Sprint(l[0]["panic"]), "fake: Get") {
		t.Fatalf("panic log: %v", l)
	}
	// The server still serves.
	e.f.Panic = false
	e.do("GET", "/v1/kv/r/k", "").problem(t, 404, "not_found")
}

func TestHandler_Internal(t *testing.T) {
	e := newEnv(t)
	e.f.Err = errors.New("disk on fire at /var/lib/fence")
	r := e.do("PUT", "/v1/kv/r/k", "v", "Fencing-Token", "1")
	p := r.problem(t, 500, "internal")
	if strings.Contains(string(r.body), "disk") || p["detail"] != wire.InternalDetail {
		t.Fatalf("the cause leaked: %s", r.body)
	}
	l := e.logs.lines(t, "request rejected")
	if len(l) != 1 || l[0]["level"] != "ERROR" || !strings.Contains(l[0]["err"].(string), "disk on fire") {
		t.Fatalf("log: %v", l)
	}
	e.f.Err = fmt.Errorf("bolt: put: %w", fence.ErrClosed)
	e.do("PUT", "/v1/kv/r/k", "v", "Fencing-Token", "1").problem(t, 503, "unavailable")
}

func TestHandler_Logs(t *testing.T) {
	e := newEnv(t)
	e.acquire("orders", "worker-a")
	e.logs.reset()
	e.do("PUT", "/v1/kv/orders/o-1", "v", "Fencing-Token", "1").ok(t)
	e.do("DELETE", "/v1/kv/orders/o-1", "", "Fencing-Token", "1").ok(t)
	e.do("POST", "/v1/fences/orders", "", "Fencing-Token", "1").ok(t)
	e.do("POST", "/v1/txn", `{"fences":{"orders":1,"b":0}}`).problem(t, 400, "invalid_token")
	e.acquire("b", "worker-b")
	e.do("POST", "/v1/txn", `{"fences":{"orders":1,"b":1},"then":[{"op":"put","resource":"b","key":"x","value":""}]}`).ok(t)
	got := e.logs.lines(t, "write accepted")
	want := []map[string]any{
		{"level": "INFO", "op": "put", "resource": "orders", "key": "o-1", "token": 1.0, "last_fence": 1.0, "holder": "worker-a", "revision": 1.0},
		{"level": "INFO", "op": "delete", "resource": "orders", "key": "o-1", "token": 1.0, "last_fence": 1.0, "holder": "worker-a", "revision": 2.0},
		{"level": "INFO", "op": "claim", "resource": "orders", "token": 1.0, "last_fence": 1.0, "holder": "worker-a", "revision": 2.0},
		{"level": "INFO", "op": "txn", "resource": "b", "token": 1.0, "last_fence": 1.0, "ops": 1.0, "revision": 3.0},
		{"level": "INFO", "op": "txn", "resource": "orders", "token": 1.0, "last_fence": 1.0, "ops": 0.0, "revision": 3.0},
	}
	if len(got) != len(want) {
		t.Fatalf("%d accepted lines, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		for k, v := range want[i] {
			if got[i][k] != v {
				t.Errorf("line %d: %s=%v, want %v", i, k, got[i][k], v)
			}
		}
	}

	e.logs.reset()
	e.do("PUT", "/v1/kv/orders/o-1", "v", "Fencing-Token", "9").problem(t, 409, "token_not_issued")
	e.f.Expire("orders")
	e.acquire("orders", "worker-c")
	e.do("DELETE", "/v1/kv/orders/o-1", "", "Fencing-Token", "1").problem(t, 409, "fenced")
	e.do("POST", "/v1/locks/orders/acquire", `{"holder":"worker-d"}`).problem(t, 409, "lock_held")
	e.do("POST", "/v1/locks/orders/release", `{"token":1}`).problem(t, 409, "lease_lost")
	e.do("GET", "/nope", "").problem(t, 404, "not_found")
	got = e.logs.lines(t, "request rejected")
	want = []map[string]any{
		{"level": "WARN", "code": "token_not_issued", "resource": "orders", "key": "o-1", "presented": 9.0, "last_token": 1.0},
		{"level": "WARN", "code": "fenced", "resource": "orders", "key": "o-1", "presented": 1.0, "last_fence": 2.0},
		{"level": "WARN", "code": "lock_held", "resource": "orders", "holder": "worker-d"},
		{"level": "WARN", "code": "lease_lost", "resource": "orders", "presented": 1.0, "current": 2.0},
		{"level": "WARN", "code": "not_found", "route": unmatched, "status": 404.0},
	}
	if len(got) != len(want) {
		t.Fatalf("%d rejected lines, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		for k, v := range want[i] {
			if got[i][k] != v {
				t.Errorf("line %d: %s=%v, want %v", i, k, got[i][k], v)
			}
		}
		if got[i]["detail"] == "" {
			t.Errorf("line %d has no detail", i)
		}
	}
}

// metricValue reads one sample from GET /metrics.
func (e *env) metricValue(sample string) float64 {
	e.t.Helper()
	r := e.do("GET", "/metrics", "")
	for _, l := range strings.Split(string(r.body), "\n") {
		if v, ok := strings.CutPrefix(l, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				e.t.Fatal(err)
			}
			return f
		}
	}
	e.t.Fatalf("no sample %s in /metrics", sample)
	return 0
}

func TestHandler_Metrics(t *testing.T) {
	e := newEnv(t)
	e.acquire("r", "w")
	samples := []string{
		`fence_storage_writes_total{op="put"}`,
		`fence_storage_rejections_total{reason="fenced"}`,
		`fence_storage_rejections_total{reason="invalid_token"}`,
		`fence_storage_rejections_total{reason="too_large"}`,
		`fence_http_rejections_total{code="bad_request",route="/v1/locks/{resource}/acquire"}`,
		`fence_http_request_duration_seconds_count{code="200",method="PUT",route="/v1/kv/{resource}/{key}"}`,
	}
	e.do("PUT", "/v1/kv/r/k", "v", "Fencing-Token", "1").ok(t)
	e.do("POST", "/v1/locks/r/acquire", `{}`).problem(t, 400, "bad_request")
	before := map[string]float64{}
	for _, s := range samples {
		before[s] = e.metricValue(s)
	}
	e.do("PUT", "/v1/kv/r/k", "v", "Fencing-Token", "1").ok(t)
	e.f.Expire("r")
	e.acquire("r", "w")
	e.do("PUT", "/v1/kv/r/k", "v", "Fencing-Token", "1").problem(t, 409, "fenced")
	e.do("PUT", "/v1/kv/r/k", "v", "Fencing-Token", "x").problem(t, 400, "invalid_token")
	if r := e.do("GET", "/v1/kv/r/k", "", "Fencing-Token", "x"); r.status != 200 { // a read ignores Fencing-Token
		t.Fatalf("GET: Status=%d", r.status)
	}
	e.do("POST", "/v1/locks/r/acquire", `{}`).problem(t, 400, "bad_request")
	for _, s := range samples {
		want := before[s] + 1
		if s == samples[3] {
			want = before[s]
		}
		if got := e.metricValue(s); got != want {
			t.Errorf("%s=%v, want %v", s, got, want)
		}
	}
}

// TestHandler_Golden compares the problem body of every code with
// testdata/golden/<name>.json; go test -update rewrites them.
func TestHandler_Golden(t *testing.T) {
	e := newEnv(t)
	e.acquire("orders", "worker-a")
	e.f.Expire("orders")
	e.acquire("orders", "worker-b")
	big := strings.Repeat("x", fence.MaxValueSize+1)
	tests := []struct {
		name    string
		method  string
		path    string
		body    string
		headers []string
		setup   func()
	}{
		{"too_large", "PUT", "/v1/kv/orders/o-1", big, []string{"Fencing-Token", "2"}, nil},
		{"bad_request", "PUT", "/v1/kv/orders/a//b", "v", []string{"Fencing-Token", "2"}, nil},
		{"fence_required", "PUT", "/v1/kv/orders/o-1", "v", nil, nil},
		{"invalid_token", "PUT", "/v1/kv/orders/o-1", "v", []string{"Fencing-Token", "1e3"}, nil},
		{"token_not_issued", "PUT", "/v1/kv/orders/o-1", "v", []string{"Fencing-Token", "3"}, nil},
		{"fenced", "PUT", "/v1/kv/orders/o-1", "v", []string{"Fencing-Token", "1"}, nil},
		{"precondition_failed", "PUT", "/v1/kv/orders/o-1", "v", []string{"Fencing-Token", "2", "If-Match", `"7"`}, nil},
		{"not_found", "GET", "/v1/kv/orders/o-1", "", nil, nil},
		{"not_found_route", "GET", "/v1/nope", "", nil, nil},
		{"lock_held", "POST", "/v1/locks/orders/acquire", `{"holder":"worker-c"}`, nil, nil},
		{"lease_lost", "POST", "/v1/locks/orders/renew", `{"token":1}`, nil, nil},
		{"method_not_allowed", "PATCH", "/v1/kv/orders/o-1", "", nil, nil},
		{"not_ready", "GET", "/readyz", "", nil, func() { e.srv.Ready = func() error { return errors.New("opening") } }},
		{"unavailable", "GET", "/v1/fences/orders", "", nil, func() { e.f.Err = fence.ErrClosed }},
		{"not_leader", "GET", "/v1/fences/orders", "", nil, func() { e.f.Err = fence.ErrNotLeader }},
		{"internal", "GET", "/v1/fences/orders", "", nil, func() { e.f.Err = errors.New("disk on fire") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup()
			}
			r := e.do(tt.method, tt.path, tt.body, tt.headers...)
			e.srv.Ready, e.f.Err = nil, nil
			code := strings.TrimSuffix(tt.name, "_route")
			p := r.json(t)
			r.problem(t, int(mustInt(t, p["status"])), code)
			var got bytes.Buffer
			if err := json.Indent(&got, r.body, "", "  "); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join("testdata", "golden", tt.name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("body:\n%s\nwant:\n%s", got.Bytes(), want)
			}
			// The body rebuilds the error a client sees.
			perr := wire.ProblemError(r.status, r.body)
			if i := wire.Rank(perr); wire.Codes[i].Code != code && code != "not_ready" && code != "method_not_allowed" && code != "internal" {
				t.Fatalf("wire.ProblemError(...) = %v, which maps to %s", perr, wire.Codes[i].Code)
			}
		})
	}
}

func mustInt(t *testing.T, v any) int64 {
	t.Helper()
	n, err := v.(json.Number).Int64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
