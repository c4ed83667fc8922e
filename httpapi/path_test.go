package httpapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/wire"
)

func TestMatchPath(t *testing.T) {
	tests := []struct {
		path     string
		pattern  string // of the route matched; "": no match
		resource string
		key      string
		err      error
	}{
		{"/healthz", "/healthz", "", "", nil},
		{"/readyz", "/readyz", "", "", nil},
		{"/metrics", "/metrics", "", "", nil},
		{"/v1/txn", "/v1/txn", "", "", nil},
		{"/v1/locks/orders", "/v1/locks/{resource}", "orders", "", nil},
		{"/v1/locks/orders/acquire", "/v1/locks/{resource}/acquire", "orders", "", nil},
		{"/v1/locks/orders/renew", "/v1/locks/{resource}/renew", "orders", "", nil},
		{"/v1/locks/orders/release", "/v1/locks/{resource}/release", "orders", "", nil},
		{"/v1/locks/orders/revoke", "/v1/locks/{resource}/revoke", "orders", "", nil},
		{"/v1/locks/orders%2F17/revoke", "/v1/locks/{resource}/revoke", "orders/17", "", nil},
		{"/v1/locks/orders%2F17/acquire", "/v1/locks/{resource}/acquire", "orders/17", "", nil},
		{"/v1/locks/%C3%A9t%C3%A9", "/v1/locks/{resource}", "été", "", nil},
		{"/v1/locks/a%20b", "/v1/locks/{resource}", "a b", "", nil},
		{"/v1/locks/a+b", "/v1/locks/{resource}", "a+b", "", nil},
		{"/v1/locks/..", "/v1/locks/{resource}", "..", "", nil},
		{"/v1/kv/orders/o-1", "/v1/kv/{resource}/{key}", "orders", "o-1", nil},
		{"/v1/kv/orders%2F17/a/b/c", "/v1/kv/{resource}/{key}", "orders/17", "a/b/c", nil},
		{"/v1/kv/orders/a%2Fb", "/v1/kv/{resource}/{key}", "orders", "a/b", nil},
		{"/v1/kv/orders/%E2%82%AC", "/v1/kv/{resource}/{key}", "orders", "€", nil},
		{"/v1/fences/orders", "/v1/fences/{resource}", "orders", "", nil},
		{"/v1/fences/orders%2F17", "/v1/fences/{resource}", "orders/17", "", nil},

		{"/v1/locks//acquire", "/v1/locks/{resource}/acquire", "", "", fence.ErrBadRequest},
		{"/v1/locks/%ZZ", "/v1/locks/{resource}", "", "", fence.ErrBadRequest},
		{"/v1/locks/a%", "/v1/locks/{resource}", "", "", fence.ErrBadRequest},
		{"/v1/locks/a%00b", "/v1/locks/{resource}", "", "", fence.ErrBadRequest},
		{"/v1/locks/%FF", "/v1/locks/{resource}", "", "", fence.ErrBadRequest},
		{"/v1/kv/r/", "/v1/kv/{resource}/{key}", "", "", fence.ErrBadRequest},
		{"/v1/kv/r/a//b", "/v1/kv/{resource}/{key}", "", "", fence.ErrBadRequest},
		{"/v1/kv/r/a/./b", "/v1/kv/{resource}/{key}", "", "", fence.ErrBadRequest},
		{"/v1/kv/r/a/../b", "/v1/kv/{resource}/{key}", "", "", fence.ErrBadRequest},
		{"/v1/kv/r/..", "/v1/kv/{resource}/{key}", "", "", fence.ErrBadRequest},
		{"/v1/kv/r/a%2F%2Fb", "/v1/kv/{resource}/{key}", "", "", fence.ErrBadRequest},
		{"/v1/kv/r/a%2F..", "/v1/kv/{resource}/{key}", "", "", fence.ErrBadRequest},
		{"/v1/kv//k", "/v1/kv/{resource}/{key}", "", "", fence.ErrBadRequest},
		{"/v1/kv/r/%G0", "/v1/kv/{resource}/{key}", "", "", fence.ErrBadRequest},

		{"", "", "", "", nil},
		{"/", "", "", "", nil},
		{"*", "", "", "", nil},
		{"healthz", "", "", "", nil},
		{"/healthz/", "", "", "", nil},
		{"//healthz", "", "", "", nil},
		{"/HEALTHZ", "", "", "", nil},
		{"/v1", "", "", "", nil},
		{"/v1/", "", "", "", nil},
		{"/v1/txn/", "", "", "", nil},
		{"/v1/locks", "/v1/locks", "", "", nil},
		{"/v1/locks/", "/v1/locks/{resource}", "", "", fence.ErrBadRequest},
		{"/v1/locks/r/acquire/", "", "", "", nil},
		{"/v1/locks/r/steal", "", "", "", nil},
		{"/v1/locks/r/ACQUIRE", "", "", "", nil},
		{"/v1/kv", "", "", "", nil},
		{"/v1/kv/r", "", "", "", nil},
		{"/v1/fences", "/v1/fences", "", "", nil},
		{"/v1/fences/", "/v1/fences/{resource}", "", "", fence.ErrBadRequest},
		{"/v1/fences/r/x", "", "", "", nil},
		{"/v2/locks/r", "", "", "", nil},
		{"/v1//locks/r", "", "", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			m, ok := matchPath(tt.path)
			if tt.pattern == "" {
				if ok {
					t.Fatalf("matched %s, want no match", m.route.Pattern)
				}
				return
			}
			if !ok || m.route.Pattern != tt.pattern {
				t.Fatalf("ok=%v route=%v, want %s", ok, m.route, tt.pattern)
			}
			res, key, err := m.params()
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err=%v, want %v", err, tt.err)
				}
				return
			}
			if err != nil || res != tt.resource || key != tt.key {
				t.Fatalf("params()=%q, %q, %v; want %q, %q", res, key, err, tt.resource, tt.key)
			}
		})
	}
}

