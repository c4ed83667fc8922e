package lock

import (
	"context"
	"fmt"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/support/wallclock"
)

// handOffLocked hands the resource on to the first waiter still waiting,
// unless a lock-delay is in progress; later waiters with the same holder are
// retries of that acquire and get the same lease.
//
// With ended "", it serves a free resource and leaves a held one alone.
// Otherwise the current lease is over whatever the ledger answers (it
// expired, or nobody waits for its grant any more), ended is the log line of
// its end, and one ledger change ends it and grants the next waiter (see
// passLocked). A grant whose requests have all gone while it was being
// recorded is ended at once in the same way, so that it does not block the
// queue for a TTL.
func (s *Service) handOffLocked(resource string, e *entry, ended change) {
	if (e.lease != nil || e.reserved) && ended == changeNone {
		return
	}
	for {
		if e.lease != nil {
			l := *e.lease
			abandoned, err := s.passLocked(s.ctx, resource, e, ended)
			if err != nil {
				// As when End fails alone: the lease ends in memory all the
				// same (the next grant overwrites the record), and the first
				// waiter gets a grant of its own below.
				s.clearLeaseLocked(e)
				s.Logger.Error("recording the end of a lease failed", "resource", resource, "token", uint64(l.Token), "error", err)
				s.record(ended, l, 0)
				continue
			}
			if !abandoned {
				return
			}
			ended = changeAbandoned
			continue
		}
		if s.delayedLocked(e, s.now()) {
			return // the delay's timer hands off when it ends
		}
		w := e.queue.first(resource)
		if w == nil {
			return
		}
		e.queue.pop()
		if w.reserve {
			reserveLocked(e, w)
			return
		}
		if w.shared {
			s.serveShared(resource, e, w)
			if e.lease == nil {
				continue // not granted: the next waiter's turn
			}
			s.joinSharedLocked(resource, e)
			return
		}
		l, err := s.grantLocked(s.ctx, resource, e, w.holder, w.owner, w.ttl, w.session)
		if err != nil {
			w.resultC <- result{err: err}
			if e.lease != nil {
				return // recorded but not signed: it runs out its TTL
			}
			continue
		}
		if !s.serve(resource, &e.queue, w, l) {
			return
		}
		ended = changeAbandoned
	}
}

// passLocked ends the current lease, logged as msg, and grants the resource
// to the first waiter still waiting in the same ledger change (one commit,
// with Ledger.Handoff); with nobody waiting, it ends the lease alone. On
// failure it changes nothing in memory and returns the error: the lease is
// still held, and the waiter still first in the queue. It reports whether the
// new grant was abandoned: all its requests had gone when it was recorded.
func (s *Service) passLocked(ctx context.Context, resource string, e *entry, c change) (abandoned bool, err error) {
	return s.passToLocked(ctx, resource, e, c, e.queue.first(resource))
}

// passToLocked is passLocked with the waiter chosen: w, first in the queue,
// or nil for nobody.
func (s *Service) passToLocked(ctx context.Context, resource string, e *entry, c change, w *waiter) (abandoned bool, err error) {
	old := *e.lease
	if w == nil || w.reserve || w.shared {
		lastFence, err := s.ledger.End(ctx, resource, old.Token)
		if err != nil {
			return false, err
		}
		s.clearLeaseLocked(e)
		s.record(c, old, lastFence)
		switch {
		case w == nil:
		case w.reserve:
			// A multi-acquire grants its resources in a change of its own.
			e.queue.pop()
			reserveLocked(e, w)
		default:
			// So does a shared group, which the first shared waiters join;
			// if it could not start, the next waiter is served.
			e.queue.pop()
			s.serveShared(resource, e, w)
			if e.lease == nil {
				s.handOffLocked(resource, e, changeNone)
			} else {
				s.joinSharedLocked(resource, e)
			}
		}
		return false, nil
	}
	// The deadline counts from before the ledger write, as in grantLocked.
	ttl, expires := w.ttl, s.now().Add(w.ttl)
	if !w.session.IsZero() {
		var err error
		if ttl, expires, err = s.joinSession(w.session, w.owner, w.ttl, resource); err != nil {
			// The waiter's session is over: it cannot have the lease.
			e.queue.pop()
			w.resultC <- result{err: fmt.Errorf("lock: acquire %q: %w", resource, err)}
			if c == changeTransferred {
				// Nothing changed: the holder keeps its lease.
				return false, fmt.Errorf("%w: the successor's session has just ended", fence.ErrNotFound)
			}
			return s.passToLocked(ctx, resource, e, c, e.queue.first(resource))
		}
	}
	// ctx is the releaser's or the service's: the new lease is the waiter's.
	token, lastFence, err := s.ledger.Handoff(grantContext(ctx, w.owner, w.session), resource, old.Token, w.holder, ttl, wallclock.Report(expires))
	if err != nil {
		if !w.session.IsZero() {
			s.dropFromSession(w.session, resource)
		}
		return false, err
	}
	if !w.session.IsZero() {
		s.joinedSession(w.session, resource, token, false)
	}
	s.clearLeaseLocked(e)
	s.record(c, old, lastFence)
	e.queue.pop()
	l, err := s.grantedLocked(e, fence.Lease{Resource: resource, Holder: w.holder, Owner: w.owner, Token: token, TTL: ttl, Expires: expires, Session: w.session}, lastFence)
	if err != nil {
		// Recorded but not signed: w learns why, and the lease runs out its TTL.
		w.resultC <- result{err: err}
		return false, nil
	}
	return s.serve(resource, &e.queue, w, l), nil
}

