package lock

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fence-lock/fence"
)

// Sessions (see fence.SessionResource): a session is an exclusive lease on
// its session resource, granted, renewed, released, expired and revoked as
// any lease; a lease acquired with fence.WithSession joins it. The service
// keeps, per session (a session resource and its lease's token), the
// session's owner, TTL and expiry and the leases in it (sessions, under
// sessMu, a leaf: taken last, under entries' or a semaphore's mu, and never
// held while waiting for another lock).
//
// A lease in a session has the session's TTL and expiry. Its timer still
// fires, but while the session lives it only moves the lease's expiry to the
// session's (expireLocked); renewing the session, or acquiring it again as
// its holder, sets them all to the session's, later or earlier
// (syncSession). When the session's lease ends, the session is over and no
// lease joins it any more: after a release or a revoke of the session the
// service releases or revokes every lease in it before it answers
// (endSession); after an expiry each lease expires by its own timer, at the
// session's expiry. A restore links the restored leases to their restored
// session; a lease whose session was not restored (it ended before the
// leases in it were recorded as ended) runs out its own TTL.

// session is the state of one session: from the grant of its lease until
// that lease has ended and the leases in it too.
type session struct {
	owner   string
	ttl     time.Duration
	expires time.Time
	over    bool                   // the session's lease has ended
	leases  map[string]fence.Token // resource → token of the leases in it
	joining map[string]int         // resource → grants joining it, not yet recorded
	// asked are the leases in it asked to let go, by resource: the
	// session's renewals list them (fence.Lease.Asked) until they end.
	asked map[string]fence.AskedLease
}

// empty reports whether no lease is in the session or joining it.
func (st *session) empty() bool { return len(st.leases) == 0 && len(st.joining) == 0 }

// noteSessionLocked records the session of l, a lease just set on a session
// resource (granted, renewed or restored).
func (s *Service) noteSessionLocked(l fence.Lease) {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	ref := fence.SessionRef{Resource: l.Resource, Token: l.Token}
	st := s.sessions[ref]
	if st == nil {
		st = &session{leases: make(map[string]fence.Token), joining: make(map[string]int), asked: make(map[string]fence.AskedLease)}
		s.sessions[ref] = st
	}
	st.owner, st.ttl, st.expires = l.Owner, l.TTL, l.Expires
}

// leftLeaseLocked notes that l, a lease being cleared, has ended: a lease in
// a session leaves it, and a session's own lease ends the session.
func (s *Service) leftLeaseLocked(l fence.Lease) {
	if l.Session.IsZero() && !fence.IsSessionResource(l.Resource) {
		return
	}
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if st := s.sessions[l.Session]; st != nil && st.leases[l.Resource] == l.Token {
		delete(st.leases, l.Resource)
		delete(st.asked, l.Resource)
		if st.over && st.empty() {
			delete(s.sessions, l.Session)
		}
	}
	own := fence.SessionRef{Resource: l.Resource, Token: l.Token}
	if st := s.sessions[own]; st != nil {
		st.over = true
		if st.empty() {
			delete(s.sessions, own)
		}
	}
}

// sessionAlive returns the expiry and TTL of session ref if it lives at
// now.
func (s *Service) sessionAlive(ref fence.SessionRef, now time.Time) (time.Time, time.Duration, bool) {
	if ref.IsZero() {
		return time.Time{}, 0, false
	}
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	st := s.sessions[ref]
	if st == nil || st.over || !now.Before(st.expires) {
		return time.Time{}, 0, false
	}
	return st.expires, st.ttl, true
}

// followSessionLocked sets the expiry and TTL of the resource's lease, in
// session ref, to the session's, if it lives; else it leaves the lease to
// its own expiry.
func (s *Service) followSessionLocked(e *entry) {
	l := *e.lease
	if until, ttl, ok := s.sessionAlive(l.Session, s.now()); ok && (!until.Equal(l.Expires) || ttl != l.TTL) {
		l.Expires, l.TTL = until, ttl
		s.setLeaseLocked(e, l)
	}
}

// joinSession checks that a lease of owner's with TTL ttl (0 for the
// session's) may join session ref now, and returns the session's TTL and
// expiry, the lease's. With resource not "" it counts resource in the
// session at once, so that an end of the session that comes before the
// grant is recorded ends the new lease too; a grant that fails calls
// dropFromSession.
func (s *Service) joinSession(ref fence.SessionRef, owner string, ttl time.Duration, resource string) (time.Duration, time.Time, error) {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	st := s.sessions[ref]
	switch {
	case st == nil || st.over || !s.now().Before(st.expires):
		// The session's lease is lost: the answer names the session's
		// resource and token, and the session open on it now, if any.
		rejectionsTotal.WithLabelValues("session_over").Inc()
		lost := &fence.LeaseLostError{Resource: ref.Resource, Presented: ref.Token}
		now := s.now()
		for other, st := range s.sessions {
			if other.Resource == ref.Resource && other != ref && !st.over && now.Before(st.expires) {
				lost.Current = other.Token
			}
		}
		return 0, time.Time{}, lost
	case st.owner != "" && st.owner != owner:
		rejectionsTotal.WithLabelValues("forbidden").Inc()
		return 0, time.Time{}, fmt.Errorf("%w: session %q belongs to another principal", fence.ErrForbidden, ref.Resource)
	case ttl != 0 && ttl != st.ttl:
		return 0, time.Time{}, fmt.Errorf("%w: a lease in session %q has the session's TTL, %s, not %s", fence.ErrBadRequest, ref.Resource, st.ttl, ttl)
	}
	if resource != "" {
		st.joining[resource]++
	}
	return st.ttl, st.expires, nil
}

