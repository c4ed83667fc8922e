// Package chaos is the harness behind `fence chaos`: client processes that
// run a read-modify-write workload under fencing tokens, faults injected on
// a schedule drawn from a seed (SIGSTOP of a client between its acquire and
// its write, kill -9 and restart of the server, network faults through a
// proxy), a history of every operation, and the checker's verdict on it.
//
// It is a test tool, not part of the service. Its --unsafe mode runs the same
// workload against a store that does not check fences, to show that the
// checker sees the bug fencing prevents.
package chaos
