// Package server builds a whole fence server from a Config: the store (the
// embedded journal in a directory, or a replicated engine several servers
// share), the
// lock service on it, and the v1 HTTP API on both. fence serve, fence demo,
// the chaos harness and the tests all build their servers here, so they run
// exactly what users run.
//
// It is an http.Handler, not a network server: the caller listens, sets
// timeouts and TLS, and calls Drain and Close at shutdown.
package server
