package httpapi

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/wire"
)

// route is one route of wire.Routes as the server answers it.
type route struct {
	*wire.Route
	segs    []string          // the pattern's segments after the first '/'
	methods []string          // the methods it answers, in the table's order
	allow   string            // methods joined for the Allow header
	by      map[string]method // how each method is answered
}

// method is how a route answers one method: its operation and handler.
type method struct {
	*wire.Op
	handler
}

// routes are wire.Routes with their handlers, in the table's order.
var routes = bindRoutes(wire.Routes)

// bindRoutes binds every operation of table to its handler, and panics if
// one has none: a row without a handler is a bug that no request may find.
func bindRoutes(table []*wire.Route) []*route {
	rs := make([]*route, len(table))
	for i, wr := range table {
		rt := &route{Route: wr, segs: strings.Split(strings.TrimPrefix(wr.Pattern, "/"), "/"), by: map[string]method{}}
		for _, op := range wr.Ops {
			h, ok := handlers[op]
			if !ok && op.Method == "HEAD" {
				for _, get := range wr.Ops {
					if get.Method == "GET" {
						h, ok = handlers[get]
					}
				}
			}
			if !ok || h.serve == nil {
				panic(fmt.Sprintf("httpapi: %s %s (%s) has no handler", op.Method, wr.Pattern, op.ID))
			}
			rt.methods = append(rt.methods, op.Method)
			rt.by[op.Method] = method{Op: op, handler: h}
		}
		rt.allow = strings.Join(rt.methods, ", ")
		rs[i] = rt
	}
	return rs
}

// allows reports whether rt answers method.
func (rt *route) allows(method string) bool {
	_, ok := rt.by[method]
	return ok
}

// unmatched is the route label of paths that match no route.
const unmatched = "unmatched"

// match is a path matched to a route, with its parameters still escaped.
type match struct {
	route    *route
	resource string // the escaped {resource} segment
	key      string // the escaped {key} or {file} rest, '/' included
}

// matchPath matches an escaped URL path (r.URL.EscapedPath()) to a route of
// the table. It looks only at the path's shape, so that an unknown path is
// 404 and a wrong method 405 whatever the parameters hold. It does not use
// http.ServeMux, which cleans paths and redirects: ".." and "." are resource
// names like any other here (TestServeMuxCleansPaths), and a key with an
// empty or dot segment is refused, not redirected to another key.
func matchPath(p string) (match, bool) {
	rest, ok := strings.CutPrefix(p, "/")
	if !ok {
		return match{}, false
	}
	for _, rt := range routes {
		if m, ok := rt.match(rest); ok {
			return m, true
		}
	}
	return match{}, false
}

// match matches p, a path without its first '/', to rt's pattern: a
// literal segment matches itself, {resource} any one segment, and a last
// {key} the rest of the path (one or more segments) or {file} the rest, or
// nothing.
func (rt *route) match(p string) (match, bool) {
	m := match{route: rt}
	for i, seg := range rt.segs {
		last := i == len(rt.segs)-1
		if seg == "{key}" || seg == "{file}" {
			m.key = p
			return m, true
		}
		var s string
		var more bool
		s, p, more = strings.Cut(p, "/")
		if seg == "{resource}" {
			m.resource = s
		} else if s != seg {
			return match{}, false
		}
		if !last && !more {
			// The path ends before the pattern: only a {file} may be absent.
			if rt.segs[i+1] == "{file}" {
				return m, true
			}
			return match{}, false
		}
		if last && more {
			return match{}, false
		}
	}
	return m, true
}

// params decodes and validates the matched resource and key. It returns an
// error wrapping fence.ErrBadRequest for bad percent-encoding or a name that
// fence.ValidateResource or fence.ValidateKey rejects.
func (m match) params() (resource, key string, err error) {
	if strings.Contains(m.route.Pattern, "{resource}") {
		resource, err = unescape("resource", m.resource)
		if err != nil {
			return "", "", err
		}
		if err := fence.ValidateResource(resource); err != nil {
			return "", "", err
		}
	}
	if strings.Contains(m.route.Pattern, "{key}") {
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
