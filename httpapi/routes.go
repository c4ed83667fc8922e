package httpapi

import (
	"slices"

	"github.com/fence-lock/fence/wire"
)

// Route is one route of the API as the server answers it, for tests and tools
// that compare the server with its documents (docs/openapi.yaml).
type Route struct {
	// Pattern is the path as the API writes it, "/v1/kv/{resource}/{key}":
	// {resource} is one escaped segment, {key} the rest of the path.
	Pattern string
	// Methods are the methods it answers, HEAD included where GET is; any
	// other is 405 method_not_allowed.
	Methods []string
	// Local reports whether every server answers it itself, never
	// forwarding it to the leader.
	Local bool
	// Exempt reports whether it is exempt from rate limits (never 429).
	Exempt bool
}

// Routes returns the routes of the API as the server answers them, in the
// order of wire.Routes.
func Routes() []Route {
	rs := make([]Route, len(routes))
	for i, rt := range routes {
		rs[i] = Route{Pattern: rt.Pattern, Methods: slices.Clone(rt.methods), Local: rt.Local, Exempt: rt.Exempt}
	}
	return rs
}

// ProblemCodes returns every problem code the server may answer, in the
// API's order of precedence (the order of wire.Codes).
func ProblemCodes() []string {
	cs := make([]string, len(wire.Codes))
	for i, c := range wire.Codes {
		cs[i] = c.Code
	}
	return cs
}
