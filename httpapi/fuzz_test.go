package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/fake"
	"github.com/fence-lock/fence/wire"
)

// checkKinds fails unless err is one of kinds (by the table's precedence).
func checkKinds(t *testing.T, err error, kinds ...error) {
	t.Helper()
	for _, k := range kinds {
		if wire.Codes[wire.Rank(err)].Err == k {
			return
		}
	}
	t.Fatalf("error %v is %s, want one of %v", err, wire.Codes[wire.Rank(err)].Code, kinds)
}

func FuzzDecodeAcquire(f *testing.F) {
	for _, s := range []string{
		`{"holder":"worker-a","ttl_ms":10000,"wait_ms":0}`, `{"holder":"w"}`, `{"holder":"w","holder":"w"}`,
		`{"Holder":"w"}`, `{"holder":"\ud800"}`, `{"holder":"w","ttl_ms":1e3}`, `{"holder":"w"} x`, ``, `null`,
		`{"holder":"w","session":{"resource":".session/w","token":7}}`, `{"holder":"w","session":{"resource":"x","token":7},"ttl_ms":10}`,
		`{"holder":"w","mode":"shared"}`, `{"holder":"w","mode":"exclusive","limit":3}`, `{"holder":"w","mode":"shared","limit":3}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := decodeAcquire(data)
		if err != nil {
			checkKinds(t, err, fence.ErrBadRequest)
			return
		}
		if err := fence.ValidateHolder(req.Holder); err != nil {
			t.Fatalf("accepted holder %q: %v", req.Holder, err)
		}
		if (req.TTL != 0 || req.Session.IsZero()) && (req.TTL < fence.MinTTL || req.TTL > fence.MaxTTL || req.TTL%time.Millisecond != 0) {
			t.Fatalf("accepted TTL %s", req.TTL)
		}
		if !req.Session.IsZero() {
			if err := req.Session.Validate(); err != nil {
				t.Fatalf("accepted session %+v: %v", req.Session, err)
			}
		}
		if req.Wait < 0 || req.Wait > fence.MaxWait || req.Wait%time.Millisecond != 0 {
			t.Fatalf("accepted wait %s", req.Wait)
		}
		if req.Limit < 0 || req.Limit > fence.MaxPermits {
			t.Fatalf("accepted limit %d", req.Limit)
		}
		if req.Shared && (req.Limit != 0 || !req.Session.IsZero()) {
			t.Fatalf("accepted a shared hold with a limit or a session: %+v", req)
		}
		// Re-encoded canonically, it decodes to the same request.
		m := map[string]any{"holder": req.Holder, "wait_ms": req.Wait.Milliseconds()}
		if req.TTL != 0 {
			m["ttl_ms"] = req.TTL.Milliseconds()
		}
		if req.Limit != 0 {
			m["limit"] = req.Limit
		}
		if !req.Session.IsZero() {
			m["session"] = map[string]any{"resource": req.Session.Resource, "token": req.Session.Token}
		}
		if req.Shared {
			m["mode"] = "shared"
		}
		b, _ := json.Marshal(m)
		if again, err := decodeAcquire(b); err != nil || again != req {
			t.Fatalf("round trip of %s: %+v, %v", b, again, err)
		}
	})
}

func FuzzDecodeAcquireAll(f *testing.F) {
	for _, s := range []string{
		`{"resources":["a","b"],"holder":"w","ttl_ms":10000,"wait_ms":0}`, `{"resources":["a"],"holder":"w"}`,
		`{"resources":["a","a"],"holder":"w"}`, `{"resources":[],"holder":"w"}`, `{"resources":"a","holder":"w"}`,
		`{"resources":["a",1],"holder":"w"}`, `{"resources":["\ud800"],"holder":"w"}`, `{"resources":["a"],"holder":"w","limit":2}`,
		`{"resources":["a"],"holder":"w","session":{"resource":".session/w","token":3}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := decodeAcquireAll(data)
		if err != nil {
			checkKinds(t, err, fence.ErrBadRequest, fence.ErrTooLarge)
			return
		}
		if len(req.Resources) == 0 || len(req.Resources) > fence.MaxMultiAcquire || req.Limit != 0 {
			t.Fatalf("accepted %d resources, limit %d", len(req.Resources), req.Limit)
		}
		seen := map[string]bool{}
		for _, r := range req.Resources {
			if err := fence.ValidateResource(r); err != nil || seen[r] {
				t.Fatalf("accepted resource %q (twice: %v): %v", r, seen[r], err)
			}
			seen[r] = true
		}
		if err := fence.ValidateHolder(req.Holder); err != nil {
			t.Fatalf("accepted holder %q: %v", req.Holder, err)
		}
		m := map[string]any{"resources": req.Resources, "holder": req.Holder, "wait_ms": req.Wait.Milliseconds()}
		if req.TTL != 0 {
			m["ttl_ms"] = req.TTL.Milliseconds()
		}
		if !req.Session.IsZero() {
			m["session"] = map[string]any{"resource": req.Session.Resource, "token": req.Session.Token}
		}
		b, _ := json.Marshal(m)
		if again, err := decodeAcquireAll(b); err != nil || !slices.Equal(again.Resources, req.Resources) || again.acquireRequest != req.acquireRequest {
			t.Fatalf("round trip of %s: %+v, %v", b, again, err)
		}
	})
}

