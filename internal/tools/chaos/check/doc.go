// Package check judges the history of a chaos run (package history): it says
// whether fence kept its promises while clients paused, the server was killed
// and the network misbehaved, and names the operations that show it did not.
//
// Check runs six checkers over one history:
//
//   - token-order: per resource, acknowledged writes in revision order never
//     go down in token (a stale holder was never accepted after a newer one);
//   - stale-accepted: no write was acknowledged with a token below one that
//     was already acknowledged for its resource, by a write or a grant, when
//     the write was invoked (Jepsen's "stale write" in real time);
//   - token-monotonic: grants of a resource, in real-time order, have strictly
//     increasing tokens; a token is never granted to two clients, nor again
//     after its release;
//   - lost-writes: every acknowledged write is still in the final value of its
//     key, or was overwritten by a later revision;
//   - linearizable: the reads, writes, transactions and grants, partitioned by
//     resource, are linearizable with respect to a model of fenced storage,
//     where an ambiguous write may or may not have applied. The search is
//     porcupine's, made to take memory linear in a resource's history
//     (search.go); porcupine itself draws the visualisation of a failure;
//   - lease-exclusive (with Options.TTL): no grant returned while another
//     client's lease, at least a TTL from its acquire's call, could still
//     run unreleased (and not given up by its holder for a newer hold of
//     the resource: a downgrade): no lease ended early for its holder, whatever a
//     server's clock did. The holders of a shared group hold at once (one
//     token), but no exclusive lease beside any of them; and a semaphore
//     never has more permits held, across its slots, than its limit (the
//     one cross-resource check, counted in the first pass); and a refused
//     multi-acquire holds none of its resources (its client's probes).
//
// Every checker judges each resource on its own, a txn in each resource it
// writes, so the history is judged one resource at a time: Check takes one
// in memory, and CheckFile one in a file, which it reads in passes and never
// holds whole, so that a long run is checked in memory that grows with the
// largest resource's history, not with the run's.
//
// Check expects what package chaos produces against fence's built-in store:
// every request a client sent is in the history (one still in flight when its
// client died must be recorded with an unknown outcome, or its effect looks
// like a write from nowhere); the keys start absent; and a grant raises the
// resource's fence before it is acknowledged, so a grant's token counts
// against later writes as an accepted write's does. With
// Options.FenceOnWrite it expects a guard's storage instead, whose fence
// only accepted writes raise.
//
// It is not a harness: it neither runs clients nor injects faults, and it
// trusts the timestamps it is given (one clock for all processes). It does
// not check the atomicity of a transaction across resources. Lease
// exclusivity is checked from the server's side only: a client paused past
// its TTL still believes it holds the lock, which no TTL lease can prevent,
// and fencing is what keeps the data safe then.
package check
