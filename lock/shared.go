package lock

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/support/wallclock"
)

// A shared group is the entry's lease with Shared set, Holder "" and the
// group's token, which every holder in e.shared has too; its Expires is the
// latest of theirs, and its timer fires at the earliest, when expireLocked
// lets the holders whose time is up go. So every path that sees e.lease
// sees the resource held, and only the paths of a holder of the group (its
// own acquire, renew, release and expiry) look into e.shared. A group is in
// no session: its holders' leases are their own.

var _ fence.SharedAcquirer = (*Service)(nil)

// AcquireShared implements fence.SharedAcquirer: the hold belongs to
// fence.OwnerOf(ctx).
func (s *Service) AcquireShared(ctx context.Context, resource, holder string, ttl, wait time.Duration) (fence.Lease, error) {
	start := time.Now()
	owner := fence.OwnerOf(ctx)
	if err := validateShared(resource, holder, ttl, wait, fence.SessionOf(ctx)); err != nil {
		return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w", resource, err)
	}
	e, err := s.enter("acquire", resource)
	if err != nil {
		return fence.Lease{}, err
	}
	defer s.unref(resource, e) // each path below unlocks e itself
	now := s.now()
	s.expireLocked(resource, e, now)
	answer := func(l fence.Lease, err error) (fence.Lease, error) {
		e.mu.Unlock()
		if err == nil {
			waitSeconds.Observe(time.Since(start).Seconds())
		}
		return l, err
	}
	switch {
	case e.lease == nil && !e.reserved && !s.delayedLocked(e, now):
		return answer(s.shareLocked(ctx, resource, e, holder, owner, ttl, 0))
	case e.lease == nil:
		// In a lock-delay, or reserved by a multi-acquire: wait below.
	case e.lease.Shared:
		if m := e.shared[holder]; m != nil {
			// A retry by a holder of the group: its TTL refreshed.
			if !owns(*m, owner) {
				e.mu.Unlock()
				return fence.Lease{}, s.forbidden("acquire", resource, *m, owner)
			}
			return answer(s.refreshShareLocked(ctx, resource, e, holder, ttl, now, changeRetried))
		}
		// Nobody waits: join. A waiter is an exclusive acquire (or one
		// behind it), which no new shared hold may overtake.
		if len(e.queue) == 0 && len(e.shared) < fence.MaxSharedHolders {
			return answer(s.shareLocked(ctx, resource, e, holder, owner, ttl, e.lease.Token))
		}
	case e.lease.Holder == holder:
		if err := s.forbiddenLocked("acquire", resource, e, owner); err != nil {
			e.mu.Unlock()
			return fence.Lease{}, err
		}
		if ref := e.lease.Session; !ref.IsZero() {
			e.mu.Unlock()
			return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w: the lease is in session %q, and a shared hold is in none", resource, fence.ErrBadRequest, ref.Resource)
		}
		if at := e.lease.RevokeAt; !at.IsZero() {
			e.mu.Unlock()
			return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w: the lease was asked to let go by %s: release it rather than downgrade", resource, fence.ErrBadRequest, at.UTC().Format(time.RFC3339))
		}
		return answer(s.downgradeLocked(ctx, resource, e, ttl))
	}
	if wait <= 0 {
		err := s.heldErrorLocked(resource, e, now)
		e.mu.Unlock()
		return fence.Lease{}, err
	}
	w := &waiter{ctx: ctx, holder: holder, owner: owner, ttl: ttl, shared: true, resultC: make(chan result, 1)}
	return s.queueLocked(ctx, resource, e, w, wait, start)
}

