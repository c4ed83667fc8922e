package testserver

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
)

// ConditionalHeaders are the headers of HTTP's conditional requests that
// object stores take on writes: what DropHeaders drops by default.
var ConditionalHeaders = []string{"If-Match", "If-None-Match"}

// DropHeaders starts a proxy on loopback to target (a URL; only its scheme
// and host count) that forwards every request without headers (default:
// ConditionalHeaders), and returns target with the proxy's host: a store
// that ignores them, the negative control of a check that they are
// honoured. It is closed when tb ends.
func DropHeaders(tb testing.TB, target string, headers ...string) string {
	tb.Helper()
	if len(headers) == 0 {
		headers = ConditionalHeaders
	}
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, h := range headers {
			r.Header.Del(h)
		}
		rp.ServeHTTP(w, r)
	}))
	tb.Cleanup(srv.Close)
	p, _ := url.Parse(srv.URL)
	u.Host = p.Host
	return u.String()
}
