package lock

import (
	"context"
	"fmt"
	"slices"

	"github.com/fence-lock/fence"
)

var _ fence.Transferer = (*Service)(nil)

// Transfer implements fence.Transferer: the end of the lease and the
// successor's grant are one ledger change (Ledger.Handoff), as when a
// release finds a waiter, but the successor is the first waiter of holder
// to rather than the first in the queue. Waiters of other holders keep
// their places. Only the lease's owner, fence.OwnerOf(ctx), may transfer it.
func (s *Service) Transfer(ctx context.Context, resource string, token fence.Token, to string) (fence.Lease, error) {
	if err := validateLease(resource, token, 0); err != nil {
		return fence.Lease{}, fmt.Errorf("lock: transfer: %w", err)
	}
	if fence.IsSessionResource(resource) {
		return fence.Lease{}, fmt.Errorf("lock: transfer: %w: %q is a session's resource: a session is not handed over", fence.ErrBadRequest, resource)
	}
	if to != "" {
		if err := fence.ValidateHolder(to); err != nil {
			return fence.Lease{}, fmt.Errorf("lock: transfer: to: %w", err)
		}
	}
	e, err := s.enter("transfer", resource)
	if err != nil {
		return fence.Lease{}, err
	}
	defer s.leave(resource, e)
	s.expireLocked(resource, e, s.now())
	if err := leaseLostLocked(resource, e, token); err != nil {
		return fence.Lease{}, err
	}
	if e.lease.Shared {
		return fence.Lease{}, fmt.Errorf("lock: transfer %q: %w: token %d is a shared group's: a shared hold is not transferred", resource, fence.ErrBadRequest, token)
	}
	if err := s.forbiddenLocked("transfer", resource, e, fence.OwnerOf(ctx)); err != nil {
		return fence.Lease{}, err
	}
	w, from := s.successorLocked(resource, e, to)
	if w == nil {
		rejectionsTotal.WithLabelValues("no_successor").Inc()
		if to == "" {
			return fence.Lease{}, fmt.Errorf("lock: transfer %q: %w: nobody waits", resource, fence.ErrNotFound)
		}
		return fence.Lease{}, fmt.Errorf("lock: transfer %q: %w: no waiter with holder %q", resource, fence.ErrNotFound, to)
	}
	abandoned, err := s.passToLocked(ctx, resource, e, changeTransferred, w)
	if err != nil {
		// Still held, and the successor still waits, back in its place:
		// the holder may retry.
		if len(e.queue) > from && e.queue[0] == w {
			copy(e.queue[:from], e.queue[1:from+1])
			e.queue[from] = w
		}
		return fence.Lease{}, fmt.Errorf("lock: transfer %q: %w", resource, err)
	}
	transfersTotal.Inc()
	var next fence.Lease
	if e.lease != nil {
		next = *e.lease
	}
	if abandoned {
		// The successor stopped waiting as it was granted: the resource
		// passes on as after a release.
		s.handOffLocked(resource, e, changeAbandoned)
	}
	next.Sequencer = "" // the successor's proof of its lease, not the old holder's
	return next, nil
}

// successorLocked drops the waiters that have gone from the head of the
// queue and returns the first waiter still waiting for a lease of its own
// (not a reservation of a multi-acquire, nor a shared hold, whose grant would not be this
// change), not in a session that is over, whose holder is to (any, if to
// is ""), moved to the head of the queue, and the place it had; nil if
// there is none.
func (s *Service) successorLocked(resource string, e *entry, to string) (*waiter, int) {
	if e.queue.first(resource) == nil {
		return nil, 0
	}
	i := slices.IndexFunc(e.queue, func(w *waiter) bool {
		if w.reserve || w.shared || (to != "" && w.holder != to) || w.ctx.Err() != nil {
			return false
		}
		_, _, alive := s.sessionAlive(w.session, s.now())
		return w.session.IsZero() || alive // one whose session is over cannot have it
	})
	if i < 0 {
		return nil, 0
	}
	w := e.queue[i]
	copy(e.queue[1:i+1], e.queue[:i])
	e.queue[0] = w
	return w, i
}
