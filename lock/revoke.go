package lock

import (
	"context"
	"fmt"
	"time"

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
	holders := []string{""} // a Revoked event for each holder: a shared group's, or the lease's one
	if e.lease != nil {
		holder, holders = e.lease.Holder, []string{e.lease.Holder}
		if e.lease.Shared {
			holders = holdersLocked(e)
		}
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
	for _, h := range holders {
		s.Events.Publish(watch.Event{Type: watch.Revoked, Resource: resource, Holder: h, Token: revoked, LastFence: lastFence, Shared: h != holder})
	}
	s.Events.Publish(watch.Event{Type: watch.FenceRaised, Resource: resource, Token: lastFence, LastFence: lastFence})
	// The grant to the first waiter is a second ledger change, not part of
	// a Handoff: a revoke ends whatever lease is recorded and issues a token
	// to nobody first, which Handoff, ending one lease by its token, does
	// not. A revoke is rare, and a crash between the two changes leaves the
	// resource fenced and free.
	s.handOffLocked(resource, e, changeNone)
	return fence.RevokeResult{Resource: resource, Revoked: revoked, LastFence: lastFence}, nil
}

var _ fence.RevokeRequester = (*Service)(nil)

// RequestRevoke implements fence.RevokeRequester: the request is recorded,
// logged ("revoke requested"), counted in fence_lock_revoke_requests_total
// and published as a RevokeAsked event; the lease (and, for a shared
// group, every hold in it) carries RevokeAt from now on, which its
// holder's renewals return. At the deadline the lease, if it still holds,
// is revoked as by Revoke. It returns the lease asked: for a shared group,
// the group's (Holder "").
func (s *Service) RequestRevoke(ctx context.Context, resource string, grace time.Duration) (fence.Lease, fence.RevokeResult, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return fence.Lease{}, fence.RevokeResult{}, fmt.Errorf("lock: revoke: %w", err)
	}
	if grace < fence.MinTTL || grace > fence.MaxTTL {
		return fence.Lease{}, fence.RevokeResult{}, fmt.Errorf("lock: revoke: %w: grace %s is outside %s..%s", fence.ErrBadRequest, grace, fence.MinTTL, fence.MaxTTL)
	}
	e, err := s.enter("revoke", resource)
	if err != nil {
		return fence.Lease{}, fence.RevokeResult{}, err
	}
	now := s.now()
	s.expireLocked(resource, e, now)
	if e.lease == nil {
		// Nobody to ask: the revoke is due now.
		res, err := s.revokeLocked(ctx, resource, e)
		s.leave(resource, e)
		return fence.Lease{}, res, err
	}
	defer s.leave(resource, e)
	at := now.Add(grace)
	if r := e.lease.RevokeAt; !r.IsZero() && !at.Before(r) {
		return *e.lease, fence.RevokeResult{}, nil // asked already, by an earlier deadline
	}
	if err := s.ledger.RequestRevoke(ctx, resource, e.lease.Token, grace); err != nil {
		return fence.Lease{}, fence.RevokeResult{}, fmt.Errorf("lock: revoke %q: %w", resource, err)
	}
	s.askLocked(resource, e, at, grace)
	revokeRequestsTotal.Inc()
	s.Logger.Info("revoke requested", "resource", resource, "holder", e.lease.Holder, "token", uint64(e.lease.Token),
		"grace_ms", grace.Milliseconds(), "revoke_at", at.UTC().Format(time.RFC3339Nano))
	holders := []string{e.lease.Holder}
	if e.lease.Shared {
		holders = holdersLocked(e)
	}
	for _, h := range holders {
		s.Events.Publish(watch.Event{Type: watch.RevokeAsked, Resource: resource, Holder: h, Token: e.lease.Token, ExpiresAt: at})
	}
	return *e.lease, fence.RevokeResult{}, nil
}

// askLocked records in memory that the resource's lease is to be revoked
// at at, and arms the revoke.
func (s *Service) askLocked(resource string, e *entry, at time.Time, grace time.Duration) {
	e.lease.RevokeAt, e.lease.RevokeGrace = at, grace
	if !e.lease.Session.IsZero() {
		s.askedInSession(*e.lease, at)
	}
	for _, m := range e.shared {
		m.RevokeAt, m.RevokeGrace = at, grace
	}
	if e.revokeTimer != nil {
		e.revokeTimer.Stop()
	}
	token := e.lease.Token
	e.revokeTimer = time.AfterFunc(at.Sub(s.now()), func() { s.revokeDue(resource, token) })
}

// revokeDue runs at the deadline of a revoke requested of the lease with
// token: if it still holds the resource, it is revoked. A revoke that fails
// is tried again a second later.
func (s *Service) revokeDue(resource string, token fence.Token) {
	e, err := s.ref(resource)
	if err != nil {
		return // closed
	}
	if s.lockEntry(e) != nil {
		s.unref(resource, e)
		return // closed
	}
	if e.lease == nil || e.lease.Token != token || e.lease.RevokeAt.IsZero() || s.now().Before(e.lease.RevokeAt) {
		s.leave(resource, e)
		return // let go in time, or the deadline moved
	}
	res, err := s.revokeLocked(s.ctx, resource, e)
	if err != nil {
		s.Logger.Error("revoking at the deadline of a revoke requested failed", "resource", resource, "token", uint64(token), "error", err)
		e.revokeTimer = time.AfterFunc(time.Second, func() { s.revokeDue(resource, token) })
	}
	s.leave(resource, e)
	if err == nil && res.Revoked != 0 && fence.IsSessionResource(resource) {
		s.endSession(fence.SessionRef{Resource: resource, Token: res.Revoked}, true)
	}
}