func FuzzDecodeRenew(f *testing.F) {
	for _, s := range []string{
		`{"token":42,"ttl_ms":10000}`, `{"token":42}`, `{"token":"42"}`, `{"token":null}`, `{"token":0}`,
		`{"token":9223372036854775808}`, `{"token":1.5}`, `{"token":-1}`, `{"ttl_ms":10}`, `{"token":1,"ttl_ms":0}`,
		`{"token":3,"holder":"r1"}`, `{"token":3,"holder":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := decodeRenew(data)
		if err != nil {
			checkKinds(t, err, fence.ErrBadRequest, fence.ErrInvalidToken)
			return
		}
		if !req.Token.Valid() {
			t.Fatalf("accepted token %d", req.Token)
		}
		if req.TTL != 0 && (req.TTL < fence.MinTTL || req.TTL > fence.MaxTTL) || req.TTL%time.Millisecond != 0 {
			t.Fatalf("accepted TTL %s", req.TTL)
		}
		if req.Holder != "" && fence.ValidateHolder(req.Holder) != nil {
			t.Fatalf("accepted holder %q", req.Holder)
		}
	})
}

func FuzzDecodeRelease(f *testing.F) {
	for _, s := range []string{`{"token":42}`, `{"token":"5"}`, `{"token":1e3}`, `{"token":9223372036854775807}`, `{}`, `{"token":1}{}`,
		`{"token":42,"holder":"r1"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := decodeRelease(data)
		if err != nil {
			checkKinds(t, err, fence.ErrBadRequest, fence.ErrInvalidToken)
			return
		}
		if !req.Token.Valid() {
			t.Fatalf("accepted token %d", req.Token)
		}
		if req.Holder != "" && fence.ValidateHolder(req.Holder) != nil {
			t.Fatalf("accepted holder %q", req.Holder)
		}
	})
}

