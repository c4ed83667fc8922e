// Package chaos is the harness behind `fence chaos`: client processes that
// run a read-modify-write workload under fencing tokens, faults injected on
// a schedule drawn from a seed (SIGSTOP of a client between its acquire and
// its write, kill -9 and restart of the server, network faults through a
// proxy), a history of every operation, and the checker's verdict on it.
// The history goes to a file as the operations arrive (Config.History), for
// package check to judge in passes: a run holds none of it in memory.
// Config.Progress receives a snapshot of the run every second or so
// (operations, errors and faults so far), for a progress line.
//
// The system under test is one fence server, embedded or at Config.Addr
// (http or https, with a bearer token and client certificates), or with
// Config.Guard fence's PostgreSQL guard: the clients take their leases from
// fence and write to a PostgreSQL database through the guard.
//
// With Config.Cluster it starts, itself, a cluster to test (internal/tools/testserver's
// 3-member etcd, or PostgreSQL with a synchronous standby, and three `fence
// serve --store` on it, all on loopback), pins each client to one server,
// and adds the cluster's faults: kill -9 and SIGSTOP of the leading server,
// a crash of the engine's leader (a failover, on PostgreSQL), and network
// faults between the servers and the engine through proxies.
//
// It is a test tool, not part of the service. Its --unsafe mode runs the same
// workload against a store that does not check fences, and --unsafe-epoch
// runs a cluster whose servers skip the writer-epoch check, to show that the
// checker sees the bugs that fencing and the epoch prevent.
package chaos
