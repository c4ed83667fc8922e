// Package lock is fence's lock service: TTL leases on named resources, blocking
// acquires served first come, first served, and a fencing token per grant,
// recorded in a fence.Ledger before the grant is acknowledged.
//
// While it runs, the Service is the authority on who holds what, and lease
// expiry follows the process's monotonic clock. The ledger is the durable
// record: on Open, every lease that had not expired by the wall clock is
// restored with its full TTL from that moment, so a restart never shortens a
// lease (it may lengthen one by up to its TTL, which costs waiting, not safety).
//
// A lease belongs to the principal that took it, fence.OwnerOf the acquire's
// ctx (the HTTP server puts the authenticated caller there). An acquire of
// the same holder, a renew or a release on behalf of another principal gets
// fence.ErrForbidden and changes nothing; a lease handed to a waiter is the
// waiter's principal's. The owner is recorded in the ledger with the lease,
// so a restored lease is checked as before. A lease without an owner
// (without authentication, or recorded before owners were) is not checked.
//
// It is not a distributed lock: one Service owns a ledger at a time.
package lock
