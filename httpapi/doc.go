// Package httpapi serves the fence v1 HTTP API (docs/API.md) over a
// fence.Locker and a fence.Store; package client is its Go client, and
// package wire the format both speak.
//
// Handler is an http.Handler with its own router, bound to wire.Routes, the
// API's one table of operations, paths, methods and permissions that the
// client builds its requests from and docs/openapi.yaml is checked against.
// It answers every error,
// including unknown paths and wrong methods, as application/problem+json
// (RFC 9457) with a stable "code" member, from the one table of codes in
// package wire, whose ProblemError turns a problem body back into the typed
// fence errors, so that errors.Is(err, fence.ErrFenced) and errors.As work
// the same over HTTP as in process.
//
// The server parses and validates requests strictly (exact JSON member
// names, no duplicates, no unknown members, integer tokens) before it calls
// the Locker or the Store, so a rejected request never reaches a mutating
// method. It logs one line per accepted storage write and one per rejected
// request, and exports Prometheus metrics (see metrics.go).
//
// Its files, by job: server.go is the Handler (admission, errors, the
// response), path.go matches a path to its route, the handlers live by part
// of the API (meta.go, locks.go, kv.go, fences.go, txn.go, watch.go), each
// file with its share of the binding of operations to handlers and the
// decoders of its bodies, handler.go joins those shares, jsonstrict.go is
// the strict JSON reader the decoders share, and routes.go lists the routes
// for the documents' tests. forward.go
// hands a standby's requests to the leader with their matched operation,
// nethttpanswers.go and tlslistener.go rewrite net/http's own answers as
// problems, and middleware.go is the guard for the user's own handlers. The
// others are a job each, named by the file: headers, problems, rate limits,
// slots, metrics, log sampling, cross-origin checks, the answers of a server
// still starting.
//
// The package is not the lock service or the storage: it holds no state of
// its own besides metrics, and it does not log lock events, which the lock
// service logs.
package httpapi
