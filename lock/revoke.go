package lock

import (
	"context"
	"fmt"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/watch"
)

// Revoke implements fence.Revoker: it ends the current lease, if any, and
// raises the resource's fence to a new token issued to nobody, so that the
// old holder is fenced at once; then waiters are served as after a release.
// A lock-delay in progress ends too, since the old holder is fenced. A revoke
// is logged ("lock revoked") and counted in fence_lock_revocations_total.
// A revoke of a session's resource revokes every lease in the session too.
func (s *Service) Revoke(ctx context.Context, resource string) (fence.RevokeResult, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return fence.RevokeResult{}, fmt.Errorf("lock: revoke: %w", err)
	}
	e, err := s.enter("revoke", resource)
	if err != nil {
		return fence.RevokeResult{}, err
	}
	res, err := s.revokeLocked(ctx, resource, e)
	s.leave(resource, e)
	if err == nil && res.Revoked != 0 && fence.IsSessionResource(resource) {
		s.endSession(fence.SessionRef{Resource: resource, Token: res.Revoked}, true)
	}
	return res, err
}

// revokeLocked is Revoke on the locked entry e.
func (s *Service) revokeLocked(ctx context.Context, resource string, e *entry) (fence.RevokeResult, error) {
	if e.lease != nil && !s.now().Before(e.lease.Expires) {
		// Expired, not noticed yet. No hand-off here: it would grant the
		// first waiter a lease that this revoke would then take away. The
		// revoke ends the recorded lease anyway, and hands off after.
		l := *e.lease
		s.clearLeaseLocked(e)
		expirationsTotal.Inc()
		s.record(changeExpired, l, l.Token)
	}
	var holder string
	if e.lease != nil {
		holder = e.lease.Holder
	}
	lastFence, revoked, err := s.ledger.Revoke(ctx, resource)
	if err != nil {
		// The lease stays in memory: if the ledger did record the revoke,
		// the old holder is fenced anyway, and a retry revokes again.
		return fence.RevokeResult{}, fmt.Errorf("lock: revoke %q: %w", resource, err)
	}
	if e.lease != nil {
		s.clearLeaseLocked(e)
	}
	clearDelayLocked(e)
	revocationsTotal.Inc()
	s.Logger.Info("lock revoked", "resource", resource, "holder", holder,
		"token", uint64(revoked), "last_fence", uint64(lastFence))
	s.Events.Publish(watch.Event{Type: watch.Revoked, Resource: resource, Holder: holder, Token: revoked, LastFence: lastFence})
	s.Events.Publish(watch.Event{Type: watch.FenceRaised, Resource: resource, Token: lastFence, LastFence: lastFence})
	// The grant to the first waiter is a second ledger change, not part of
	// a Handoff: a revoke ends whatever lease is recorded and issues a token
	// to nobody first, which Handoff, ending one lease by its token, does
	// not. A revoke is rare, and a crash between the two changes leaves the
	// resource fenced and free.
	s.handOffLocked(resource, e, changeNone)
	return fence.RevokeResult{Resource: resource, Revoked: revoked, LastFence: lastFence}, nil
}
