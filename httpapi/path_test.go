package httpapi

import (
	"errors"
	"strings"
	"testing"

	"github.com/fence-lock/fence"
)

func TestMatchPath(t *testing.T) {
	tests := []struct {
		path     string
		route    *route // nil: no match
		resource string
		key      string
		err      error
	}{
		{"/healthz", routeHealthz, "", "", nil},
		{"/readyz", routeReadyz, "", "", nil},
		{"/metrics", routeMetrics, "", "", nil},
		{"/v1/txn", routeTxn, "", "", nil},
		{"/v1/locks/orders", routeLock, "orders", "", nil},
		{"/v1/locks/orders/acquire", routeAcquire, "orders", "", nil},
		{"/v1/locks/orders/renew", routeRenew, "orders", "", nil},
		{"/v1/locks/orders/release", routeRelease, "orders", "", nil},
		{"/v1/locks/orders/revoke", routeRevoke, "orders", "", nil},
		{"/v1/locks/orders%2F17/revoke", routeRevoke, "orders/17", "", nil},
		{"/v1/locks/orders%2F17/acquire", routeAcquire, "orders/17", "", nil},
		{"/v1/locks/%C3%A9t%C3%A9", routeLock, "été", "", nil},
		{"/v1/locks/a%20b", routeLock, "a b", "", nil},
		{"/v1/locks/a+b", routeLock, "a+b", "", nil},
		{"/v1/locks/..", routeLock, "..", "", nil},
		{"/v1/kv/orders/o-1", routeKV, "orders", "o-1", nil},
		{"/v1/kv/orders%2F17/a/b/c", routeKV, "orders/17", "a/b/c", nil},
		{"/v1/kv/orders/a%2Fb", routeKV, "orders", "a/b", nil},
		{"/v1/kv/orders/%E2%82%AC", routeKV, "orders", "€", nil},
		{"/v1/fences/orders", routeFences, "orders", "", nil},
		{"/v1/fences/orders%2F17", routeFences, "orders/17", "", nil},

		{"/v1/locks//acquire", routeAcquire, "", "", fence.ErrBadRequest},
		{"/v1/locks/%ZZ", routeLock, "", "", fence.ErrBadRequest},
		{"/v1/locks/a%", routeLock, "", "", fence.ErrBadRequest},
		{"/v1/locks/a%00b", routeLock, "", "", fence.ErrBadRequest},
		{"/v1/locks/%FF", routeLock, "", "", fence.ErrBadRequest},
		{"/v1/kv/r/", routeKV, "", "", fence.ErrBadRequest},
		{"/v1/kv/r/a//b", routeKV, "", "", fence.ErrBadRequest},
		{"/v1/kv/r/a/./b", routeKV, "", "", fence.ErrBadRequest},
		{"/v1/kv/r/a/../b", routeKV, "", "", fence.ErrBadRequest},
		{"/v1/kv/r/..", routeKV, "", "", fence.ErrBadRequest},
		{"/v1/kv/r/a%2F%2Fb", routeKV, "", "", fence.ErrBadRequest},
		{"/v1/kv/r/a%2F..", routeKV, "", "", fence.ErrBadRequest},
		{"/v1/kv//k", routeKV, "", "", fence.ErrBadRequest},
		{"/v1/kv/r/%G0", routeKV, "", "", fence.ErrBadRequest},

		{"", nil, "", "", nil},
		{"/", nil, "", "", nil},
		{"*", nil, "", "", nil},
		{"healthz", nil, "", "", nil},
		{"/healthz/", nil, "", "", nil},
		{"//healthz", nil, "", "", nil},
		{"/HEALTHZ", nil, "", "", nil},
		{"/v1", nil, "", "", nil},
		{"/v1/", nil, "", "", nil},
		{"/v1/txn/", nil, "", "", nil},
		{"/v1/locks", routeLocks, "", "", nil},
		{"/v1/locks/", routeLock, "", "", fence.ErrBadRequest},
		{"/v1/locks/r/acquire/", nil, "", "", nil},
		{"/v1/locks/r/steal", nil, "", "", nil},
		{"/v1/locks/r/ACQUIRE", nil, "", "", nil},
		{"/v1/kv", nil, "", "", nil},
		{"/v1/kv/r", nil, "", "", nil},
		{"/v1/fences", nil, "", "", nil},
		{"/v1/fences/r/x", nil, "", "", nil},
		{"/v2/locks/r", nil, "", "", nil},
		{"/v1//locks/r", nil, "", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			m, ok := matchPath(tt.path)
			if tt.route == nil {
				if ok {
					t.Fatalf("matched %s, want no match", m.route.pattern)
				}
				return
			}
			if !ok || m.route != tt.route {
				t.Fatalf("ok=%v route=%v, want %s", ok, m.route, tt.route.pattern)
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

// TestRoutesTable checks that every route of the table is matched by its
// own pattern and answers each of its methods.
func TestRoutesTable(t *testing.T) {
	seen := map[string]bool{}
	for _, rt := range routes {
		p := strings.NewReplacer("{resource}", "r", "{key}", "k/1").Replace(rt.pattern)
		m, ok := matchPath(p)
		if !ok || m.route != rt {
			t.Errorf("%s: matchPath(%q) = %v, %v", rt.pattern, p, m.route, ok)
		}
		if seen[rt.pattern] {
			t.Errorf("%s is in the table twice", rt.pattern)
		}
		seen[rt.pattern] = true
		for _, method := range rt.methods {
			if h := rt.by[method]; h.serve == nil {
				t.Errorf("%s %s has no handler", method, rt.pattern)
			}
		}
	}
}
