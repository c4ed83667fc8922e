// Package testserver starts real replicated servers for fence's tests and
// for `fence chaos --cluster`: an n-member etcd cluster from Debian's
// etcd-server binary (StartEtcd), and a PostgreSQL primary with a
// synchronous streaming standby from Debian's postgresql binaries
// (StartPostgres), and a standalone ZooKeeper from Debian's zookeeper
// package (StartZooKeeper), and DynamoDB Local from a pinned npm package
// (StartDynamoDB), and MariaDB from Debian's mariadb-server (StartMariaDB), and
// SeaweedFS's S3 gateway from its weed binary, built once per machine from a
// pinned module version (StartSeaweedFS, SeaweedFSBinary), and Azurite's blob
// service from a pinned npm package (StartAzurite). Every server is its own OS process, in a directory the
// caller gives, listening on free ports on 127.0.0.1 and nowhere else, with
// the production durability settings (fsync on). Members and nodes can be
// killed (SIGKILL), restarted on the same data and ports, paused (SIGSTOP)
// and resumed, to inject crash and pause faults.
//
// Servers never outlive the process that started them: every child is
// started from one goroutine locked to its OS thread for the life of the
// process, with a parent-death signal (SIGKILL), so that the kernel kills the
// servers when that process dies, however it dies (a test timeout, kill -9).
// PostgreSQL's own children are not ours and have no such signal: they exit
// when they see their postmaster die, and while they are paused (stopped, so
// they cannot see it) a small /bin/sh watchdog holds their pids and kills
// them if this process dies. The package keeps one goroutine for the life of
// the process (the spawner), started by the first call that starts a server.
//
// It is a test tool, not part of the service: it runs on Linux only, it is
// not tuned for performance, and it does not repair replication after a
// failover (a promoted standby runs alone; restarting the old primary gives
// two primaries). Where the binaries are missing, the Start functions return
// an error wrapping ErrNotInstalled, and Require turns that into a skip.
package testserver
