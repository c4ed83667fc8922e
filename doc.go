// Package fence is the domain of the fence lock service: fencing tokens, leases,
// resource and key names, the errors every layer returns, and the small interfaces
// through which the lock service and fenced storage are reached.
//
// A lease tells a client that it probably owns a resource; a fencing token lets
// the storage prove that it still does. Every grant of a lock issues a token that
// is strictly greater than every token issued before for that resource. Storage
// accepts a write only when its token is at least the resource's last fence, and
// raises the fence to it, so a holder that paused past its lease is rejected with
// ErrFenced instead of overwriting a newer holder's data.
//
// This package does no I/O and imports only the standard library; Session
// keeps a lease alive over any Locker. The rest of the module, by role
// (docs/DESIGN.md draws the tree):
//
//   - rules: state (every operation's rule, written once over a small Tx, and
//     the group commit); lock (the lock service: TTLs, waiters, expiry);
//     watch (the event hub).
//   - engines, where the state lives: engine/journal (embedded, the default),
//     engine/journal/vfs its file system, engine/etcd and engine/postgres
//     (several servers sharing a replicated engine), engine/memory (tests),
//     engine/bolt (older data directories).
//   - guards, the fencing rule inside the user's own store: guard/postgres,
//     guard/redis, guard/etcd, guard/zookeeper, guard/dynamodb, guard/s3
//     and guard/azblob (over guard/object, the rule of object stores),
//     guard/sqlguard (database/sql: PostgreSQL, MySQL, MariaDB), and
//     guard/reject (their log line and metric). A guard links none of the
//     engines or the server.
//   - transport: httpapi (the v1 HTTP API's server side), wire (what server
//     and clients share), sse, auth, ui (the dashboard); server (a whole
//     server from a Config).
//   - clients: client (Go); clients/python and clients/typescript.
//   - proof: fencetest (conformance suites), model (the Spin model), e2e.
//   - tools: cmd/fence (the binary) and internal/tools (chaos, bench, demo,
//     report, enginebench, semabench, testserver); internal/support holds the server's
//     leaf utilities and internal/admin fence migrate and fence bump.
package fence
