package lock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fence-lock/fence"
)

// A semaphore of limit n is n slot resources, fence.SlotResource(name, i, n),
// each an exclusive lease of its own with its own tokens and fence: that is
// what fences a paused permit holder alone. What the semaphore adds is one
// queue for its n slots, first come first served, and the limit that its
// permits were asked with. Nothing else grants a slot (Acquire refuses their
// names), so while a semaphore's mu is held a free slot stays free.
//
// Lock order: a semaphore's mu, then Service.mu, then an entry's mu. A slot
// whose entry becomes free (its lease ended, released, expired, revoked or
// its lock-delay over) serves the semaphore's queue once nothing is locked
// (see unref); the semaphore's own work on its slots does not (enterSlot and
// leaveSlot).

// semaphore is the in-memory state of one semaphore. It lives while a permit
// is held or waited for, or a call refers to it.
type semaphore struct {
	mu    sync.Mutex
	dead  bool        // taken out of Service.sems: look it up again
	limit int         // of the permits held and waited for; 0 in a new semaphore
	queue waiterQueue // acquires waiting for a permit
}

var _ fence.PermitAcquirer = (*Service)(nil)

// AcquirePermit implements fence.PermitAcquirer. The lease belongs to
// fence.OwnerOf(ctx), names its slot as its Resource, and joins the session
// fence.SessionOf(ctx) if there is one, as Acquire's does.
func (s *Service) AcquirePermit(ctx context.Context, resource, holder string, limit int, ttl, wait time.Duration) (fence.Lease, error) {
	start := time.Now()
	ref := fence.SessionOf(ctx)
	err := fence.ValidateSemaphore(resource, limit)
	if err == nil {
		err = validateSessionHold(holder, ttl, wait, ref)
	}
	if err != nil {
		return fence.Lease{}, fmt.Errorf("lock: acquire: %w", err)
	}
	if !ref.IsZero() {
		if _, _, err := s.joinSession(ref, fence.OwnerOf(ctx), ttl, ""); err != nil {
			return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w", resource, err)
		}
	}
	if s.closed.Load() {
		return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w", resource, fence.ErrClosed)
	}
	sem := s.lockSemaphore(resource, true)
	l, w, err := s.tryPermitLocked(ctx, resource, sem, holder, limit, ttl, wait)
	if w == nil {
		if err != nil {
			s.tidyLocked(resource, sem)
		}
		sem.mu.Unlock()
		if err == nil {
			waitSeconds.Observe(time.Since(start).Seconds())
		}
		return l, err
	}
	sem.mu.Unlock()
	l, err = s.awaitPermit(ctx, resource, sem, w, wait)
	if err == nil {
		waitSeconds.Observe(time.Since(start).Seconds())
	}
	return l, err
}