func FuzzDecodeTxn(f *testing.F) {
	for _, s := range []string{
		`{"fences": {"orders": 42, "stock": 17},
		 "if":   [{"resource": "orders", "key": "o-1", "revision": 7}],
		 "then": [{"op": "put", "resource": "orders", "key": "o-1", "value": "paid"},
		          {"op": "delete", "resource": "stock", "key": "hold-9"}]}`,
		`{}`, `{"fences":{"r":1},"then":[{"op":"put","resource":"r","key":"a/b","value_base64":"AP8="}]}`,
		`{"then":[{"op":"delete","resource":"r","key":"k"}]}`, `{"fences":{"r":"1"}}`, `{"fences":{"r":1,"r":2}}`,
		`{"if":[{"resource":"r","key":"k","revision":0}]}`, `{"fences":{"r":1},"then":[{"op":"put","resource":"r","key":"k","value":"v","value_base64":"dg=="}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		txn, err := decodeTxn(data)
		if err != nil {
			checkKinds(t, err, fence.ErrTooLarge, fence.ErrBadRequest, fence.ErrFenceRequired, fence.ErrInvalidToken)
			return
		}
		fences := map[string]any{}
		for r, tok := range txn.Fences {
			if err := fence.ValidateResource(r); err != nil || !tok.Valid() {
				t.Fatalf("accepted fence %q: %d (%v)", r, tok, err)
			}
			fences[r] = uint64(tok)
		}
		var ifs, thens []any
		for _, c := range txn.If {
			if fence.ValidateResource(c.Resource) != nil || fence.ValidateKey(c.Key) != nil || c.Rev > fence.Rev(fence.MaxToken) {
				t.Fatalf("accepted compare %+v", c)
			}
			ifs = append(ifs, map[string]any{"resource": c.Resource, "key": c.Key, "revision": uint64(c.Rev)})
		}
		for _, op := range txn.Then {
			if fence.ValidateResource(op.Resource) != nil || fence.ValidateKey(op.Key) != nil || len(op.Value) > fence.MaxValueSize {
				t.Fatalf("accepted op %+v", op)
			}
			if _, ok := txn.Fences[op.Resource]; !ok {
				t.Fatalf("accepted op on unfenced %q", op.Resource)
			}
			m := map[string]any{"op": string(op.Kind), "resource": op.Resource, "key": op.Key}
			switch op.Kind {
			case fence.OpPut:
				if op.Value == nil {
					t.Fatalf("accepted put without value")
				}
				m["value_base64"] = base64.StdEncoding.EncodeToString(op.Value)
			case fence.OpDelete:
				if op.Value != nil {
					t.Fatalf("accepted delete with value")
				}
			default:
				t.Fatalf("accepted op kind %q", op.Kind)
			}
			thens = append(thens, m)
		}
		// Re-encoded canonically, it decodes to the same txn.
		b, _ := json.Marshal(map[string]any{"fences": fences, "if": orEmpty(ifs), "then": orEmpty(thens)})
		if again, err := decodeTxn(b); err != nil || !equalTxn(again, txn) {
			t.Fatalf("round trip of %s: %+v, %v", b, again, err)
		}
	})
}

func orEmpty(v []any) []any {
	if v == nil {
		return []any{}
	}
	return v
}

func FuzzParsePath(f *testing.F) {
	for _, s := range []string{
		"/v1/locks/orders/acquire", "/v1/locks/orders%2F17", "/v1/kv/orders%2F17/a/b", "/v1/kv/r/a//b", "/v1/kv/r/%2e%2e",
		"/v1/fences/%ZZ", "/v1/txn", "/healthz", "//", "/v1/kv//", "/v1/locks/%C3%A9/renew", "/v1/kv/r/%00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		m, ok := matchPath(p)
		if !ok {
			return
		}
		res, key, err := m.params()
		if err != nil {
			checkKinds(t, err, fence.ErrBadRequest)
			return
		}
		hasRes := strings.Contains(m.route.Pattern, "{resource}")
		hasKey := strings.Contains(m.route.Pattern, "{key}")
		if hasRes && fence.ValidateResource(res) != nil || !hasRes && res != "" {
			t.Fatalf("%q: accepted resource %q for %s", p, res, m.route.Pattern)
		}
		if hasKey && fence.ValidateKey(key) != nil || !hasKey && key != "" {
			t.Fatalf("%q: accepted key %q", p, key)
		}
		// The client's path for the same names matches the same.
		if hasRes {
			q := m.route.Ops[0].Path(res, key)
			m2, ok := matchPath(q)
			if !ok || m2.route != m.route {
				t.Fatalf("%q: re-escaped %q does not match %s", p, q, m.route.Pattern)
			}
			res2, key2, err := m2.params()
			if err != nil || res2 != res || key2 != key {
				t.Fatalf("%q: re-escaped %q gives %q, %q, %v", p, q, res2, key2, err)
			}
		}
	})
}

// FuzzServeHTTP sends GET requests with fuzzed paths and headers through the
// whole server: it must not panic, and it answers errors as problems.
func FuzzServeHTTP(f *testing.F) {
	for _, s := range []string{"/v1/kv/r/k", "/v1/locks/r", "/v1/fences/a%2Fb", "/v1/kv/r/a//b", "/nope", "/v1/txn"} {
		f.Add("GET", s, "1")
	}
	f.Add("PUT", "/v1/kv/r/k", "abc")
	f.Add("DELETE", "/v1/kv/r/k", "")
	fk := fake.New()
	srv := NewHandler(fk, fk)
	srv.Logger = slog.New(slog.DiscardHandler)
	f.Fuzz(func(t *testing.T, method, p, tok string) {
		if p == "/metrics" {
			return // slow, and not ours
		}
		u, err := url.ParseRequestURI(p)
		if err != nil || !validMethod(method) {
			return
		}
		r := httptest.NewRequest("GET", "/", strings.NewReader("v"))
		r.Method, r.URL, r.RequestURI = method, u, p
		r.Header.Set("Fencing-Token", tok)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		if w.Code >= 400 && w.Header().Get("Content-Type") != wire.ProblemContentType {
			t.Fatalf("%s %q: %d with Content-Type %q", method, p, w.Code, w.Header().Get("Content-Type"))
		}
		if w.Code == 500 {
			t.Fatalf("%s %q: 500: %s", method, p, w.Body)
		}
	})
}

func validMethod(m string) bool {
	if m == "" {
		return false
	}
	r, err := http.NewRequest(m, "http://x/", nil)
	return err == nil && r != nil
}

func FuzzParseIfMatch(f *testing.F) {
	for _, s := range []string{`"7"`, `*`, `"0"`, `"07"`, `W/"7"`, `"7", "8"`, `"9223372036854775807"`, `"9223372036854775808"`, ``, `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		c, err := parseIfMatch(v)
		if err != nil {
			checkKinds(t, err, fence.ErrBadRequest)
			if !errors.Is(err, fence.ErrBadRequest) {
				t.Fatalf("err=%v", err)
			}
			return
		}
		switch {
		case c.IfAbsent:
			t.Fatalf("%q gives IfAbsent", v)
		case c.IfExists:
			if c.IfMatch != 0 || v != "*" {
				t.Fatalf("%q gives %+v", v, c)
			}
		case c.IfMatch == 0 || c.IfMatch > fence.Rev(fence.MaxToken):
			t.Fatalf("%q gives %+v", v, c)
		case wire.ETag(c.IfMatch) != v:
			t.Fatalf("%q gives revision %d, whose tag is %s", v, c.IfMatch, wire.ETag(c.IfMatch))
		}
	})
}