// joinedSession records token as resource's lease in session ref, joined
// with joinSession (restored, for a restore).
func (s *Service) joinedSession(ref fence.SessionRef, resource string, token fence.Token, restored bool) {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if st := s.sessions[ref]; st != nil {
		if !restored {
			st.unjoinLocked(resource)
		}
		st.leases[resource] = token
	}
}

// dropFromSession undoes joinSession for a grant that failed.
func (s *Service) dropFromSession(ref fence.SessionRef, resource string) {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if st := s.sessions[ref]; st != nil {
		st.unjoinLocked(resource)
		if st.over && st.empty() {
			delete(s.sessions, ref)
		}
	}
}

func (st *session) unjoinLocked(resource string) {
	if st.joining[resource]--; st.joining[resource] <= 0 {
		delete(st.joining, resource)
	}
}

// sessionResources returns the resources whose leases are in session ref
// or joining it.
func (s *Service) sessionResources(ref fence.SessionRef) []string {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	st := s.sessions[ref]
	if st == nil {
		return nil
	}
	rs := make([]string, 0, len(st.leases)+len(st.joining))
	for r := range st.leases {
		rs = append(rs, r)
	}
	for r := range st.joining {
		if _, ok := st.leases[r]; !ok {
			rs = append(rs, r)
		}
	}
	return rs
}

var _ fence.SessionRenewer = (*Service)(nil)

// RenewSession implements fence.SessionRenewer.
func (s *Service) RenewSession(ctx context.Context, ref fence.SessionRef, ttl time.Duration) (fence.Lease, []fence.AskedLease, error) {
	if !fence.IsSessionResource(ref.Resource) {
		return fence.Lease{}, nil, fmt.Errorf("lock: renew: %w: %q is no session's resource", fence.ErrBadRequest, ref.Resource)
	}
	l, err := s.Renew(ctx, ref.Resource, ref.Token, ttl)
	if err != nil {
		return fence.Lease{}, nil, err
	}
	return l, s.askedOf(ref), nil
}

// askedInSession notes that the lease l, in a session, was asked to let
// go by at: the session's renewals list it until it ends.
func (s *Service) askedInSession(l fence.Lease, at time.Time) {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if st := s.sessions[l.Session]; st != nil && st.leases[l.Resource] == l.Token {
		st.asked[l.Resource] = fence.AskedLease{Resource: l.Resource, Token: l.Token, RevokeAt: at}
	}
}

// askedOf returns the leases in session ref asked to let go, in byte order
// of resource; nil if none.
func (s *Service) askedOf(ref fence.SessionRef) []fence.AskedLease {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	st := s.sessions[ref]
	if st == nil || len(st.asked) == 0 {
		return nil
	}
	return slices.SortedFunc(maps.Values(st.asked), func(a, b fence.AskedLease) int { return strings.Compare(a.Resource, b.Resource) })
}

// syncSession sets the expiry and TTL of every lease in session ref to the
// session's, after a renewal of the session (or its holder's acquire
// again): later, or earlier for a shorter TTL, so that none outlives it.
func (s *Service) syncSession(ref fence.SessionRef) {
	for _, res := range s.sessionResources(ref) {
		e, err := s.enter("renew", res)
		if err != nil {
			return // closed
		}
		if l := e.lease; l != nil && l.Session == ref {
			s.followSessionLocked(e)
		}
		s.leave(res, e)
	}
}

// endSession ends every lease in session ref, which has just been released
// (revoke false) or revoked (revoke true), the same way. It records the
// ends with the service's own context: the caller going away must not
// leave them half done.
func (s *Service) endSession(ref fence.SessionRef, revoke bool) {
	ctx := s.ctx
	for _, res := range s.sessionResources(ref) {
		e, err := s.enter("end session", res)
		if err != nil {
			return // closed
		}
		if l := e.lease; l == nil || l.Session != ref {
			s.leave(res, e)
			continue
		}
		if revoke {
			if _, err := s.revokeLocked(ctx, res, e); err != nil {
				s.Logger.Error("revoking a lease of a revoked session failed", "resource", res, "session", ref.Resource, "error", err)
			}
			s.leave(res, e)
			continue
		}
		abandoned, err := s.passLocked(ctx, res, e, changeReleased)
		if err != nil {
			// As a failed release: the lease stays, and runs out its TTL
			// now that its session is over.
			s.Logger.Error("releasing a lease of a closed session failed", "resource", res, "session", ref.Resource, "error", err)
		} else {
			releasesTotal.Inc()
			if abandoned {
				s.handOffLocked(res, e, changeAbandoned)
			}
		}
		s.leave(res, e)
	}
}