// tryPermitLocked gives holder its own permit again, or queues holder and
// serves the queue, granting holder a permit now if one is free and nobody
// waits before it; otherwise it refuses (wait 0, or the queue full) or
// returns holder's waiter, queued. Queueing before serving is what makes a
// slot freed at any time found: before the serve, by the serve itself; after
// it, by the slot's own call to permitsFreed.
func (s *Service) tryPermitLocked(ctx context.Context, resource string, sem *semaphore, holder string, limit int, ttl, wait time.Duration) (fence.Lease, *waiter, error) {
	owner := fence.OwnerOf(ctx)
	if sem.limit != limit {
		if sem.limit != 0 && (len(sem.queue) > 0 || !s.semaphoreIdleLocked(resource, sem)) {
			rejectionsTotal.WithLabelValues("limit_mismatch").Inc()
			return fence.Lease{}, nil, fmt.Errorf("lock: acquire %q: %w: limit %d differs from %d, the limit of the permits held or waited for now",
				resource, fence.ErrBadRequest, limit, sem.limit)
		}
		sem.limit = limit
	}
	now := s.now()
	for i := 1; i <= limit; i++ {
		slot := fence.SlotResource(resource, i, limit)
		e, err := s.enterSlot(slot)
		if err != nil {
			return fence.Lease{}, nil, fmt.Errorf("lock: acquire %q: %w", resource, err)
		}
		s.expireLocked(slot, e, now)
		if e.lease != nil && e.lease.Holder == holder {
			// A retry by the holder: its own permit again, as for a lock.
			l, err := fence.Lease{}, s.forbiddenLocked("acquire", slot, e, owner)
			switch ref := fence.SessionOf(ctx); {
			case err != nil:
			case e.lease.Session != ref || !ref.IsZero():
				l, err = s.retriedInSessionLocked(slot, e, ref)
			default:
				l, err = s.refreshLocked(ctx, slot, e, ttl, now, changeRetried)
			}
			s.leaveSlot(slot, e)
			return l, nil, err
		}
		s.leaveSlot(slot, e)
	}
	full := s.MaxWaiters > 0 && len(sem.queue) >= s.MaxWaiters
	w := &waiter{ctx: ctx, holder: holder, owner: owner, ttl: ttl, session: fence.SessionOf(ctx), resultC: make(chan result, 1)}
	sem.queue = append(sem.queue, w)
	waiters.Inc()
	s.servePermitsLocked(resource, sem)
	select {
	case r := <-w.resultC:
		return r.lease, nil, r.err
	default:
	}
	if wait > 0 && !full {
		return fence.Lease{}, w, nil
	}
	sem.queue.remove(w)
	if wait > 0 {
		waitersRejectedTotal.Inc()
	}
	rejectionsTotal.WithLabelValues("lock_held").Inc()
	_, retry := s.slotsLocked(resource, sem)
	return fence.Lease{}, nil, &fence.LockHeldError{Resource: resource, RetryAfter: max(retry, 0)}
}

// soonest returns the shorter of two waits, a zero one counting as none.
func soonest(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// awaitPermit waits for a queued permit acquire to be granted, its wait to
// end, or its caller to go away; the last two take it out of the queue.
func (s *Service) awaitPermit(ctx context.Context, resource string, sem *semaphore, w *waiter, wait time.Duration) (fence.Lease, error) {
	return awaitWaiter(ctx, resource, w, wait, func(cause error) (left bool, err error) {
		sem.mu.Lock()
		defer sem.mu.Unlock()
		if !sem.queue.remove(w) {
			return false, nil
		}
		s.tidyLocked(resource, sem)
		if cause != nil {
			return true, nil
		}
		rejectionsTotal.WithLabelValues("lock_held").Inc()
		_, retry := s.slotsLocked(resource, sem)
		return true, &fence.LockHeldError{Resource: resource, RetryAfter: max(retry, 0)}
	})
}

// servePermitsLocked grants the free slots to the waiters at the head of the
// semaphore's queue, in their order, until either runs out.
func (s *Service) servePermitsLocked(resource string, sem *semaphore) {
	for i := 1; i <= sem.limit; i++ {
		w := sem.queue.first(resource)
		if w == nil {
			return
		}
		slot := fence.SlotResource(resource, i, sem.limit)
		e, err := s.enterSlot(slot)
		if err != nil {
			return // closed: Close answers the queue
		}
		s.expireLocked(slot, e, s.now())
		if e.lease == nil && !s.delayedLocked(e, s.now()) && len(e.queue) == 0 {
			sem.queue.pop()
			l, err := s.grantLocked(s.ctx, slot, e, w.holder, w.owner, w.ttl, w.session)
			switch {
			case err != nil:
				w.resultC <- result{err: err}
			case s.serve(resource, &sem.queue, w, l):
				// Its callers all went while it was recorded: end it, so
				// that the slot serves the next waiter.
				s.handOffLocked(slot, e, changeAbandoned)
			}
			if e.lease == nil {
				i-- // free still: offer the same slot to the next waiter
			}
		}
		s.leaveSlot(slot, e)
	}
}

// permitsFreed serves the queue of the semaphore whose slot resource is
// slot, now free; it is called with nothing locked.
func (s *Service) permitsFreed(slot string) {
	resource, _, _, ok := fence.ParseSlot(slot)
	if !ok {
		return
	}
	sem := s.lockSemaphore(resource, false)
	if sem == nil {
		return
	}
	defer sem.mu.Unlock()
	s.servePermitsLocked(resource, sem)
	s.tidyLocked(resource, sem)
}

// lockSemaphore returns the semaphore named resource, locked; nil if there
// is none and create is false.
func (s *Service) lockSemaphore(resource string, create bool) *semaphore {
	for {
		s.semsMu.Lock()
		sem := s.sems[resource]
		if sem == nil && create {
			sem = &semaphore{}
			s.sems[resource] = sem
		}
		s.semsMu.Unlock()
		if sem == nil {
			return nil
		}
		sem.mu.Lock()
		if !sem.dead {
			return sem
		}
		sem.mu.Unlock()
	}
}

// tidyLocked forgets the semaphore if nobody holds or waits for a permit,
// nor is any slot in its lock-delay.
func (s *Service) tidyLocked(resource string, sem *semaphore) {
	if len(sem.queue) > 0 || !s.semaphoreIdleLocked(resource, sem) {
		return
	}
	s.semsMu.Lock()
	delete(s.sems, resource)
	s.semsMu.Unlock()
	sem.dead = true
}

// semaphoreIdleLocked reports whether no slot of the semaphore is held or in
// its lock-delay.
func (s *Service) semaphoreIdleLocked(resource string, sem *semaphore) bool {
	busy, _ := s.slotsLocked(resource, sem)
	return !busy
}

// slotsLocked reports whether a slot of the semaphore is held or in its
// lock-delay, and how soon the first of them may free up.
func (s *Service) slotsLocked(resource string, sem *semaphore) (busy bool, retry time.Duration) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 1; i <= sem.limit; i++ {
		e := s.resources[fence.SlotResource(resource, i, sem.limit)]
		if e == nil {
			continue
		}
		e.mu.Lock() // after s.mu, as always; no ledger write under these
		switch {
		case e.lease != nil:
			busy, retry = true, soonest(retry, e.lease.Expires.Sub(now))
		case !e.delayUntil.IsZero():
			busy, retry = true, soonest(retry, e.delayUntil.Sub(now))
		}
		e.mu.Unlock()
	}
	return busy, retry
}

