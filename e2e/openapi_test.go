package e2e

// Every request that the API suite sends through apiSend, and its answer, is
// checked against the OpenAPI document that the server embeds (docs/openapi.yaml,
// as docs.OpenAPIJSON) with kin-openapi's openapi3filter: the route, the
// parameters, the headers and the body of the request, and the status, the
// media type, the headers and the body of the answer (the problem code
// included). A mismatch fails the test that sent the request.
//
// The suite sends malformed requests on purpose, so a request is checked only
// when the server accepted it (2xx): then one that the document rejects is a
// mismatch, as the document must never be stricter than the server. The
// answer is always checked, whatever the request. Each distinct exchange is
// checked once (apiChecked) and the document loaded once (apiSpec).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/docs"
	fenceserver "github.com/fence-lock/fence/server"
)

// apiSpec is the document and its router, loaded once for the package.
var apiSpec = sync.OnceValues(func() (*apiOpenAPI, error) {
	doc, err := openapi3.NewLoader().LoadFromData(docs.OpenAPIJSON)
	if err != nil {
		return nil, fmt.Errorf("loading docs/openapi.json: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("docs/openapi.json is not a valid OpenAPI document: %w", err)
	}
	return newAPIOpenAPI(doc), nil
})

// apiOpenAPI is the document with a router that knows its paths as the
// server does (see apiRoute).
type apiOpenAPI struct {
	doc    *openapi3.T
	routes []apiRoute
	opts   *openapi3filter.Options
}

// apiRoute is one path of the document. kin-openapi's routers match a path
// parameter to one segment of the decoded path, but the server routes on the
// escaped path: a resource is one escaped segment ("orders%2F17" is one
// resource, "orders/17"), and the key, marked x-rest-of-path in the
// document, is the rest of the path, '/' included. So this router matches
// escaped segments and decodes the parameters after, like the server's.
type apiRoute struct {
	path string   // the template, "/v1/kv/{resource}/{key}"
	segs []string // its segments
	rest bool     // its last segment is a parameter that takes the rest of the path
	item *openapi3.PathItem
}

func newAPIOpenAPI(doc *openapi3.T) *apiOpenAPI {
	s := &apiOpenAPI{doc: doc, opts: &openapi3filter.Options{
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc, // the suite runs without auth; bearerAuth is checked by the server
		IncludeResponseStatus: true,                                  // an undocumented status is a mismatch
		SkipSettingDefaults:   true,
		MultiError:            true,
	}}
	for _, path := range doc.Paths.InMatchingOrder() {
		item := doc.Paths.Value(path)
		rt := apiRoute{path: path, segs: strings.Split(strings.TrimPrefix(path, "/"), "/"), item: item}
		if last := rt.segs[len(rt.segs)-1]; strings.HasPrefix(last, "{") {
			name := strings.Trim(last, "{}")
			for _, p := range item.Parameters {
				if p.Value.Name == name && p.Value.In == openapi3.ParameterInPath && p.Value.Extensions["x-rest-of-path"] == true {
					rt.rest = true
				}
			}
		}
		s.routes = append(s.routes, rt)
	}
	// Literal segments win over parameters, as OpenAPI says.
	literals := func(rt apiRoute) int {
		n := 0
		for _, seg := range rt.segs {
			if !strings.HasPrefix(seg, "{") {
				n++
			}
		}
		return n
	}
	slices.SortStableFunc(s.routes, func(a, b apiRoute) int { return literals(b) - literals(a) })
	return s
}

// match returns the route of an escaped path and its parameters, decoded.
func (s *apiOpenAPI) match(escaped string) (*apiRoute, map[string]string, bool) {
	segs := strings.Split(strings.TrimPrefix(escaped, "/"), "/")
	for i := range s.routes {
		rt := &s.routes[i]
		if len(segs) != len(rt.segs) && !(rt.rest && len(segs) > len(rt.segs)) {
			continue
		}
		params := map[string]string{}
		ok := true
		for j, seg := range rt.segs {
			if !strings.HasPrefix(seg, "{") {
				ok = ok && segs[j] == seg
				continue
			}
			v := segs[j]
			if rt.rest && j == len(rt.segs)-1 {
				v = strings.Join(segs[j:], "/")
			}
			if u, err := url.PathUnescape(v); err == nil {
				v = u
			}
			params[strings.Trim(seg, "{}")] = v
		}
		if ok {
			return rt, params, true
		}
	}
	return nil, nil, false
}

// FindRoute implements routers.Router.
func (s *apiOpenAPI) FindRoute(req *http.Request) (*routers.Route, map[string]string, error) {
	rt, params, ok := s.match(req.URL.EscapedPath())
	if !ok {
		return nil, nil, routers.ErrPathNotFound
	}
	op := rt.item.GetOperation(req.Method)
	if op == nil {
		return nil, nil, routers.ErrMethodNotAllowed
	}
	return &routers.Route{Spec: s.doc, Path: rt.path, PathItem: rt.item, Method: req.Method, Operation: op}, params, nil
}

// apiMethods returns the methods of a path item, sorted.
func apiMethods(item *openapi3.PathItem) []string {
	var ms []string
	for m := range item.Operations() {
		ms = append(ms, strings.ToUpper(m))
	}
	slices.Sort(ms)
	return ms
}

// apiSent returns a function that returns the body of req as it was sent.
// It leaves req as http.NewRequest made it, so that a body of known length
// keeps its Content-Length and any other goes chunked.
func apiSent(req *http.Request) func() []byte {
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		return func() []byte { return nil }
	case req.GetBody != nil:
		return func() []byte {
			rc, err := req.GetBody()
			if err != nil {
				return nil
			}
			b, _ := io.ReadAll(rc)
			return b
		}
	}
	w := &apiLockedWriter{}
	req.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(req.Body, w), req.Body}
	return w.bytes
}

