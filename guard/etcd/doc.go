// Package etcd is a fencing guard for etcd: it enforces fence's fencing
// tokens inside the user's own etcd cluster, atomically with the user's own
// puts and deletes, so that fencing protects data that never passes through
// fence's storage.
//
// A Guard keeps, per resource, a fence key (under Guard.Prefix, default
// DefaultPrefix) holding the resource's last fence. Guard.Apply sends one etcd
// transaction, in one round trip, that
//
//	if the fence key exists and holds a token greater than the presented one:
//		reads the fence key (the write is rejected)
//	else:
//		sets the fence key to the presented token and applies the user's ops
//
// The guarantee: an Apply with token t for a resource is applied iff, at the
// revision at which etcd applies it, t >= the resource's last fence (a
// resource never fenced has last fence 0); then the fence becomes t, and the
// ops and the fence change in one etcd revision, all or nothing. Equal tokens
// are accepted, so a holder can retry. A lower token returns
// *fence.FencedError (errors.Is(err, fence.ErrFenced)) whose LastFence was
// read in the same transaction, and changes nothing. Only that definite
// refusal returns ErrFenced: an error after the request may have been sent (a
// context deadline, a lost connection) is returned wrapped as it is, and the
// write may or may not have been applied. The guard is as durable and as
// linearizable as etcd's own transactions.
//
// The fence key's value is the token as 20 ASCII decimal digits, zero padded
// ("00000000000000000042" for 42): fixed width, so that etcd's byte-wise value
// comparison is numeric order, and readable with etcdctl. The key is Prefix
// followed by the resource name escaped with url.PathEscape, so that a '/' in
// a name cannot make two resources share a key.
//
// What it is not: it issues no tokens (the lock service does) and checks
// only token >= last fence, not that a lock service issued the token; it
// guards only writes made through Apply (a plain Put on the same keys is not
// fenced); a transaction fences one resource; ops may be puts and deletes,
// not gets or nested transactions, and must not touch keys under Prefix. It
// does not log: it returns errors.
package etcd
