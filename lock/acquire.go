package lock

import (
	"context"
	"fmt"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/support/wallclock"
)

// Acquire implements fence.Locker. The lease belongs to fence.OwnerOf(ctx),
// and joins the session fence.SessionOf(ctx) if there is one (see
// fence.SessionResource): the caller must own the session, and ttl is 0 or
// the session's.
func (s *Service) Acquire(ctx context.Context, resource, holder string, ttl, wait time.Duration) (fence.Lease, error) {
	start := time.Now()
	owner, ref := fence.OwnerOf(ctx), fence.SessionOf(ctx)
	if err := validateAcquire(resource, holder, ttl, wait, ref); err != nil {
		return fence.Lease{}, fmt.Errorf("lock: acquire: %w", err)
	}
	if !ref.IsZero() {
		if _, _, err := s.joinSession(ref, owner, ttl, ""); err != nil {
			return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w", resource, err)
		}
	}
	e, err := s.enter("acquire", resource)
	if err != nil {
		return fence.Lease{}, err
	}
	defer s.unref(resource, e) // each path below unlocks e itself
	now := s.now()
	s.expireLocked(resource, e, now)
	switch {
	case e.lease == nil && (e.reserved || s.delayedLocked(e, now)):
		if wait <= 0 {
			err := s.heldErrorLocked(resource, e, now)
			e.mu.Unlock()
			return fence.Lease{}, err
		}
		// Queued behind earlier waiters; the end of the delay, or of the
		// reservation, hands off.
	case e.lease == nil:
		l, err := s.grantLocked(ctx, resource, e, holder, owner, ttl, ref)
		e.mu.Unlock()
		if err == nil {
			waitSeconds.Observe(time.Since(start).Seconds())
		}
		return l, err
	case e.lease.Shared && e.shared[holder] != nil:
		e.mu.Unlock()
		return fence.Lease{}, upgradeRefused(resource, holder)
	case e.lease.Holder == holder:
		// A retry by the holder: the same token, the TTL of this request;
		// but only for the lease's owner, since anyone can name a holder.
		if err := s.forbiddenLocked("acquire", resource, e, owner); err != nil {
			e.mu.Unlock()
			return fence.Lease{}, err
		}
		if e.lease.Session != ref || !ref.IsZero() {
			l, err := s.retriedInSessionLocked(resource, e, ref)
			e.mu.Unlock()
			return l, err
		}
		l, err := s.refreshLocked(ctx, resource, e, ttl, now, changeRetried)
		e.mu.Unlock()
		if err == nil && fence.IsSessionResource(resource) {
			s.syncSession(fence.SessionRef{Resource: resource, Token: l.Token})
		}
		return l, err
	case wait <= 0:
		err := s.heldErrorLocked(resource, e, now)
		e.mu.Unlock()
		return fence.Lease{}, err
	}
	w := &waiter{ctx: ctx, holder: holder, owner: owner, ttl: ttl, session: ref, resultC: make(chan result, 1)}
	return s.queueLocked(ctx, resource, e, w, wait, start)
}

// queueLocked queues w on the locked entry e (refused past MaxWaiters),
// unlocks e and waits for w's answer, as of an acquire called at start.
func (s *Service) queueLocked(ctx context.Context, resource string, e *entry, w *waiter, wait time.Duration, start time.Time) (fence.Lease, error) {
	if s.MaxWaiters > 0 && len(e.queue) >= s.MaxWaiters {
		waitersRejectedTotal.Inc()
		err := s.heldErrorLocked(resource, e, s.now())
		e.mu.Unlock()
		return fence.Lease{}, err
	}
	e.queue = append(e.queue, w)
	waiters.Inc()
	e.mu.Unlock()
	l, err := s.await(ctx, resource, e, w, wait)
	if err == nil {
		waitSeconds.Observe(time.Since(start).Seconds())
	}
	return l, err
}