// apiLockedWriter collects what the transport reads of a chunked body; it may
// still be writing when the answer has come.
type apiLockedWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *apiLockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *apiLockedWriter) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.buf.Bytes())
}

// apiCheckOpenAPI fails t for every way in which req (with body) and its
// answer r disagree with the document.
func apiCheckOpenAPI(t *testing.T, req *http.Request, body []byte, r apiResp) {
	t.Helper()
	s, err := apiSpec()
	if err != nil {
		t.Error(err) // not Fatal: a test may send from another goroutine
		return
	}
	// kin-openapi compiles a schema for every value it validates; the suite
	// repeats many exchanges exactly (it reads the same state before and
	// after each rejected request), so each distinct one is checked once.
	key := apiExchangeKey(req, body, r)
	ms, ok := apiChecked.Load(key)
	if !ok {
		ms, _ = apiChecked.LoadOrStore(key, s.check(req, body, r))
	}
	for _, m := range ms.([]string) {
		if len(m) > 2000 {
			m = m[:2000] + "..."
		}
		t.Errorf("OpenAPI: %s %s -> %s:\n%s", req.Method, req.URL.EscapedPath(), apiClipResp(r), m)
	}
}

// apiChecked holds the mismatches of each exchange checked, by apiExchangeKey.
var apiChecked sync.Map

// apiExchangeKey identifies an exchange by all that the check looks at.
func apiExchangeKey(req *http.Request, body []byte, r apiResp) [sha256.Size]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s\n", req.Method, req.URL.RequestURI())
	req.Header.Write(h)
	fmt.Fprintf(h, "\n%d\n", len(body))
	h.Write(body)
	fmt.Fprintf(h, "\n%d\n", r.status)
	resp := r.header.Clone()
	resp.Del("Date")
	resp.Write(h)
	fmt.Fprintf(h, "\n%d\n", len(r.body))
	h.Write(r.body)
	return [sha256.Size]byte(h.Sum(nil))
}

