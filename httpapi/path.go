package httpapi

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/fence-lock/fence"
)

// route is one path pattern of the API: the methods it answers, and how.
type route struct {
	pattern string            // as in the API, e.g. "/v1/kv/{resource}/{key}"; the metrics label
	methods []string          // the methods it answers, HEAD included where GET is
	allow   string            // methods joined for the Allow header
	local   bool              // answered by every server itself, never forwarded to the leader
	exempt  bool              // not rate limited
	browser bool              // loaded by browsers: a 401 also challenges for HTTP Basic
	by      map[string]method // how each method is answered
}

// method is how a route answers one method.
type method struct {
	// access says how Server.Auth is asked, with perm: on the request's
	// resource, once for any valid credentials, or not at all.
	access access
	perm   string
	// op is the storage write the request is (put, delete, claim, txn);
	// "" for the others.
	op string
	// serve answers the request.
	serve func(*Server, *call, match) error
}

// access is how a route is authorised.
type access int

const (
	onResource    access = iota // a caller with perm on the resource
	anyValid                    // any authenticated caller: the handler filters or checks per resource
	open                        // no credentials needed
	metricsAccess               // a caller with admin on every resource if Server.ProtectMetrics, else open
)

// Permissions that Caller.Allowed is asked for.
const (
	permLock  = "lock"
	permWrite = "write"
	permRead  = "read"
	permAdmin = "admin"
)

// read is how GET and HEAD are answered by serve, with access and perm.
func read(a access, perm string, serve func(*Server, *call, match) error) map[string]method {
	m := method{access: a, perm: perm, serve: serve}
	return map[string]method{"GET": m, "HEAD": m}
}

func newRoute(pattern string, by map[string]method) *route {
	rt := &route{pattern: pattern, by: by}
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "DELETE"} {
		if _, ok := by[m]; ok {
			rt.methods = append(rt.methods, m)
		}
	}
	rt.allow = strings.Join(rt.methods, ", ")
	return rt
}

// localRoute returns a route that every server answers itself.
func localRoute(pattern string, by map[string]method) *route {
	rt := newRoute(pattern, by)
	rt.local = true
	return rt
}

// allows reports whether rt answers method.
func (rt *route) allows(method string) bool {
	_, ok := rt.by[method]
	return ok
}

// The routes of the API: routes is the one table that the server
// dispatches from; matchPath finds a path's route in it.
var (
	routeHealthz = exemptRoute(localRoute("/healthz", read(open, "", (*Server).health)))
	routeReadyz  = exemptRoute(localRoute("/readyz", read(open, "", (*Server).ready)))
	routeMetrics = localRoute("/metrics", read(metricsAccess, permAdmin, (*Server).serveMetrics))
	routeCluster = localRoute("/v1/cluster", read(anyValid, permRead, (*Server).cluster))
	routeKeys    = localRoute("/v1/keys", read(open, "", (*Server).keys))
	routeOpenAPI = localRoute("/v1/openapi.json", read(open, "", (*Server).openAPI))
	// The dashboard's files: any valid credentials may load them; what
	// they show comes from the API, filtered by the caller's grants.
	routeUI      = browserRoute(localRoute("/ui/{file}", read(anyValid, permRead, (*Server).ui)))
	routeLocks   = newRoute("/v1/locks", read(anyValid, permRead, (*Server).listLocks))
	routeLock    = newRoute("/v1/locks/{resource}", read(onResource, permRead, (*Server).lockStatus))
	routeAcquire = newRoute("/v1/locks/{resource}/acquire", map[string]method{"POST": {perm: permLock, serve: (*Server).acquire}})
	routeRenew   = newRoute("/v1/locks/{resource}/renew", map[string]method{"POST": {perm: permLock, serve: (*Server).renew}})
	routeRelease = newRoute("/v1/locks/{resource}/release", map[string]method{"POST": {perm: permLock, serve: (*Server).release}})
	routeRevoke  = newRoute("/v1/locks/{resource}/revoke", map[string]method{"POST": {perm: permAdmin, serve: (*Server).revoke}})
	routeWatch   = newRoute("/v1/watch", map[string]method{"GET": {access: anyValid, perm: permRead, serve: (*Server).watch}})
	routeKV      = newRoute("/v1/kv/{resource}/{key}", map[string]method{
		"GET":    {perm: permRead, serve: (*Server).get},
		"HEAD":   {perm: permRead, serve: (*Server).get},
		"PUT":    {perm: permWrite, op: "put", serve: (*Server).put},
		"DELETE": {perm: permWrite, op: "delete", serve: (*Server).delete},
	})
	routeFences = newRoute("/v1/fences/{resource}", map[string]method{
		"GET":  {perm: permRead, serve: (*Server).fence},
		"HEAD": {perm: permRead, serve: (*Server).fence},
		"POST": {perm: permWrite, op: "claim", serve: (*Server).claim},
	})
	// A txn is authorised per resource in its handler, after decoding.
	routeTxn = newRoute("/v1/txn", map[string]method{"POST": {access: anyValid, perm: permWrite, op: "txn", serve: (*Server).txn}})

	routes = []*route{
		routeHealthz, routeReadyz, routeMetrics, routeCluster, routeKeys, routeOpenAPI, routeUI,
		routeLocks, routeLock, routeAcquire, routeRenew, routeRelease, routeRevoke, routeWatch,
		routeKV, routeFences, routeTxn,
	}
)

// browserRoute marks rt as loaded by browsers.
func browserRoute(rt *route) *route {
	rt.browser = true
	return rt
}

// exemptRoute exempts rt from rate limiting.
func exemptRoute(rt *route) *route {
	rt.exempt = true
	return rt
}

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
	case "v1/openapi.json":
		return match{route: routeOpenAPI}, true
	case "v1/cluster":
		return match{route: routeCluster}, true
	case "v1/locks":
		return match{route: routeLocks}, true
	case "v1/watch":
		return match{route: routeWatch}, true
	}
	if rest == "ui" {
		return match{route: routeUI}, true
	}
	if file, ok := strings.CutPrefix(rest, "ui/"); ok {
		return match{route: routeUI, key: file}, true
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
	if strings.Contains(m.route.pattern, "{key}") {
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
