// Package history is the record of a chaos run: one JSON line per operation
// that a client (or the harness itself) invoked against fence, and one per fault
// that the harness injected.
//
// Clients print Ops as they go; the harness appends them, as they arrive,
// and the Faults it injects, through a Writer to one file, which package
// check judges in passes through a Reader, without holding it in memory
// (Read holds a whole history, for small ones). The format is the contract between the two: every timestamp is in
// nanoseconds since the run's start on one clock shared by all processes, and
// an Op's Outcome says whether its effect is definitely in (OK), definitely out
// (Fenced, Rejected, Fail) or unknown (Unknown).
//
// This package only records and parses. It does not run clients, inject faults
// or judge a history: that is package chaos and package check.
package history