func apiClipResp(r apiResp) string {
	s := r.String()
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// check returns the mismatches between the document and an exchange.
func (s *apiOpenAPI) check(req *http.Request, body []byte, r apiResp) []string {
	ctx := context.Background()
	vr := req.Clone(ctx)
	vr.Body, vr.GetBody, vr.ContentLength = io.NopCloser(bytes.NewReader(body)), nil, int64(len(body))
	route, params, err := s.FindRoute(vr)
	switch {
	case errors.Is(err, routers.ErrPathNotFound):
		if r.status != http.StatusNotFound {
			return []string{fmt.Sprintf("the document has no such path, but the server answered %d, not 404", r.status)}
		}
		return s.checkGeneric(vr, r, http.StatusNotFound, "NotFound")
	case errors.Is(err, routers.ErrMethodNotAllowed):
		rt, _, _ := s.match(vr.URL.EscapedPath())
		if r.status != http.StatusMethodNotAllowed {
			return []string{fmt.Sprintf("path %s has no %s in the document, but the server answered %d, not 405", rt.path, vr.Method, r.status)}
		}
		ms := s.checkGeneric(vr, r, http.StatusMethodNotAllowed, "MethodNotAllowed")
		var allow []string
		for _, v := range r.header.Values("Allow") {
			for m := range strings.SplitSeq(v, ",") {
				allow = append(allow, strings.TrimSpace(m))
			}
		}
		slices.Sort(allow)
		if want := apiMethods(rt.item); !slices.Equal(allow, want) {
			ms = append(ms, fmt.Sprintf("Allow: %s, but the document has %s for path %s", strings.Join(allow, ", "), strings.Join(want, ", "), rt.path))
		}
		return ms
	case err != nil:
		return []string{err.Error()}
	}

	var ms []string
	in := &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route, Options: s.opts}
	if rb := route.Operation.RequestBody; len(body) > 0 && vr.Header.Get("Content-Type") == "" && rb != nil &&
		rb.Value.Content.Get("") == nil && len(rb.Value.Content) == 1 {
		// The server reads a body whatever its Content-Type, and the suite
		// sends none: take the one media type the document names.
		for mt := range rb.Value.Content {
			vr.Header.Set("Content-Type", mt)
		}
	}
	if r.status < 300 { // a request the server rejected may be wrong on purpose
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			ms = append(ms, fmt.Sprintf("the server accepted a request that %s %s rejects: %v", vr.Method, route.Path, err))
		}
	}
	ms = append(ms, s.checkResponse(in, route, r)...)
	return ms
}

// checkResponse checks an answer against its operation.
func (s *apiOpenAPI) checkResponse(in *openapi3filter.RequestValidationInput, route *routers.Route, r apiResp) []string {
	op := fmt.Sprintf("%s %s (%s)", route.Method, route.Path, route.Operation.OperationID)
	ref := route.Operation.Responses.Status(r.status)
	if ref == nil {
		return []string{fmt.Sprintf("status %d is not documented for %s", r.status, op)}
	}
	var ms []string
	mt, _, _ := mime.ParseMediaType(r.header.Get("Content-Type"))
	if mt == "application/problem+json" {
		ms = append(ms, apiCheckCode(op, r, ref.Value)...)
	}
	if route.Method == http.MethodHead {
		return ms // ValidateResponse skips HEAD; its status was checked above
	}
	opts := *s.opts
	if mt == "text/event-stream" {
		// OpenAPI 3.1 cannot type the events of a stream (the document names
		// WatchEvent in the operation's description instead), so the body
		// of this one media type is not validated. The raw bytes of a kv
		// value are not either: the document gives
		// application/octet-stream no schema, which ValidateResponse skips.
		opts.ExcludeResponseBody = true
	}
	err := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 r.status,
		Header:                 r.header,
		Body:                   io.NopCloser(bytes.NewReader(r.body)),
		Options:                &opts,
	})
	if err != nil {
		ms = append(ms, fmt.Sprintf("%s: %v", op, err))
	}
	return ms
}

// checkGeneric checks an answer that no operation documents (an unknown
// path, a method a path lacks) against components/responses/name.
func (s *apiOpenAPI) checkGeneric(req *http.Request, r apiResp, status int, name string) []string {
	ref := s.doc.Components.Responses[name]
	responses := openapi3.NewResponses()
	responses.Set(fmt.Sprint(status), ref)
	op := &openapi3.Operation{OperationID: "(" + name + ")", Responses: responses}
	route := &routers.Route{Spec: s.doc, Path: req.URL.EscapedPath(), PathItem: &openapi3.PathItem{}, Method: req.Method, Operation: op}
	in := &openapi3filter.RequestValidationInput{Request: req, Route: route, Options: s.opts}
	return s.checkResponse(in, route, r)
}

// apiCheckCode checks that a problem's code is in the enum and is one of
// those the response documents, for a message clearer than a failed oneOf.
func apiCheckCode(op string, r apiResp, resp *openapi3.Response) []string {
	var p struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(r.body, &p) != nil {
		return nil // ValidateResponse says what is wrong with the body
	}
	var codes []string
	if mt := resp.Content.Get("application/problem+json"); mt != nil && mt.Schema != nil {
		codes = apiProblemCodes(mt.Schema.Value)
	}
	if !slices.Contains(codes, p.Code) {
		return []string{fmt.Sprintf("problem code %q is not documented for %d of %s (documented: %s)",
			p.Code, r.status, op, strings.Join(codes, ", "))}
	}
	return nil
}

