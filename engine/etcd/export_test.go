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

// CommitsVia returns the endpoint that s sends commits through, "" while
// it sends them through the balanced client.
func CommitsVia(s *Store) string {
	s.route.mu.Lock()
	defer s.route.mu.Unlock()
	if s.route.leader == nil {
		return ""
	}
	return s.route.leader.addr
}
