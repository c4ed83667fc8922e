package lock

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/support/wallclock"
)

// A multi-acquire takes several resources at once: it reserves them one by
// one in byte order of their names, waiting in each one's queue as any
// acquire does, and once it has them all it grants them in one ledger
// change (Ledger.GrantAll). A reserved resource is granted to nobody else,
// but its fence is not raised before the grant, and it is nobody's lease
// until then. Every multi-acquire reserves in the same order, so two never
// wait for each other: no deadlock. One that gives up (its wait ran out, its
// caller went, a ledger error) drops its reservations, which serve their
// queues as after a release: it holds nothing afterwards.

var _ fence.MultiAcquirer = (*Service)(nil)

// AcquireAll implements fence.MultiAcquirer. The leases belong to
// fence.OwnerOf(ctx), and join the session fence.SessionOf(ctx) if there is
// one, as Acquire's does.
func (s *Service) AcquireAll(ctx context.Context, resources []string, holder string, ttl, wait time.Duration) ([]fence.Lease, error) {
	start := time.Now()
	owner, ref := fence.OwnerOf(ctx), fence.SessionOf(ctx)
	names, err := multiNames(resources, ref)
	if err == nil {
		err = validateSessionHold(holder, ttl, wait, ref)
	}
	if err != nil {
		return nil, fmt.Errorf("lock: acquire: %w", err)
	}
	if !ref.IsZero() {
		if _, _, err := s.joinSession(ref, owner, ttl, ""); err != nil {
			return nil, fmt.Errorf("lock: acquire %q: %w", resources, err)
		}
	}
	deadline := time.Now().Add(wait)
	// Each name's entry, referenced until the end; mine[i]: the holder's
	// own lease already (a retry), else reserved.
	entries := make([]*entry, 0, len(names))
	mine := make([]bool, len(names))
	giveUp := func() {
		for i, e := range entries {
			s.unreserve(names[i], e, mine[i])
		}
	}
	for i, name := range names {
		e, own, err := s.reserve(ctx, name, holder, owner, time.Until(deadline))
		if err != nil {
			giveUp()
			return nil, err
		}
		entries = append(entries, e)
		mine[i] = own
	}
	leases, err := s.grantAll(ctx, names, entries, mine, holder, owner, ttl, ref)
	for i, e := range entries {
		if err != nil {
			s.unreserve(names[i], e, mine[i])
		} else {
			s.unref(names[i], e)
		}
	}
	if err != nil {
		return nil, err
	}
	for i, name := range names {
		if mine[i] && fence.IsSessionResource(name) { // a session renewed: its leases follow
			s.syncSession(fence.SessionRef{Resource: name, Token: leases[i].Token})
		}
	}
	waitSeconds.Observe(time.Since(start).Seconds())
	// In the order of the request.
	out := make([]fence.Lease, len(resources))
	for i, r := range resources {
		out[i] = leases[slices.Index(names, r)]
	}
	return out, nil
}

// multiNames returns resources sorted, each checked as Acquire checks it
// for session ref; a name given twice, or none, wraps fence.ErrBadRequest.
func multiNames(resources []string, ref fence.SessionRef) ([]string, error) {
	if len(resources) == 0 || len(resources) > fence.MaxMultiAcquire {
		return nil, fmt.Errorf("%w: %d resources: a multi-acquire takes 1..%d", fence.ErrBadRequest, len(resources), fence.MaxMultiAcquire)
	}
	names := slices.Sorted(slices.Values(resources))
	for i, name := range names {
		if err := validateAcquire(name, "h", fence.MinTTL, 0, ref); err != nil {
			return nil, err
		}
		if i > 0 && names[i-1] == name {
			return nil, fmt.Errorf("%w: resource %q is named twice", fence.ErrBadRequest, name)
		}
	}
	return names, nil
}

// reserve reserves the resource for a multi-acquire, waiting up to wait in
// its queue, and returns its entry, referenced; own reports that holder
// holds it already, on behalf of owner, which it then keeps (not reserved).
func (s *Service) reserve(ctx context.Context, resource, holder, owner string, wait time.Duration) (e *entry, own bool, err error) {
	if e, err = s.enter("acquire", resource); err != nil {
		return nil, false, err
	}
	now := s.now()
	s.expireLocked(resource, e, now)
	switch {
	case e.lease != nil && e.lease.Shared && e.shared[holder] != nil:
		s.leave(resource, e)
		return nil, false, upgradeRefused(resource, holder)
	case e.lease != nil && e.lease.Holder == holder:
		if err := s.forbiddenLocked("acquire", resource, e, owner); err != nil {
			s.leave(resource, e)
			return nil, false, err
		}
		e.mu.Unlock()
		return e, true, nil
	case e.lease == nil && !e.reserved && !s.delayedLocked(e, now) && len(e.queue) == 0:
		e.reserved = true
		e.mu.Unlock()
		return e, false, nil
	case wait <= 0 || (s.MaxWaiters > 0 && len(e.queue) >= s.MaxWaiters):
		if wait > 0 {
			waitersRejectedTotal.Inc()
		}
		err := s.heldErrorLocked(resource, e, now)
		s.leave(resource, e)
		return nil, false, err
	}
	w := &waiter{ctx: ctx, holder: holder, owner: owner, reserve: true, resultC: make(chan result, 1)}
	e.queue = append(e.queue, w)
	waiters.Inc()
	e.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var cause error
	select {
	case r := <-w.resultC:
		return s.reserved(resource, e, r)
	case <-ctx.Done():
		cause = fmt.Errorf("lock: acquire %q: %w", resource, ctx.Err())
	case <-timer.C:
	}
	e.mu.Lock()
	if e.queue.remove(w) {
		// The shared acquires that waited behind it may join the group now.
		s.joinSharedLocked(resource, e)
		if cause == nil {
			cause = s.heldErrorLocked(resource, e, s.now())
		}
		s.leave(resource, e)
		return nil, false, cause
	}
	e.mu.Unlock()
	// Served before it could leave the queue: if with a reservation, the
	// caller gives it back with the rest.
	return s.reserved(resource, e, <-w.resultC)
}

