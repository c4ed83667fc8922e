// Package redis is a fencing guard for Redis: it enforces fence's fencing
// tokens inside the user's own Redis (a single server, with or without
// Sentinel, or Redis Cluster), atomically with the user's own writes, so that fencing protects
// data that never passes through fence's storage.
//
// A Guard keeps, per resource, a fence key, FenceKey(resource) =
// "fence:{resource}", holding the resource's last fence as a decimal string.
// Guard.Apply runs one Lua script, in one round trip (EVALSHA; EVAL once
// when the server's script cache lacks it), that
//
//  1. reads the fence key and refuses the write if the presented token is
//     lower (the comparison is exact for every token up to fence.MaxToken:
//     digit strings, by length and then digit by digit, never Lua's doubles);
//  2. checks every op against the keys as the ops before it leave them:
//     compare-and-set values, key types, INCRBY's integer and its range;
//  3. only then raises the fence to the token and applies the ops, in order.
//
// The guarantee: an Apply with token t for a resource is applied iff, when
// Redis runs the script, t >= the resource's last fence (a resource never
// fenced has last fence 0) and every op's check holds; then the fence becomes
// t, and the fence and all the ops change in one atomic step (no other
// command runs in between, and nothing is written before every check has
// passed). Equal tokens are accepted, so a holder can retry. A lower token
// returns *fence.FencedError (errors.Is(err, fence.ErrFenced)) and changes
// nothing; a failed compare-and-set returns an error wrapping
// fence.ErrPreconditionFailed and changes nothing, not even the fence. Only
// those definite refusals are returned as such: an error after the script may
// have been sent (a timeout, a dropped connection, a cancelled context) is
// returned wrapped as it is, and the write may or may not have been applied.
// The guard never lets go-redis resend the script after such an error, so a
// write is never applied twice by the guard.
//
// Redis Cluster runs a script only when all its keys are in one hash slot. A
// resource's fence key carries the hash tag {resource}; Key(resource, name)
// builds data keys with the same tag. Apply computes every key's slot as
// Redis does (CRC16 of the hash tag) and, before sending anything, rejects a
// key outside the fence key's slot with *CrossSlotError
// (errors.Is(err, ErrCrossSlot)) naming the key. The rule is enforced on a
// single server too, so code that works there works on a cluster.
//
// What it is not: it issues no tokens (the lock service does) and checks only
// token >= last fence, not that a lock service issued the token; it guards
// only writes made through Apply (a plain SET on the same keys is not fenced);
// an Apply fences one resource; durability is Redis's own (with appendonly
// and appendfsync always an acknowledged write survives a crash of the
// server; with the defaults it may not, and after a failover to a replica
// that missed it, a fence may go back, as any Redis write may); ops are SET,
// DEL, HSET, INCRBY and compare-and-set, not reads or arbitrary commands. It
// does not log: it returns errors.
package redis