// await waits for a queued acquire to be granted, its wait to end, or its
// caller to go away; the last two take it out of the queue.
func (s *Service) await(ctx context.Context, resource string, e *entry, w *waiter, wait time.Duration) (fence.Lease, error) {
	return awaitWaiter(ctx, resource, w, wait, func(cause error) (left bool, err error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if !e.queue.remove(w) {
			return false, nil
		}
		// The shared acquires that waited behind w may join the group now.
		s.joinSharedLocked(resource, e)
		if cause != nil {
			return true, nil
		}
		return true, s.heldErrorLocked(resource, e, s.now())
	})
}

// awaitWaiter waits for w's answer, the end of its wait, or its caller to
// go away. In the last two cases it calls leave with the caller's error (nil
// if the wait ran out), which takes w out of its queue and reports whether w
// was still there, and the error of a wait that ran out; if w was not, its
// answer is sent already.
func awaitWaiter(ctx context.Context, resource string, w *waiter, wait time.Duration, leave func(cause error) (left bool, timedOut error)) (fence.Lease, error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var cause error
	select {
	case r := <-w.resultC:
		return r.lease, r.err
	case <-ctx.Done():
		cause = ctx.Err()
	case <-timer.C:
	}
	if left, timedOut := leave(cause); left {
		if cause != nil {
			return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w", resource, cause)
		}
		return fence.Lease{}, timedOut
	}
	// The hand-off took w out of the queue before we could: its result is sent.
	r := <-w.resultC
	if r.err == nil && cause != nil {
		// Granted in the instant the caller left. Releasing here could end a
		// lease that a retry by the same holder has just been given, so the
		// lease runs out its TTL instead (the hand-off releases grants whose
		// callers had all gone before it answered them).
		return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w", resource, cause)
	}
	return r.lease, r.err
}

// grantLocked issues the next token to holder, for owner, in session ref
// (none if zero); the ledger raises the resource's fence, and records the
// owner and the session, before this returns.
func (s *Service) grantLocked(ctx context.Context, resource string, e *entry, holder, owner string, ttl time.Duration, ref fence.SessionRef) (fence.Lease, error) {
	// The deadline counts from before the ledger write: the holder's own clock
	// started even earlier, so it never believes in a lease the service has ended.
	expires := s.now().Add(ttl)
	if !ref.IsZero() {
		var err error
		if ttl, expires, err = s.joinSession(ref, owner, ttl, resource); err != nil {
			return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w", resource, err)
		}
	}
	token, err := s.ledger.Grant(grantContext(ctx, owner, ref), resource, holder, ttl, wallclock.Report(expires))
	if err != nil {
		if !ref.IsZero() {
			s.dropFromSession(ref, resource)
		}
		return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w", resource, err)
	}
	if !ref.IsZero() {
		s.joinedSession(ref, resource, token, false)
	}
	return s.grantedLocked(e, fence.Lease{Resource: resource, Holder: holder, Owner: owner, Token: token, TTL: ttl, Expires: expires, Session: ref}, token)
}

// grantContext returns ctx, which is the service's own (or another
// caller's) when a waiter is served, with the grantee's owner and session,
// which the ledger records from it.
func grantContext(ctx context.Context, owner string, ref fence.SessionRef) context.Context {
	return fence.WithSession(fence.WithOwner(ctx, owner), ref)
}

// retriedInSessionLocked answers an acquire by the holder of the
// resource's lease when either is in a session: in the same session it is a
// retry, answered with the lease as it is; otherwise it is refused.
func (s *Service) retriedInSessionLocked(resource string, e *entry, ref fence.SessionRef) (fence.Lease, error) {
	l := *e.lease
	if l.Session != ref {
		in := func(r fence.SessionRef) string {
			if r.IsZero() {
				return "no session"
			}
			return fmt.Sprintf("session %q (token %d)", r.Resource, r.Token)
		}
		return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w: holder %q holds it in %s, not in %s", resource, fence.ErrBadRequest, l.Holder, in(l.Session), in(ref))
	}
	if _, _, err := s.joinSession(ref, l.Owner, 0, ""); err != nil {
		return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w", resource, err) // the session ended
	}
	s.followSessionLocked(e)
	return *e.lease, nil
}