// reserved returns what a reserve waiter was answered: its reservation, or
// the error that ended its wait (then dropping the reference to e).
func (s *Service) reserved(resource string, e *entry, r result) (*entry, bool, error) {
	if r.err != nil {
		s.unref(resource, e)
		return nil, false, r.err
	}
	return e, false, nil
}

// unreserve gives back a reservation (unless own: the holder's lease is
// left alone), serving the resource's queue, and drops the reference.
func (s *Service) unreserve(resource string, e *entry, own bool) {
	if !own && s.lockEntry(e) == nil { // closed: Close has cleared it
		e.reserved = false
		s.handOffLocked(resource, e, changeNone)
		e.mu.Unlock()
	}
	s.unref(resource, e)
}

// grantAll refreshes the leases the holder had already, if it still has
// them, and grants the reserved resources to holder in one ledger change,
// with every entry locked in the order of names (the only place that locks
// two entries at once; in that order, so that it never waits for itself).
// On failure nothing is granted and every reservation is still in place.
// In session ref (none if zero) the holder's own leases must be in it too,
// and the new ones join it.
func (s *Service) grantAll(ctx context.Context, names []string, entries []*entry, mine []bool, holder, owner string, ttl time.Duration, ref fence.SessionRef) ([]fence.Lease, error) {
	for i, e := range entries {
		if err := s.lockEntry(e); err != nil {
			for _, u := range entries[:i] {
				u.mu.Unlock()
			}
			return nil, fmt.Errorf("lock: acquire %q: %w", names[i], err)
		}
	}
	defer func() {
		for _, e := range entries {
			e.mu.Unlock()
		}
	}()
	now := s.now()
	leases := make([]fence.Lease, len(names))
	var grant []string
	for i, name := range names {
		if !mine[i] {
			grant = append(grant, name)
			continue
		}
		// The holder's own lease, as it was before the wait: still its? Then
		// refreshed before the grant, so that a failure grants nothing.
		e := entries[i]
		s.expireLocked(name, e, now)
		if e.lease == nil || e.lease.Holder != holder || !owns(*e.lease, owner) {
			rejectionsTotal.WithLabelValues("lock_held").Inc()
			return nil, &fence.LockHeldError{Resource: name}
		}
		var err error
		if !ref.IsZero() || !e.lease.Session.IsZero() {
			leases[i], err = s.retriedInSessionLocked(name, e, ref)
		} else {
			leases[i], err = s.refreshLocked(ctx, name, e, ttl, now, changeRetried)
		}
		if err != nil {
			return nil, err
		}
	}
	// The deadline counts from before the ledger write, as in grantLocked.
	expires := now.Add(ttl)
	var tokens []fence.Token
	if len(grant) > 0 {
		joined := grant[:0:0]
		drop := func() {
			for _, name := range joined {
				s.dropFromSession(ref, name)
			}
		}
		if !ref.IsZero() {
			for _, name := range grant {
				var err error
				if ttl, expires, err = s.joinSession(ref, owner, ttl, name); err != nil {
					drop()
					return nil, fmt.Errorf("lock: acquire %q: %w", names, err)
				}
				joined = append(joined, name)
			}
		}
		var err error
		if tokens, err = s.ledger.GrantAll(grantContext(ctx, owner, ref), grant, holder, ttl, wallclock.Report(expires)); err != nil {
			drop()
			return nil, fmt.Errorf("lock: acquire %q: %w", names, err)
		}
	}
	var firstErr error
	for i, name := range names {
		if mine[i] {
			continue
		}
		e := entries[i]
		e.reserved = false
		token := tokens[0]
		tokens = tokens[1:]
		if !ref.IsZero() {
			s.joinedSession(ref, name, token, false)
		}
		var err error
		leases[i], err = s.grantedLocked(e, fence.Lease{Resource: name, Holder: holder, Owner: owner, Token: token, TTL: ttl, Expires: expires, Session: ref}, token)
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		// Granted (recorded), but not all answered (a signature failed):
		// the leases run out their TTLs, as a single grant's does.
		return nil, firstErr
	}
	return leases, nil
}
