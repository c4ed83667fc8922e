package httpapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/fence-lock/fence"
)

// crossOrigin is net/http's protection against cross-site request forgery:
// a request other than a read (GET, HEAD, OPTIONS) that a browser sends for
// a page of another origin (its Sec-Fetch-Site, or else its Origin against
// its Host, says so) is refused. Clients that are not browsers send neither
// header, and pass.
var crossOrigin = http.NewCrossOriginProtection()

// refuseCrossSite refuses what a page of another origin could make a
// browser send with the credentials it keeps for fence: the dashboard's
// HTTP Basic password or a client certificate, which a browser attaches on
// its own. A cross-origin change is forbidden; and since a browser sends
// Basic credentials to every route of the origin, they are accepted only
// for reads, the dashboard's, and never for a change, whatever its origin.
func (s *Handler) refuseCrossSite(r *http.Request) error {
	if err := crossOrigin.Check(r); err != nil {
		return fmt.Errorf("%w: %v: a page of another origin may not make a browser change fence's state", fence.ErrForbidden, err)
	}
	if s.Authenticate != nil && !safeMethod(r.Method) && isBasic(r.Header.Get("Authorization")) {
		return fmt.Errorf("%w: HTTP Basic credentials are accepted for reads only (the dashboard's), since a browser sends them on its own: send Authorization: Bearer TOKEN", fence.ErrUnauthorized)
	}
	return nil
}

func safeMethod(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

func isBasic(authorization string) bool {
	scheme, _, _ := strings.Cut(authorization, " ")
	return strings.EqualFold(scheme, "Basic")
}
