package lock

import (
	"time"
)

// expire runs when a lease's timer fires.
func (s *Service) expire(resource string) {
	e, err := s.ref(resource)
	if err != nil {
		return // closed
	}
	defer s.unref(resource, e)
	if s.lockEntry(e) != nil {
		return // closed
	}
	defer e.mu.Unlock()
	s.expireLocked(resource, e, s.now())
}

// expireLocked ends the lease if it has expired at now, and hands the resource
// to the next waiter in the same ledger change, unless a lock-delay follows.
func (s *Service) expireLocked(resource string, e *entry, now time.Time) {
	if e.lease != nil && e.lease.Shared {
		s.expireSharedLocked(resource, e, now)
		return
	}
	if e.lease == nil || now.Before(e.lease.Expires) {
		return
	}
	if _, _, ok := s.sessionAlive(e.lease.Session, now); ok {
		// In a session that lives on: the lease lives as long.
		s.followSessionLocked(e)
		return
	}
	expires := e.lease.Expires
	expirationsTotal.Inc()
	// The delay counts from the expiry, not from when it was noticed.
	if until := expires.Add(s.LockDelay); s.LockDelay > 0 && now.Before(until) {
		// No hand-off now: the delay's timer hands off when it ends.
		s.endLocked(resource, e, changeExpired)
		// Recorded, so that a restart or a failover keeps the resource
		// ungranted for a full delay. A failure to record it is logged: the
		// delay still holds while this server runs.
		if err := s.ledger.SetDelay(s.ctx, resource, s.LockDelay); err != nil {
			s.Logger.Error("recording a lock-delay failed", "resource", resource, "error", err)
		}
		s.delayLocked(resource, e, until, s.LockDelay)
		return
	}
	s.handOffLocked(resource, e, changeExpired)
}

// delayLocked starts a lock-delay of length d on the free resource until until.
func (s *Service) delayLocked(resource string, e *entry, until time.Time, d time.Duration) {
	clearDelayLocked(e)
	e.delayUntil = until
	e.delayTimer = time.AfterFunc(until.Sub(s.now()), func() { s.endDelay(resource) })
	lockDelaysTotal.Inc()
	s.Logger.Info("lock delay started", "resource", resource,
		"lock_delay_ms", d.Milliseconds(), "until", until.UTC().Format(time.RFC3339Nano))
}

// delayedLocked reports whether the resource is in its lock-delay at now.
func (s *Service) delayedLocked(e *entry, now time.Time) bool {
	return !e.delayUntil.IsZero() && now.Before(e.delayUntil)
}

func clearDelayLocked(e *entry) {
	e.delayUntil = time.Time{}
	if e.delayTimer != nil {
		e.delayTimer.Stop()
		e.delayTimer = nil
	}
}

// endDelay runs when a lock-delay's timer fires: it hands the resource to the
// first waiter.
func (s *Service) endDelay(resource string) {
	e, err := s.ref(resource)
	if err != nil {
		return // closed
	}
	defer s.unref(resource, e)
	if s.lockEntry(e) != nil {
		return // closed
	}
	defer e.mu.Unlock()
	if e.delayUntil.IsZero() || s.now().Before(e.delayUntil) {
		return // ended already (a revoke), or a new delay started after this timer fired
	}
	clearDelayLocked(e)
	if err := s.ledger.SetDelay(s.ctx, resource, 0); err != nil {
		// The next grant ends the recorded delay anyway.
		s.Logger.Error("recording the end of a lock-delay failed", "resource", resource, "error", err)
	}
	s.Logger.Info("lock delay ended", "resource", resource, "waiters", len(e.queue))
	s.handOffLocked(resource, e, changeNone)
}
