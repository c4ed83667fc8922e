// Package fence is the domain of the fence lock service: fencing tokens, leases,
// resource and key names, the errors every layer returns, and the small interfaces
// through which the lock service and fenced storage are reached.
//
// A lease tells a client that it probably owns a resource; a fencing token lets
// the storage prove that it still does. Every grant of a lock issues a token that
// is strictly greater than every token issued before for that resource. Storage
// accepts a write only when its token is at least the resource's last fence, and
// raises the fence to it, so a holder that paused past its lease is rejected with
// ErrFenced instead of overwriting a newer holder's data.
//
// This package does no I/O. Session keeps a lease alive over any Locker.
// Implementations live in sub-packages: lock (the lock service), bolt (durable
// state on local disk), memory (the same in memory), httpapi (the v1 HTTP API:
// server, client and the RequireFence middleware), client (the Go client),
// postgres, redis and etcd (guards that enforce tokens inside those stores),
// and fencetest (conformance suites).
package fence
