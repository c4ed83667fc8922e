package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/wire"
)

// fencingToken returns the request's Fencing-Token. An absent or empty header
// wraps fence.ErrFenceRequired; a malformed token, or more than one header,
// wraps fence.ErrInvalidToken.
func fencingToken(h http.Header) (fence.Token, error) {
	vs := h.Values(wire.TokenHeader)
	switch {
	case len(vs) == 0 || len(vs) == 1 && vs[0] == "":
		return 0, fmt.Errorf("%w: no %s header", fence.ErrFenceRequired, wire.TokenHeader)
	case len(vs) > 1:
		return 0, fmt.Errorf("%w: %d %s headers, want one", fence.ErrInvalidToken, len(vs), wire.TokenHeader)
	}
	return fence.ParseToken(vs[0])
}

// cond returns the precondition of a write from its If-Match and
// If-None-Match headers. A malformed header, more than one of a kind, or both
// at once, wraps fence.ErrBadRequest.
func cond(h http.Header) (fence.Cond, error) {
	im, inm := h.Values("If-Match"), h.Values("If-None-Match")
	switch {
	case len(im) > 1 || len(inm) > 1:
		return fence.Cond{}, badRequest("more than one If-Match or If-None-Match header")
	case len(im) == 1 && len(inm) == 1:
		return fence.Cond{}, badRequest("If-Match and If-None-Match together")
	case len(im) == 1:
		return parseIfMatch(im[0])
	case len(inm) == 1:
		if inm[0] != "*" {
			return fence.Cond{}, badRequest("If-None-Match must be *, not %q", inm[0])
		}
		return fence.Cond{IfAbsent: true}, nil
	}
	return fence.Cond{}, nil
}

// parseIfMatch parses an If-Match value: a strong entity tag holding a
// revision, "\"7\"" (no leading zero, 1..2^63-1), or "*" (the key must
// exist). Lists, weak tags and anything else wrap fence.ErrBadRequest.
func parseIfMatch(v string) (fence.Cond, error) {
	if v == "*" {
		return fence.Cond{IfExists: true}, nil
	}
	if len(v) < 3 || v[0] != '"' || v[len(v)-1] != '"' {
		return fence.Cond{}, badRequest("If-Match must be \"<revision>\" or *, not %q", v)
	}
	rev, ok := parseRev(v[1 : len(v)-1])
	if !ok {
		return fence.Cond{}, badRequest("If-Match %q does not hold a revision", v)
	}
	return fence.Cond{IfMatch: rev}, nil
}

// parseRev parses a decimal revision in 1..2^63-1 without sign or leading zero.
func parseRev(s string) (fence.Rev, bool) {
	if s == "" || s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > math.MaxInt64 {
		return 0, false
	}
	return fence.Rev(n), true
}
