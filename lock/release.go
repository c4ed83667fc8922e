package lock

import (
	"context"
	"fmt"
	"time"

	"github.com/fence-lock/fence"
)

// Renew implements fence.Locker: only the lease's owner, fence.OwnerOf(ctx),
// may renew it.
//
// A lease in a session is renewed by renewing the session, which renews
// every lease in it: its own renew is refused.
func (s *Service) Renew(ctx context.Context, resource string, token fence.Token, ttl time.Duration) (fence.Lease, error) {
	if err := validateLease(resource, token, ttl); err != nil {
		return fence.Lease{}, fmt.Errorf("lock: renew: %w", err)
	}
	e, err := s.enter("renew", resource)
	if err != nil {
		return fence.Lease{}, err
	}
	l, err := s.renewLocked(ctx, resource, e, token, ttl)
	s.leave(resource, e)
	if err == nil && fence.IsSessionResource(resource) {
		s.syncSession(fence.SessionRef{Resource: resource, Token: token})
	}
	return l, err
}

// renewLocked is Renew on the locked entry e.
func (s *Service) renewLocked(ctx context.Context, resource string, e *entry, token fence.Token, ttl time.Duration) (fence.Lease, error) {
	now := s.now()
	s.expireLocked(resource, e, now)
	if err := leaseLostLocked(resource, e, token); err != nil {
		return fence.Lease{}, err
	}
	if e.lease.Shared {
		return fence.Lease{}, sharedNeedsHolder("renew", resource, e)
	}
	if err := s.forbiddenLocked("renew", resource, e, fence.OwnerOf(ctx)); err != nil {
		return fence.Lease{}, err
	}
	if ref := e.lease.Session; !ref.IsZero() {
		return fence.Lease{}, fmt.Errorf("lock: renew %q: %w: the lease is in session %q: renew the session", resource, fence.ErrBadRequest, ref.Resource)
	}
	return s.refreshLocked(ctx, resource, e, ttl, now, changeRenewed)
}

// Release implements fence.Locker: only the lease's owner, fence.OwnerOf(ctx),
// may release it. Releasing a session's resource releases every lease in
// the session too, before it returns.
func (s *Service) Release(ctx context.Context, resource string, token fence.Token) error {
	if err := validateLease(resource, token, 0); err != nil {
		return fmt.Errorf("lock: release: %w", err)
	}
	e, err := s.enter("release", resource)
	if err != nil {
		return err
	}
	err = s.releaseLocked(ctx, resource, e, token)
	s.leave(resource, e)
	if err == nil && fence.IsSessionResource(resource) {
		s.endSession(fence.SessionRef{Resource: resource, Token: token}, false)
	}
	return err
}

// releaseLocked is Release on the locked entry e.
func (s *Service) releaseLocked(ctx context.Context, resource string, e *entry, token fence.Token) error {
	s.expireLocked(resource, e, s.now())
	if err := leaseLostLocked(resource, e, token); err != nil {
		return err
	}
	if e.lease.Shared {
		return sharedNeedsHolder("release", resource, e)
	}
	if err := s.forbiddenLocked("release", resource, e, fence.OwnerOf(ctx)); err != nil {
		return err
	}
	// One ledger change ends the lease and grants the first waiter, if any.
	abandoned, err := s.passLocked(ctx, resource, e, changeReleased)
	if err != nil {
		// Still held, and the first waiter still waits: the holder may
		// retry the release.
		return fmt.Errorf("lock: release %q: %w", resource, err)
	}
	releasesTotal.Inc()
	if abandoned {
		s.handOffLocked(resource, e, changeAbandoned)
	}
	return nil
}

// sharedNeedsHolder is the refusal of op on a shared group's token without
// a holder's name: the token is the group's, and names none of them.
func sharedNeedsHolder(op, resource string, e *entry) error {
	return fmt.Errorf("lock: %s %q: %w: token %d is a shared group's, held by %d holders: name the holder", op, resource, fence.ErrBadRequest, e.lease.Token, len(e.shared))
}

func (s *Service) heldErrorLocked(resource string, e *entry, now time.Time) error {
	rejectionsTotal.WithLabelValues("lock_held").Inc()
	var retry time.Duration
	switch {
	case e.lease != nil:
		retry = e.lease.Expires.Sub(now)
	case s.delayedLocked(e, now):
		retry = e.delayUntil.Sub(now)
	}
	return &fence.LockHeldError{Resource: resource, RetryAfter: retry}
}

func leaseLostLocked(resource string, e *entry, token fence.Token) error {
	if e.lease != nil && e.lease.Token == token {
		return nil
	}
	rejectionsTotal.WithLabelValues("lease_lost").Inc()
	err := &fence.LeaseLostError{Resource: resource, Presented: token}
	if e.lease != nil {
		err.Current = e.lease.Token
	}
	return err
}

// forbiddenLocked returns an error wrapping fence.ErrForbidden, for the
// request op, if the resource's lease belongs to a principal other than
// owner; nil if it is owner's, or has no owner (taken without
// authentication, or recorded before owners were: anyone may renew or
// release it).
func (s *Service) forbiddenLocked(op, resource string, e *entry, owner string) error {
	if owns(*e.lease, owner) {
		return nil
	}
	return s.forbidden(op, resource, *e.lease, owner)
}

// owns reports whether a call on behalf of owner may use lease l: l is
// owner's, or has no owner.
func owns(l fence.Lease, owner string) bool { return l.Owner == "" || l.Owner == owner }

// forbidden counts and returns the refusal of op on lease l to owner. The
// error names neither l's owner nor its token: the caller may know neither.
// It is not logged here: the API logs its rejections, with the caller, in a
// budget that a flood cannot exceed.
func (s *Service) forbidden(op, resource string, l fence.Lease, owner string) error {
	rejectionsTotal.WithLabelValues("forbidden").Inc()
	if op == "acquire" {
		return fmt.Errorf("lock: acquire %q: %w: holder %q has the lease on behalf of another principal", resource, fence.ErrForbidden, l.Holder)
	}
	return fmt.Errorf("lock: %s %q: %w: the lease belongs to another principal", op, resource, fence.ErrForbidden)
}

func validateLease(resource string, token fence.Token, ttl time.Duration) error {
	if err := fence.ValidateResource(resource); err != nil {
		return err
	}
	if !token.Valid() {
		return fmt.Errorf("%w: %d", fence.ErrInvalidToken, token)
	}
	if ttl != 0 && (ttl < fence.MinTTL || ttl > fence.MaxTTL) {
		return fmt.Errorf("%w: ttl %s is outside %s..%s", fence.ErrBadRequest, ttl, fence.MinTTL, fence.MaxTTL)
	}
	return nil
}
