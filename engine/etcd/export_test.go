package etcd

import "github.com/fence-lock/fence/state"

// Internals exported to the tests in package etcd_test.

// EndSession ends the session that keeps t's lease alive, as lost
// keepalives do, and leaves the lease to expire unless t keeps it.
func EndSession(t state.Term) {
	tm := t.(*term)
	tm.mu.Lock()
	sess := tm.sess
	tm.mu.Unlock()
	sess.Orphan()
}