// TestRoutesTable checks that every route of the table is matched by the
// path that the client builds for each of its operations (wire.Op.Path),
// with the same names back, and that every operation has a handler, and
// every operation ID is unique.
func TestRoutesTable(t *testing.T) {
	seen := map[string]bool{}
	ids := map[string]bool{}
	for _, rt := range routes {
		if seen[rt.Pattern] {
			t.Errorf("%s is in the table twice", rt.Pattern)
		}
		seen[rt.Pattern] = true
		for _, op := range rt.Ops {
			if ids[op.ID] {
				t.Errorf("operation %s is in the table twice", op.ID)
			}
			ids[op.ID] = true
			if op.Route != rt.Route {
				t.Errorf("%s: Route is %v, not its row", op.ID, op.Route)
			}
			if rt.by[op.Method].serve == nil {
				t.Errorf("%s %s has no handler", op.Method, rt.Pattern)
			}
			p := op.Path("orders/17", "a/b c/€")
			m, ok := matchPath(p)
			if !ok || m.route != rt {
				t.Errorf("%s: matchPath(%q) = %v, %v", op.ID, p, m.route, ok)
				continue
			}
			res, key, err := m.params()
			wantRes, wantKey := "", ""
			if strings.Contains(rt.Pattern, "{resource}") {
				wantRes = "orders/17"
			}
			if strings.Contains(rt.Pattern, "{key}") {
				wantKey = "a/b c/€"
			}
			if err != nil || res != wantRes || key != wantKey {
				t.Errorf("%s: %q gives %q, %q, %v", op.ID, p, res, key, err)
			}
		}
	}
}

// TestBindRoutes_NoHandler checks that an operation without a handler
// stops the server from starting rather than answering nothing.
func TestBindRoutes_NoHandler(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("bindRoutes accepted an operation without a handler")
		}
	}()
	bindRoutes([]*wire.Route{{Pattern: "/v1/new", Ops: []*wire.Op{{ID: "newOp", Method: "POST"}}}})
}

// TestServeMuxCleansPaths shows why the server matches paths itself: Go's
// http.ServeMux cleans a path before matching it, redirecting the valid
// resource name ".." (and a key with an empty segment) to another path.
// When a release of Go stops doing so, this fails: ServeMux's patterns
// could then replace matchPath.
func TestServeMuxCleansPaths(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/locks/{resource}", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("PUT /v1/kv/{resource}/{key...}", func(w http.ResponseWriter, r *http.Request) {})
	for _, tt := range []struct{ method, path string }{
		{"GET", "/v1/locks/.."},
		{"PUT", "/v1/kv/r/a//b"},
	} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(tt.method, tt.path, nil))
		if w.Code < 300 || w.Code > 399 {
			t.Errorf("%s %s: ServeMux answered %d, not a redirect: it may no longer clean paths", tt.method, tt.path, w.Code)
		}
	}
	if m, ok := matchPath("/v1/locks/.."); !ok || m.route.Pattern != "/v1/locks/{resource}" {
		t.Errorf("matchPath(/v1/locks/..) = %v, %v", m.route, ok)
	}
}
