package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/wire"
)

// WriteProblem answers err as a problem of the API, with the status, code
// and members of the error's entry in wire.Codes, as the Handler does.
func WriteProblem(w http.ResponseWriter, err error) { writeProblem(w, err, "") }

// writeProblem answers err as a problem. It adds Retry-After to lock_held and
// rate_limited, and Allow (from allow) to method_not_allowed.
func writeProblem(w http.ResponseWriter, err error, allow string) wire.Body {
	p := wire.NewBody(err)
	h := w.Header()
	h.Set("Content-Type", wire.ProblemContentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	var he *fence.LockHeldError
	if errors.As(err, &he) {
		h.Set("Retry-After", wire.RetryAfterHeader(he.RetryAfter))
	}
	var re *wire.RateLimitedError
	if errors.As(err, &re) {
		h.Set("Retry-After", wire.RetryAfterHeader(re.RetryAfter))
	}
	if p.Code == "unauthorized" {
		h.Add("WWW-Authenticate", `Bearer realm="fence"`)
	}
	if p.Code == "method_not_allowed" && allow != "" {
		h.Set("Allow", allow)
	}
	b, mErr := json.Marshal(p)
	if mErr != nil { // cannot happen: every member is a string or a number
		b = []byte(`{"type":"` + wire.ProblemTypeBase + `internal","title":"Internal server error","status":500,"detail":"` + wire.InternalDetail + `","code":"internal"}`)
	}
	w.WriteHeader(p.Status)
	w.Write(append(b, '\n'))
	return p
}