// shareLocked records holder, for owner, in the resource's shared group:
// a new one if from is 0, the group of token from otherwise.
func (s *Service) shareLocked(ctx context.Context, resource string, e *entry, holder, owner string, ttl time.Duration, from fence.Token) (fence.Lease, error) {
	// The deadline counts from before the ledger write, as in grantLocked.
	expires := s.now().Add(ttl)
	token, err := s.ledger.Share(fence.WithOwner(ctx, owner), resource, holder, from, ttl, wallclock.Report(expires))
	if err != nil {
		return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w", resource, err)
	}
	l := fence.Lease{Resource: resource, Holder: holder, Owner: owner, Token: token, TTL: ttl, Expires: expires, Shared: true}
	if e.lease != nil {
		// Joining a group that was asked to let go: so is this hold.
		l.RevokeAt, l.RevokeGrace = e.lease.RevokeAt, e.lease.RevokeGrace
	}
	if l.Sequencer, err = s.sign(l); err != nil {
		// Recorded: the hold runs out its TTL unless its holder retries.
		s.addShareLocked(e, l)
		return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w", resource, err)
	}
	s.addShareLocked(e, l)
	grantsTotal.Inc()
	s.record(changeGranted, l, token)
	return l, nil
}

// downgradeLocked turns the resource's exclusive lease into a shared group
// with a new token, its holder in it, in one ledger change, and lets the
// shared acquires first in the queue join it.
func (s *Service) downgradeLocked(ctx context.Context, resource string, e *entry, ttl time.Duration) (fence.Lease, error) {
	old := *e.lease
	expires := s.now().Add(ttl)
	token, err := s.ledger.Share(fence.WithOwner(ctx, old.Owner), resource, old.Holder, old.Token, ttl, wallclock.Report(expires))
	if err != nil {
		return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w", resource, err)
	}
	s.clearLeaseLocked(e)
	s.record(changeReleased, old, token)
	l := fence.Lease{Resource: resource, Holder: old.Holder, Owner: old.Owner, Token: token, TTL: ttl, Expires: expires, Shared: true}
	l.Sequencer, err = s.sign(l)
	s.addShareLocked(e, l)
	if err != nil {
		return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w", resource, err)
	}
	grantsTotal.Inc()
	s.record(changeGranted, l, token)
	s.joinSharedLocked(resource, e)
	return l, nil
}

// addShareLocked makes l, just recorded, one of the resource's shared
// holds, starting the group if there is none.
func (s *Service) addShareLocked(e *entry, l fence.Lease) {
	if e.lease == nil {
		e.lease = &fence.Lease{Resource: l.Resource, Token: l.Token, Shared: true}
		e.shared = map[string]*fence.Lease{}
	}
	if e.shared[l.Holder] == nil {
		leasesHeld.Inc()
	}
	e.shared[l.Holder] = &l
	s.armSharedLocked(e)
}

// armSharedLocked sets the group's expiry to its holders' latest and its
// timer to their earliest.
func (s *Service) armSharedLocked(e *entry) {
	var first, last time.Time
	for _, m := range e.shared {
		if first.IsZero() || m.Expires.Before(first) {
			first = m.Expires
		}
		if m.Expires.After(last) {
			last = m.Expires
		}
	}
	e.lease.Expires = last
	if e.timer != nil {
		e.timer.Stop()
	}
	resource := e.lease.Resource
	e.timer = time.AfterFunc(first.Sub(s.now()), func() { s.expire(resource) })
}

// joinSharedLocked lets the shared acquires first in the queue join the
// resource's group, if one holds it, up to MaxSharedHolders: those that
// waited behind an exclusive acquire that has been served or has gone.
func (s *Service) joinSharedLocked(resource string, e *entry) {
	for e.lease != nil && e.lease.Shared && len(e.shared) < fence.MaxSharedHolders {
		w := e.queue.first(resource)
		if w == nil || !w.shared {
			return
		}
		e.queue.pop()
		s.serveShared(resource, e, w)
	}
}

// serveShared answers the shared waiter w, taken out of the queue, with a
// hold in the resource's group, started for it if none holds the resource.
func (s *Service) serveShared(resource string, e *entry, w *waiter) {
	var from fence.Token
	if e.lease != nil {
		from = e.lease.Token
		if m := e.shared[w.holder]; m != nil && !owns(*m, w.owner) {
			w.resultC <- result{err: s.forbidden("acquire", resource, *m, w.owner)}
			return
		}
	}
	l, err := s.shareLocked(s.ctx, resource, e, w.holder, w.owner, w.ttl, from)
	w.resultC <- result{lease: l, err: err}
}

