// Package zookeeper is a fencing guard for Apache ZooKeeper: it enforces
// fence's fencing tokens inside the user's own ZooKeeper ensemble, atomically
// with the user's own creates, sets and deletes of znodes, so that fencing
// protects data that never passes through fence's storage. It uses
// github.com/go-zookeeper/zk; a *zk.Conn is a Conn.
//
// A Guard keeps, per resource, one fence znode under Guard.Root (default
// DefaultRoot, "/fence/fences", created on first use) whose data is the
// resource's last fence in ASCII decimal ("42"). Guard.Apply reads the fence
// znode, and if the presented token is not below it, sends one multi that
//
//	sets the fence znode to the token, if its data version is still the one read
//	    (only checks that version, if the token equals the fence;
//	    creates the fence znode, if there was none)
//	and applies the user's ops
//
// The guarantee: the user's ops and the fence check are one atomic ZooKeeper
// multi, all or nothing. An Apply with token t for a resource is applied iff,
// when ZooKeeper commits the multi, t >= the resource's last fence (a
// resource never fenced has last fence 0); then the fence becomes t. The
// version check makes this hold against every other writer of the same
// fence znode through this guard: if another writer raised the fence between
// the read and the multi, the multi fails as a whole with a version conflict,
// and Apply reads the fence again and retries (at most Guard.MaxAttempts
// times; then ErrContended, nothing applied). Writes through the guard are
// linearizable, as ZooKeeper's writes are: per resource, accepted writes
// commit in order of non-decreasing token. Equal tokens are accepted, so a
// holder can retry. A lower token returns *fence.FencedError
// (errors.Is(err, fence.ErrFenced)) and changes nothing. Only that definite
// refusal returns ErrFenced: an error after the multi may have been sent (a
// context deadline, a lost connection) is returned wrapped as it is, and the
// write may or may not have been applied. The guard is as durable as
// ZooKeeper's own multi.
//
// The cost: one read of the fence znode and one multi round trip per write,
// and one more of each per lost race. The multi holds len(ops)+1
// operations, within ZooKeeper's request size limit (jute.maxbuffer, 1 MiB
// by default).
//
// The fence znode's name is the resource name escaped by EscapeName, since
// ZooKeeper forbids '/' in a name, refuses the names "." and "..", reserves
// "zookeeper" at the top of the tree, and refuses some characters: every
// byte other than an ASCII letter, digit, '-', '_', '.' or '~' becomes '%'
// and two hex digits ("a/b" is "a%2Fb"), and the first byte of "." ".." and
// "zookeeper" is escaped too ("%2E", "%2E.", "%7Aookeeper"). UnescapeName
// reverses it, and distinct resources never share a znode.
//
// Tokens come from fence, never from ZooKeeper's sequential znodes: a
// sequential suffix is the parent's child counter, a signed 32-bit integer
// that wraps to negative after 2^31 creations (so its order breaks), that
// counts per parent znode and starts again if the parent is recreated, while
// fence's tokens are 63-bit, strictly increasing per resource, and issued by
// the lock service whose holders the guard fences.
//
// What it is not: it issues no tokens (the lock service does) and checks
// only token >= last fence, not that a lock service issued the token (set
// Guard.Keys for that); writes made without the guard (a plain Set on the
// same znodes) are not fenced, and no one but the guard may write under
// Root; reads through the guard are not fenced (Fence, and the user's own
// Gets, are plain ZooKeeper reads, sequentially consistent: a server may
// answer from slightly behind the leader); ZooKeeper's sessions and
// ephemeral znodes are not used to hold locks or fences (an ephemeral znode
// created by an op goes with its session, like any other); a multi fences
// one resource. It does not log: it returns errors, and records rejections
// in Guard.Rejections.
package zookeeper