// FuzzMembers checks membersUpTo and elements, which read JSON in one pass
// of their own, against encoding/json's Decoder reading the same input
// token by token (refMembers): they accept the same objects and arrays,
// with the same members and elements, and refuse the same ones with the
// same kind of error.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{"holder":"w","ttl_ms":10000}`, ` { "a" : [1, {"b": "]"}] , "c":"\"}" } `, `{}`, `[]`, `{"a":1,}`, `{"a":1}x`,
		`{"a" 1}`, `{"a":1 "b":2}`, `{"a":tru}`, `{"a":"\u00e9\n"}`, `{"\u0061":1,"a":2}`, `{"a":[1,]}`, `[1, 2 ,"3",[4],{}]`,
		`{"a":1,"b":2,"c":3}`, `{"a":"x\`, `"str"`, `{"a":01}`, `{"a":-0.5e+3}`, "{\"a\":\"\x01\"}", `{"a":{"b":{"c":[]}}}`,
	} {
		f.Add([]byte(s))
	}
	kind := func(err error) string {
		switch {
		case err == nil:
			return "ok"
		case errors.Is(err, fence.ErrTooLarge):
			return "too_large"
		case errors.Is(err, fence.ErrBadRequest):
			return "bad_request"
		}
		return "other: " + err.Error()
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := membersUpTo("x", data, 2, fence.ErrTooLarge)
		want, refErr := refMembers(data, 2)
		if kind(err) != kind(refErr) {
			t.Fatalf("members of %q: %v, reference: %v", data, err, refErr)
		}
		if err == nil && !slices.EqualFunc(got, want, func(a, b member) bool { return a.name == b.name && string(a.value) == string(b.value) }) {
			t.Fatalf("members of %q: %q, reference: %q", data, got, want)
		}
		if len(data) > 0 && data[0] == '[' && json.Valid(data) {
			es, err := elements("x", data, 2)
			want, refErr := refElements(data, 2)
			if kind(err) != kind(refErr) {
				t.Fatalf("elements of %q: %v, reference: %v", data, err, refErr)
			}
			if err == nil && !slices.EqualFunc(es, want, func(a, b json.RawMessage) bool { return string(a) == string(b) }) {
				t.Fatalf("elements of %q: %q, reference: %q", data, es, want)
			}
		}
	})
}

// refMembers reads the members of the object in data with a json.Decoder,
// at most limit of them (more: fence.ErrTooLarge), refusing duplicates and
// anything after the object.
func refMembers(data []byte, limit int) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("%w: not an object (%v)", fence.ErrBadRequest, err)
	}
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", fence.ErrBadRequest, err)
		}
		name := tok.(string)
		if len(ms) == limit {
			return nil, fence.ErrTooLarge
		}
		for _, m := range ms {
			if m.name == name {
				return nil, fmt.Errorf("%w: duplicate", fence.ErrBadRequest)
			}
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%w: %v", fence.ErrBadRequest, err)
		}
		ms = append(ms, member{name, bytes.TrimSpace(v)})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%w: %v", fence.ErrBadRequest, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the object", fence.ErrBadRequest)
	}
	return ms, nil
}

// refElements reads the elements of the array in data with a json.Decoder,
// at most limit of them (more: fence.ErrTooLarge).
func refElements(data []byte, limit int) ([]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%w: %v", fence.ErrBadRequest, err)
	}
	var es []json.RawMessage
	for dec.More() {
		if len(es) == limit {
			return nil, fence.ErrTooLarge
		}
		var e json.RawMessage
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("%w: %v", fence.ErrBadRequest, err)
		}
		es = append(es, bytes.TrimSpace(e))
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%w: %v", fence.ErrBadRequest, err)
	}
	return es, nil
}

func FuzzDecodeRevoke(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"grace_ms":1000}`, `{"grace_ms":9}`, `{"grace_ms":"5"}`, `{"grace_ms":1e3}`, `{"x":1}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		grace, err := decodeRevoke(data)
		if err != nil {
			checkKinds(t, err, fence.ErrBadRequest)
			return
		}
		if grace != 0 && (grace < fence.MinTTL || grace > fence.MaxTTL) || grace%time.Millisecond != 0 {
			t.Fatalf("accepted grace %s", grace)
		}
	})
}