// refreshShareLocked gives holder's shared hold ttl from now (0: its TTL).
func (s *Service) refreshShareLocked(ctx context.Context, resource string, e *entry, holder string, ttl time.Duration, now time.Time, c change) (fence.Lease, error) {
	l := *e.shared[holder]
	if ttl == 0 {
		ttl = l.TTL
	}
	expires := now.Add(ttl)
	lastFence, err := s.ledger.RefreshShare(ctx, resource, l.Token, holder, ttl, wallclock.Report(expires))
	if err != nil {
		return fence.Lease{}, fmt.Errorf("lock: renew %q: %w", resource, err)
	}
	l.TTL, l.Expires = ttl, expires
	e.shared[holder] = &l
	s.armSharedLocked(e)
	renewalsTotal.Inc()
	s.record(c, l, lastFence)
	return l, nil
}

// RenewShared implements fence.SharedAcquirer. It renews an exclusive
// lease of holder as Renew does, so that a caller may always name the
// holder.
func (s *Service) RenewShared(ctx context.Context, resource, holder string, token fence.Token, ttl time.Duration) (fence.Lease, error) {
	if err := validateLease(resource, token, ttl); err != nil {
		return fence.Lease{}, fmt.Errorf("lock: renew: %w", err)
	}
	e, err := s.enter("renew", resource)
	if err != nil {
		return fence.Lease{}, err
	}
	now := s.now()
	s.expireLocked(resource, e, now)
	if e.lease != nil && !e.lease.Shared && e.lease.Holder == holder {
		s.leave(resource, e)
		return s.Renew(ctx, resource, token, ttl) // a session's too
	}
	defer s.leave(resource, e)
	m, err := shareLostLocked(resource, e, holder, token)
	if err != nil {
		return fence.Lease{}, err
	}
	if !owns(*m, fence.OwnerOf(ctx)) {
		return fence.Lease{}, s.forbidden("renew", resource, *m, fence.OwnerOf(ctx))
	}
	return s.refreshShareLocked(ctx, resource, e, holder, ttl, now, changeRenewed)
}

// ReleaseShared implements fence.SharedAcquirer: the group ends with its
// last holder, and the queue is served. It releases an exclusive lease of
// holder as Release does.
func (s *Service) ReleaseShared(ctx context.Context, resource, holder string, token fence.Token) error {
	if err := validateLease(resource, token, 0); err != nil {
		return fmt.Errorf("lock: release: %w", err)
	}
	e, err := s.enter("release", resource)
	if err != nil {
		return err
	}
	s.expireLocked(resource, e, s.now())
	if e.lease != nil && !e.lease.Shared && e.lease.Holder == holder {
		s.leave(resource, e)
		return s.Release(ctx, resource, token) // a session's too
	}
	defer s.leave(resource, e)
	m, err := shareLostLocked(resource, e, holder, token)
	if err != nil {
		return err
	}
	if !owns(*m, fence.OwnerOf(ctx)) {
		return s.forbidden("release", resource, *m, fence.OwnerOf(ctx))
	}
	lastFence, err := s.ledger.EndShare(ctx, resource, token, holder)
	if err != nil {
		return fmt.Errorf("lock: release %q: %w", resource, err)
	}
	releasesTotal.Inc()
	s.leftShareLocked(resource, e, holder, changeReleased, lastFence)
	if e.lease == nil {
		s.handOffLocked(resource, e, changeNone)
	} else {
		s.joinSharedLocked(resource, e) // a full group has room again
	}
	return nil
}

