// Package history is the record of a chaos run: one JSON line per operation
// that a client (or the harness itself) invoked against fence, and one per fault
// that the harness injected.
//
// Clients append Ops through a Writer as they go; the harness merges the
// clients' files and hands them to Read, whose result is what package check
// judges. The format is the contract between the two: every timestamp is in
// nanoseconds since the run's start on one clock shared by all processes, and
// an Op's Outcome says whether its effect is definitely in (OK), definitely out
// (Fenced, Rejected, Fail) or unknown (Unknown).
//
// This package only records and parses. It does not run clients, inject faults
// or judge a history: that is package chaos and package check.
package history
