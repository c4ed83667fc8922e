package httpapi

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/fence-lock/fence"
)

// route is one path pattern of the API and the methods it answers.
type route struct {
	pattern string   // as in the API, e.g. "/v1/kv/{resource}/{key}"; the metrics label
	methods []string // the methods it answers, HEAD included where GET is
	allow   string   // methods joined for the Allow header
	local   bool     // answered by every server itself, never forwarded to the leader
}

func newRoute(pattern string, methods ...string) *route {
	return &route{pattern: pattern, methods: methods, allow: strings.Join(methods, ", ")}
}

// localRoute returns a route that every server answers itself.
func localRoute(pattern string, methods ...string) *route {
	rt := newRoute(pattern, methods...)
	rt.local = true
	return rt
}

// allows reports whether rt answers method.
func (rt *route) allows(method string) bool {
	for _, m := range rt.methods {
		if m == method {
			return true
		}
	}
	return false
}

// The routes of the API.
var (
	routeHealthz = localRoute("/healthz", "GET", "HEAD")
	routeReadyz  = localRoute("/readyz", "GET", "HEAD")
	routeMetrics = localRoute("/metrics", "GET", "HEAD")
	routeCluster = localRoute("/v1/cluster", "GET", "HEAD")
	routeLocks   = newRoute("/v1/locks", "GET", "HEAD")
	routeLock    = newRoute("/v1/locks/{resource}", "GET", "HEAD")
	routeAcquire = newRoute("/v1/locks/{resource}/acquire", "POST")
	routeRenew   = newRoute("/v1/locks/{resource}/renew", "POST")
	routeRelease = newRoute("/v1/locks/{resource}/release", "POST")
	routeRevoke  = newRoute("/v1/locks/{resource}/revoke", "POST")
	routeKV      = newRoute("/v1/kv/{resource}/{key}", "GET", "HEAD", "PUT", "DELETE")
	routeFences  = newRoute("/v1/fences/{resource}", "GET", "HEAD", "POST")
	routeTxn     = newRoute("/v1/txn", "POST")
	routeKeys    = localRoute("/v1/keys", "GET", "HEAD")
	routeWatch   = newRoute("/v1/watch", "GET")
)

// unmatched is the route label of paths that match no route.
const unmatched = "unmatched"

// match is a path matched to a route, with its parameters still escaped.
type match struct {
	route    *route
	resource string // the escaped {resource} segment
	key      string // the escaped {key...} rest, '/' included
}

// matchPath matches an escaped URL path (r.URL.EscapedPath()) to a route. It
// looks only at the path's shape, so that an unknown path is 404 and a wrong
// method 405 whatever the parameters hold. Unlike http.ServeMux it neither
// cleans nor redirects: "//", "." and ".." are parameters like any other.
func matchPath(p string) (match, bool) {
	rest, ok := strings.CutPrefix(p, "/")
	if !ok {
		return match{}, false
	}
	switch rest {
	case "healthz":
		return match{route: routeHealthz}, true
	case "readyz":
		return match{route: routeReadyz}, true
	case "metrics":
		return match{route: routeMetrics}, true
	case "v1/txn":
		return match{route: routeTxn}, true
	case "v1/keys":
		return match{route: routeKeys}, true
	case "v1/cluster":
		return match{route: routeCluster}, true
	case "v1/locks":
		return match{route: routeLocks}, true
	case "v1/watch":
		return match{route: routeWatch}, true
	}
	rest, ok = strings.CutPrefix(rest, "v1/")
	if !ok {
		return match{}, false
	}
	coll, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return match{}, false
	}
	res, rest, more := strings.Cut(rest, "/")
	switch coll {
	case "locks":
		if !more {
			return match{route: routeLock, resource: res}, true
		}
		switch rest {
		case "acquire":
			return match{route: routeAcquire, resource: res}, true
		case "renew":
			return match{route: routeRenew, resource: res}, true
		case "release":
			return match{route: routeRelease, resource: res}, true
		case "revoke":
			return match{route: routeRevoke, resource: res}, true
		}
	case "kv":
		if more {
			return match{route: routeKV, resource: res, key: rest}, true
		}
	case "fences":
		if !more {
			return match{route: routeFences, resource: res}, true
		}
	}
	return match{}, false
}

// params decodes and validates the matched resource and key. It returns an
// error wrapping fence.ErrBadRequest for bad percent-encoding or a name that
// fence.ValidateResource or fence.ValidateKey rejects.
func (m match) params() (resource, key string, err error) {
	if strings.Contains(m.route.pattern, "{resource}") {
		resource, err = unescape("resource", m.resource)
		if err != nil {
			return "", "", err
		}
		if err := fence.ValidateResource(resource); err != nil {
			return "", "", err
		}
	}
	if m.route == routeKV {
		key, err = unescape("key", m.key)
		if err != nil {
			return "", "", err
		}
		if err := fence.ValidateKey(key); err != nil {
			return "", "", err
		}
	}
	return resource, key, nil
}

func unescape(what, s string) (string, error) {
	u, err := url.PathUnescape(s)
	if err != nil {
		return "", fmt.Errorf("%w: %s %q is not percent-encoded correctly", fence.ErrBadRequest, what, s)
	}
	return u, nil
}