// reserveLocked reserves the free resource for the reserve waiter w, taken
// out of the queue, and tells it so.
func reserveLocked(e *entry, w *waiter) {
	e.reserved = true
	w.resultC <- result{reserved: true}
}

// waiterQueue is the acquires waiting for a resource, or for a permit of a
// semaphore: first come, first served.
type waiterQueue []*waiter

// first answers and drops the waiters at the head of the queue whose callers
// have gone, and returns the first one still waiting, left at the head; nil
// if there is none.
func (q *waiterQueue) first(resource string) *waiter {
	for len(*q) > 0 {
		w := (*q)[0]
		err := w.ctx.Err()
		if err == nil {
			return w
		}
		q.pop()
		w.resultC <- result{err: fmt.Errorf("lock: acquire %q: %w", resource, err)}
	}
	return nil
}

// pop takes the first waiter out of the queue.
func (q *waiterQueue) pop() {
	*q = (*q)[1:]
	waiters.Dec()
}

// remove takes w out of the queue and reports whether it was there.
func (q *waiterQueue) remove(w *waiter) bool {
	for i, x := range *q {
		if x == w {
			*q = append((*q)[:i], (*q)[i+1:]...)
			waiters.Dec()
			return true
		}
	}
	return false
}

// serve answers w, taken out of q, and the later waiters in q of the same
// holder that may use l (see owns) with l, and reports whether all of them
// had gone: then nobody holds l, and the caller ends it at once. The later
// waiters of the same holder but another owner get fence.ErrForbidden, as an
// acquire arriving now would: they must not share another principal's
// lease.
func (s *Service) serve(resource string, q *waiterQueue, w *waiter, l fence.Lease) (abandoned bool) {
	served := []*waiter{w}
	rest := (*q)[:0]
	for _, x := range *q {
		switch {
		case x.holder != w.holder || x.reserve || x.shared || x.session != w.session:
			rest = append(rest, x)
		case owns(l, x.owner):
			served = append(served, x)
			waiters.Dec()
		default:
			waiters.Dec()
			x.resultC <- result{err: s.forbidden("acquire", resource, l, x.owner)}
		}
	}
	*q = rest
	abandoned = true
	for _, x := range served {
		if err := x.ctx.Err(); err != nil {
			x.resultC <- result{err: fmt.Errorf("lock: acquire %q: %w", resource, err)}
		} else {
			x.resultC <- result{lease: l}
			abandoned = false
		}
	}
	return abandoned
}

// endLocked ends the current lease in the ledger and in memory, and hands
// nothing off (a lock-delay follows). A failure to record it is logged: the
// next grant overwrites the record anyway.
func (s *Service) endLocked(resource string, e *entry, c change) {
	l := *e.lease
	s.clearLeaseLocked(e)
	lastFence, err := s.ledger.End(s.ctx, resource, l.Token)
	if err != nil {
		s.Logger.Error("recording the end of a lease failed", "resource", resource, "token", uint64(l.Token), "error", err)
	}
	s.record(c, l, lastFence)
}