// apiProblemCodes returns the codes a problem schema allows: the const of
// its code member, or those of its oneOf.
func apiProblemCodes(s *openapi3.Schema) []string {
	var codes []string
	for _, sub := range s.OneOf {
		codes = append(codes, apiProblemCodes(sub.Value)...)
	}
	if c, ok := s.Properties["code"]; ok && c.Value.Const != nil {
		codes = append(codes, fmt.Sprint(c.Value.Const))
	}
	return codes
}

// TestOpenAPIRoutes sends what the API suite does not, through apiDo, so
// that the document is checked on it too: HEAD on every path that answers
// GET, a method that every path lacks, revoke, the keys, the cluster.
func TestOpenAPIRoutes(t *testing.T) {
	url, _ := newService(t)
	tok := apiAcquire(t, url, "r", "h", 60000)
	apiPut(t, url, "r", "a/b", []byte("v"), apiTok(tok, "Fence-Sequencer", "c2lnbmVk.c2lnbmF0dXJl")) // not checked by fence serve
	s, err := apiSpec()
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range s.routes {
		path := strings.NewReplacer("{resource}", "r", "{key}", "a/b").Replace(rt.path)
		t.Run(rt.path, func(t *testing.T) {
			if rt.item.Get != nil && rt.item.Head != nil {
				apiDo(t, "HEAD", url+path, nil, nil)
			}
			apiDo(t, "PATCH", url+path, nil, nil)
		})
	}
	t.Run("HEAD of an absent key", func(t *testing.T) {
		apiDo(t, "HEAD", url+"/v1/kv/r/absent", nil, nil)
	})
	t.Run("revoke", func(t *testing.T) {
		r := apiDo(t, "POST", url+"/v1/locks/r/revoke", nil, nil)
		m := apiOK(t, r, map[string]any{"resource": "r", "revoked_token": tok, "last_fence": apiPosInt})
		if n, _ := apiUint(m["last_fence"]); n <= tok {
			t.Errorf("last_fence %d after revoking token %d", n, tok)
		}
		apiOK(t, apiDo(t, "POST", url+"/v1/locks/r/revoke", []byte(`{}`), nil), map[string]any{"resource": "r", "revoked_token": 0, "last_fence": apiPosInt})
		apiProblem(t, apiDo(t, "POST", url+"/v1/locks/r/revoke", []byte(`{"token":1}`), nil), 400, "bad_request", nil)
		apiProblem(t, apiDo(t, "PUT", url+"/v1/kv/r/a/b", []byte("x"), apiTok(tok)), 409, "fenced", map[string]any{"resource": "r", "presented": tok, "last_fence": apiPosInt})
	})
	t.Run("keys", func(t *testing.T) {
		r := apiDo(t, "GET", url+"/v1/keys", nil, nil)
		if r.status != 200 || strings.TrimSpace(string(r.body)) != `{"keys":[]}` {
			t.Errorf("GET /v1/keys of a server that signs nothing: %s", r)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		r := apiDo(t, "GET", url+"/v1/cluster", nil, nil)
		apiOK(t, r, map[string]any{"role": "leader", "leader": "", "epoch": 1, "store": "embedded", "servers": apiPred{"one server", func(v any) bool {
			l, ok := v.([]any)
			return ok && len(l) == 1
		}}})
	})
}

// TestOpenAPISigned checks the answers of a server that signs its leases:
// the sequencer of a Lease and the key set.
func TestOpenAPISigned(t *testing.T) {
	key, err := fence.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := fenceserver.Open(t.Context(), fenceserver.Config{Data: t.TempDir(), Signer: &key, Logger: apiQuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	url := apiServe(t, s)
	r := apiDo(t, "POST", url+"/v1/locks/signed/acquire", []byte(`{"holder":"h"}`), nil)
	m := apiOK(t, r, map[string]any{"resource": "signed", "holder": "h", "token": apiPosInt, "ttl_ms": 10000,
		"expires_at": apiExpiresIn(10 * time.Second), "sequencer": apiText})
	tok, _ := apiUint(m["token"])
	apiPut(t, url, "signed", "k", []byte("v"), apiTok(tok, "Fence-Sequencer", m["sequencer"].(string)))
	r = apiDo(t, "GET", url+"/v1/keys", nil, nil)
	var ks struct {
		Keys []fence.PublicKey `json:"keys"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &ks) != nil || len(ks.Keys) != 1 || ks.Keys[0].ID != key.ID {
		t.Errorf("GET /v1/keys: %s, want the key %s", r, key.ID)
	}
}

// TestOpenAPIAuth checks 401, 403 and 429 and the routes that stay open,
// on fence serve with --auth-file, --protect-metrics and --rate-limit.
func TestOpenAPIAuth(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for name, perms := range map[string]string{"all": "lock:* read:* write:* admin:*", "reader": "read:orders/"} {
		sum := sha256.Sum256([]byte(name + "-secret"))
		lines = append(lines, name+" "+hex.EncodeToString(sum[:])+" "+perms)
	}
	authFile := filepath.Join(dir, "auth")
	if err := os.WriteFile(authFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := start(t, filepath.Join(dir, "data"), "--auth-file", authFile, "--protect-metrics")
	bearer := func(name string) http.Header { return apiHdr("Authorization", "Bearer "+name+"-secret") }

	apiProblem(t, apiDo(t, "GET", srv.URL+"/v1/locks/orders%2F1", nil, nil), 401, "unauthorized", nil)
	apiProblem(t, apiDo(t, "GET", srv.URL+"/v1/locks/orders%2F1", nil, bearer("nobody")), 401, "unauthorized", nil)
	apiOK(t, apiDo(t, "GET", srv.URL+"/v1/locks/orders%2F1", nil, bearer("reader")),
		map[string]any{"resource": "orders/1", "held": false, "last_token": 0})
	apiProblem(t, apiDo(t, "POST", srv.URL+"/v1/locks/orders%2F1/acquire", []byte(`{"holder":"h"}`), bearer("reader")), 403, "forbidden", nil)
	apiProblem(t, apiDo(t, "POST", srv.URL+"/v1/locks/orders%2F1/revoke", nil, bearer("reader")), 403, "forbidden", nil)
	apiProblem(t, apiDo(t, "POST", srv.URL+"/v1/txn", []byte(`{"fences":{"orders/1":1}}`), bearer("reader")), 403, "forbidden", nil)
	apiProblem(t, apiDo(t, "GET", srv.URL+"/metrics", nil, nil), 401, "unauthorized", nil)
	apiProblem(t, apiDo(t, "GET", srv.URL+"/metrics", nil, bearer("reader")), 403, "forbidden", nil)
	apiOK(t, apiDo(t, "GET", srv.URL+"/v1/locks", nil, bearer("reader")), map[string]any{"locks": apiPred{"a list", func(v any) bool {
		_, ok := v.([]any)
		return ok
	}}})
	for _, p := range []string{"/healthz", "/readyz", "/v1/keys"} {
		if r := apiDo(t, "GET", srv.URL+p, nil, nil); r.status != 200 {
			t.Errorf("GET %s without a token: %s", p, r)
		}
	}
	if r := apiDo(t, "GET", srv.URL+"/metrics", nil, bearer("all")); r.status != 200 {
		t.Errorf("GET /metrics as admin: %s", r)
	}

	limited := start(t, filepath.Join(dir, "data-limited"), "--rate-limit", "0.01", "--rate-burst", "1")
	apiDo(t, "GET", limited.URL+"/v1/fences/x", nil, nil)
	r := apiDo(t, "GET", limited.URL+"/v1/fences/x", nil, nil)
	apiProblem(t, r, 429, "rate_limited", map[string]any{"retry_after_ms": apiPosInt})
	if r := apiDo(t, "GET", limited.URL+"/healthz", nil, nil); r.status != 200 {
		t.Errorf("GET /healthz is not exempt from the rate limit: %s", r)
	}
}

// apiServe serves s on a loopback port until t ends and returns its URL.
func apiServe(t *testing.T, s *fenceserver.Server) string {
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		srv.Close()
		s.Close()
	})
	return srv.URL
}

func apiQuietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestOpenAPIServed checks that a server answers GET /v1/openapi.json with
// the document that the tests check it against, without credentials.
func TestOpenAPIServed(t *testing.T) {
	url, _ := newService(t)
	r := apiDo(t, "GET", url+"/v1/openapi.json", nil, nil)
	if r.status != 200 || !bytes.Equal(bytes.TrimSpace(r.body), bytes.TrimSpace(docs.OpenAPIJSON)) {
		t.Errorf("GET /v1/openapi.json: %s; want 200 and docs.OpenAPIJSON", apiClipResp(r))
	}
}