// grantedLocked makes l, just recorded in the ledger, the resource's lease.
func (s *Service) grantedLocked(e *entry, l fence.Lease, lastFence fence.Token) (fence.Lease, error) {
	var err error
	if l.Sequencer, err = s.sign(l); err != nil {
		// The token is issued and the fence raised; the lease is recorded
		// and expires by its TTL unless the holder retries (and gets an
		// unsigned lease) or the service restarts.
		s.setLeaseLocked(e, l)
		leasesHeld.Inc()
		return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w", l.Resource, err)
	}
	s.setLeaseLocked(e, l)
	e.granted = time.Now()
	grantsTotal.Inc()
	leasesHeld.Inc()
	s.record(changeGranted, l, lastFence)
	return l, nil
}

func (s *Service) refreshLocked(ctx context.Context, resource string, e *entry, ttl time.Duration, now time.Time, c change) (fence.Lease, error) {
	l := *e.lease
	if ttl == 0 {
		ttl = l.TTL
	}
	expires := now.Add(ttl)
	lastFence, err := s.ledger.Refresh(ctx, resource, l.Token, ttl, wallclock.Report(expires))
	if err != nil {
		return fence.Lease{}, fmt.Errorf("lock: renew %q: %w", resource, err)
	}
	l.TTL, l.Expires = ttl, expires
	s.setLeaseLocked(e, l)
	renewalsTotal.Inc()
	s.record(c, l, lastFence)
	return l, nil
}

// setLeaseLocked makes l the resource's lease and arms its expiry.
func (s *Service) setLeaseLocked(e *entry, l fence.Lease) {
	e.lease = &l
	if fence.IsSessionResource(l.Resource) {
		s.noteSessionLocked(l)
	}
	if e.timer != nil {
		e.timer.Stop()
	}
	// A timer that fired already and waits for e.mu finds the new deadline and does nothing.
	e.timer = time.AfterFunc(l.Expires.Sub(s.now()), func() { s.expire(l.Resource) })
}

// clearLeaseLocked forgets the resource's lease, which has ended.
func (s *Service) clearLeaseLocked(e *entry) {
	if e.revokeTimer != nil {
		e.revokeTimer.Stop()
		e.revokeTimer = nil
	}
	if e.lease.Shared {
		s.clearSharedLocked(e)
		return
	}
	s.leftLeaseLocked(*e.lease)
	if !e.granted.IsZero() {
		holdSeconds.Observe(time.Since(e.granted).Seconds())
		e.granted = time.Time{}
	}
	e.lease = nil
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	leasesHeld.Dec()
}

func validateAcquire(resource, holder string, ttl, wait time.Duration, ref fence.SessionRef) error {
	if err := fence.ValidateResource(resource); err != nil {
		return err
	}
	if base, _, n, ok := fence.ParseSlot(resource); ok {
		return fmt.Errorf("%w: %q is the slot of a permit of semaphore %q: acquire %q with limit %d instead", fence.ErrBadRequest, resource, base, base, n)
	}
	if !ref.IsZero() && fence.IsSessionResource(resource) {
		return fmt.Errorf("%w: %q is a session's resource: a session cannot be in another", fence.ErrBadRequest, resource)
	}
	return validateSessionHold(holder, ttl, wait, ref)
}

// validateSessionHold is validateHold for a hold in session ref (none if
// zero), whose ttl may be 0: the session's, checked against it later.
func validateSessionHold(holder string, ttl, wait time.Duration, ref fence.SessionRef) error {
	if !ref.IsZero() {
		if err := ref.Validate(); err != nil {
			return err
		}
		if ttl == 0 {
			ttl = fence.MinTTL
		}
	}
	return validateHold(holder, ttl, wait)
}

// validateHold checks the holder, TTL and wait of an acquire.
func validateHold(holder string, ttl, wait time.Duration) error {
	if err := fence.ValidateHolder(holder); err != nil {
		return err
	}
	if ttl < fence.MinTTL || ttl > fence.MaxTTL {
		return fmt.Errorf("%w: ttl %s is outside %s..%s", fence.ErrBadRequest, ttl, fence.MinTTL, fence.MaxTTL)
	}
	if wait < 0 || wait > fence.MaxWait {
		return fmt.Errorf("%w: wait %s is outside 0..%s", fence.ErrBadRequest, wait, fence.MaxWait)
	}
	return nil
}