// shareLostLocked returns holder's hold in the resource's group of token,
// or *fence.LeaseLostError if it has none.
func shareLostLocked(resource string, e *entry, holder string, token fence.Token) (*fence.Lease, error) {
	if e.lease != nil && e.lease.Shared && e.lease.Token == token {
		if m := e.shared[holder]; m != nil {
			return m, nil
		}
	}
	rejectionsTotal.WithLabelValues("lease_lost").Inc()
	err := &fence.LeaseLostError{Resource: resource, Presented: token}
	if e.lease != nil {
		err.Current = e.lease.Token
	}
	return nil, err
}

// leftShareLocked forgets holder's shared hold, which has ended (c), and
// the group with its last holder.
func (s *Service) leftShareLocked(resource string, e *entry, holder string, c change, lastFence fence.Token) {
	m := *e.shared[holder]
	delete(e.shared, holder)
	leasesHeld.Dec()
	s.record(c, m, lastFence)
	if len(e.shared) > 0 {
		s.armSharedLocked(e)
		return
	}
	s.clearSharedLocked(e)
}

// expireSharedLocked lets the holders of the resource's group whose time
// is up at now go. The group ends with its last, by expiry as a lease does:
// a lock-delay follows, or the next waiter is served.
func (s *Service) expireSharedLocked(resource string, e *entry, now time.Time) {
	token, last := e.lease.Token, e.lease.Expires
	expired := 0
	for holder, m := range e.shared {
		if now.Before(m.Expires) {
			continue
		}
		expired++
		lastFence, err := s.ledger.EndShare(s.ctx, resource, token, holder)
		if err != nil {
			// Gone from memory all the same: the next group or grant
			// replaces the record.
			s.Logger.Error("recording the end of a shared hold failed", "resource", resource, "holder", holder, "token", uint64(token), "error", err)
		}
		expirationsTotal.Inc()
		s.leftShareLocked(resource, e, holder, changeExpired, lastFence)
	}
	if expired == 0 {
		return
	}
	if e.lease != nil {
		s.joinSharedLocked(resource, e) // a full group has room again
		return
	}
	if until := last.Add(s.LockDelay); s.LockDelay > 0 && now.Before(until) {
		if err := s.ledger.SetDelay(s.ctx, resource, s.LockDelay); err != nil {
			s.Logger.Error("recording a lock-delay failed", "resource", resource, "error", err)
		}
		s.delayLocked(resource, e, until, s.LockDelay)
		return
	}
	s.handOffLocked(resource, e, changeNone)
}

// clearSharedLocked forgets the resource's whole group (revoked, or the
// service closing).
func (s *Service) clearSharedLocked(e *entry) {
	leasesHeld.Sub(float64(len(e.shared)))
	e.lease, e.shared = nil, nil
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	if e.revokeTimer != nil {
		e.revokeTimer.Stop()
		e.revokeTimer = nil
	}
}

// holdersLocked returns the holders of the resource's group, in byte order.
func holdersLocked(e *entry) []string {
	holders := make([]string, 0, len(e.shared))
	for h := range e.shared {
		holders = append(holders, h)
	}
	slices.Sort(holders)
	return holders
}

func validateShared(resource, holder string, ttl, wait time.Duration, ref fence.SessionRef) error {
	if err := validateAcquire(resource, holder, ttl, wait, fence.SessionRef{}); err != nil {
		return err
	}
	switch {
	case fence.IsSessionResource(resource):
		return fmt.Errorf("%w: %q is a session's resource, which is held exclusively", fence.ErrBadRequest, resource)
	case !ref.IsZero():
		return fmt.Errorf("%w: a shared hold is in no session: acquire it without one", fence.ErrBadRequest)
	}
	return nil
}

// upgradeRefused is the refusal of an exclusive acquire (alone or in a
// multi-acquire) by a holder of the resource's shared group.
func upgradeRefused(resource, holder string) error {
	return fmt.Errorf("lock: acquire %q: %w: holder %q holds it shared, and an upgrade to exclusive is refused: two shared holders upgrading at once would each wait for the other for ever; release the shared hold, then acquire", resource, fence.ErrBadRequest, holder)
}
