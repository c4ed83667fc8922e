// Package demo is the engine of `fence demo`: the stale-holder story of
// DESIGN.md, run for real against a fence server, twice.
//
// In each run, holder A acquires a lock with a short TTL and then pauses (a
// stop-the-world GC, swap, a partition: it simply stops renewing and sleeps
// past its TTL). The lock service lets the lease expire and grants the lock to
// B, with the next fencing token; B writes. A wakes up, still believing it
// holds the lock, and writes with its old token. The locks always come from
// fence; only the storage differs:
//
//   - the unsafe run writes to a last-writer-wins key-value store, a tiny HTTP
//     server on a loopback port that accepts the same requests as fence's
//     storage but ignores their Fencing-Token: A's stale value wins;
//   - the fenced run writes to fence's own storage, which answers A with 409
//     fenced (presented N, last_fence N+1): B's value stands.
//
// Run does the work and returns a Result holding every step as an Event, with
// its measured time offset, and each run's Outcome. Result.WriteText renders
// the timeline for people, Result.WriteMermaid as a Mermaid sequenceDiagram;
// the JSON encoding of a Result is the machine-readable form. Server runs an
// embedded fence server in a temporary directory, for a demo that needs no
// set-up.
//
// The package is not a test harness or a benchmark: it runs the story once
// per run, with real sleeps as long as the TTL, and judges only the outcome.
package demo
