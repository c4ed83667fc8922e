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
// It is not a distributed lock: one Service owns a ledger at a time.
package lock