// enterSlot is enter for the semaphore's own work on a slot, which must not
// serve the semaphore's queue when it leaves (the semaphore is locked).
func (s *Service) enterSlot(slot string) (*entry, error) {
	e, err := s.ref(slot)
	if err == nil {
		if err = s.lockEntry(e); err != nil {
			s.unrefQuiet(slot, e)
		}
	}
	return e, err
}

// leaveSlot undoes enterSlot.
func (s *Service) leaveSlot(slot string, e *entry) {
	e.mu.Unlock()
	s.unrefQuiet(slot, e)
}

// restorePermit counts a restored lease or lock-delay on the slot resource
// slot in its semaphore, whose limit is in the slot's name. Open calls it
// before serving.
func (s *Service) restorePermit(slot string) {
	resource, _, n, ok := fence.ParseSlot(slot)
	if !ok {
		return
	}
	sem := s.sems[resource]
	if sem == nil {
		sem = &semaphore{limit: n}
		s.sems[resource] = sem
	}
	if sem.limit != n {
		// Only a record written otherwise than by this service can hold
		// slots of two limits. Each slot stays fenced on its own; the
		// semaphore keeps the larger limit, and counts its slots only.
		s.Logger.Warn("restored permits of one semaphore with two limits", "semaphore", resource, "limits", []int{sem.limit, n})
		sem.limit = max(sem.limit, n)
	}
}

// closeSemaphores answers every waiting permit acquire with fence.ErrClosed.
func (s *Service) closeSemaphores() {
	s.semsMu.Lock()
	sems := make([]*semaphore, 0, len(s.sems))
	for _, sem := range s.sems {
		sems = append(sems, sem)
	}
	s.semsMu.Unlock()
	for _, sem := range sems {
		sem.mu.Lock()
		for _, w := range sem.queue {
			w.resultC <- result{err: fence.ErrClosed}
			waiters.Dec()
		}
		sem.queue = nil
		sem.mu.Unlock()
	}
}
