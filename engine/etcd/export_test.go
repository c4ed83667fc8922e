package etcd

import "github.com/fence-lock/fence/state"

// Internals exported to the tests in package etcd_test.

// SetCommits sets the number of commits of epoch that s knows confirmed:
// lower than it is, as if their answers had been lost, its next Commit is
// sent as the first of them again.
func SetCommits(s *Store, epoch state.Epoch, n uint64) {
	s.mu.Lock()
	s.commits[epoch] = n
	s.mu.Unlock()
}

// EndSession ends the session that keeps t's lease alive, as lost
// keepalives do, and leaves the lease to expire unless t keeps it.
func EndSession(t state.Term) {
	tm := t.(*term)
	tm.mu.Lock()
	sess := tm.sess
	tm.mu.Unlock()
	sess.Orphan()
}
