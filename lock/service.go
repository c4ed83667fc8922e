package lock

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/support/wallclock"
	"github.com/fence-lock/fence/watch"
)

// Service is the lock service. It implements fence.Locker and is safe for
// concurrent use once Open has returned.
type Service struct {
	// Logger receives one line per grant, renew, release, expiry, revoke,
	// restored lease and lock-delay. Default: slog.Default(). Lines of
	// grants, renewals, releases and expiries carry no source location
	// (see internal/support/logline).
	Logger *slog.Logger

	// LockDelay is how long a resource stays unavailable after a lease
	// EXPIRES (not after a release or a revoke): an old holder that paused
	// past its TTL may still be acting, so the service waits this long
	// before granting the resource again. Acquires during the delay get
	// *fence.LockHeldError with RetryAfter the rest of the delay; waiters
	// keep their order and are served when it ends. A revoke ends the delay
	// at once, since it fences the old holder. Zero, the default, means no
	// delay; at most MaxLockDelay. Set it before Open.
	LockDelay time.Duration

	// Signer, if not nil, signs every grant: the lease's Sequencer binds its
	// resource, holder, token and expiry at the grant. A retried acquire and
	// a renew return the same sequencer. Nil, the default, means leases
	// carry no sequencer. Set it before Open.
	Signer *fence.SigningKey

	// MaxWaiters caps the acquires queued on one resource: an acquire that
	// would queue beyond it gets *fence.LockHeldError at once (RetryAfter as
	// usual) and counts in fence_lock_waiters_rejected_total. Zero, the
	// default, means no cap. Set it before Open.
	MaxWaiters int

	// Events, if not nil, receives an event for every grant (followed by a
	// FenceRaised event), renewal, release, expiry and revoke (followed by
	// a FenceRaised event), published while the change's resource is still
	// locked, so that the events of one resource are in the order of its
	// changes. Restored leases publish nothing. Set it before Open.
	Events *watch.Hub

	// Clock, if not nil, is the clock that leases and lock-delays are
	// timed by, instead of time.Now, whose monotonic reading no step of
	// the wall clock moves. Only the negative control of the clock-skew
	// fault sets it (to wallclock.LeaseClock(), which keeps wallclock.Report
	// from skewing its times twice). Set it before Open.
	Clock func() time.Time

	ledger fence.Ledger

	mu        sync.Mutex // guards resources and entry.refs; taken before an entry's mu, never after
	resources map[string]*entry
	semsMu    sync.Mutex                    // guards sems; taken last (under a semaphore's mu at most)
	sems      map[string]*semaphore         // the semaphores with permits held or waited for (semaphore.go)
	sessMu    sync.Mutex                    // guards sessions; taken last (under an entry's mu at most)
	sessions  map[fence.SessionRef]*session // the sessions whose lease is held or that have leases in them (session.go)
	closed    atomic.Bool
	closeOnce sync.Once
	wg        sync.WaitGroup // one count per reference to an entry (a call in flight)

	// ctx is the service's own, for ledger changes made on nobody's behalf
	// (expiry, hand-off to a waiter); Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
}

// MaxLockDelay is the longest Service.LockDelay.
const MaxLockDelay = 60 * time.Second

var (
	_ fence.Locker  = (*Service)(nil)
	_ fence.Revoker = (*Service)(nil)
	_ fence.Lister  = (*Service)(nil)
)

// entry is the in-memory state of one resource. It lives while it is held,
// has waiters, or a call refers to it.
type entry struct {
	mu      sync.Mutex // serialises changes to this resource; held across ledger writes
	refs    int        // guarded by Service.mu
	lease   *fence.Lease
	shared  map[string]*fence.Lease // while lease is a shared group's: its holders' holds, by holder (shared.go)
	granted time.Time               // when lease was granted; zero for a restored lease, whose grant time is unknown
	timer   *time.Timer             // fires at lease.Expires
	queue   waiterQueue             // empty while the resource is free, except during a lock-delay or a reservation

	delayUntil time.Time   // while lease == nil: no grant before it (lock-delay); zero if none
	delayTimer *time.Timer // fires at delayUntil

	revokeTimer *time.Timer // fires at lease.RevokeAt, a revoke requested (revoke.go)

	// reserved: while lease == nil, a multi-acquire has this resource to
	// itself until it grants all of its resources at once or gives up
	// (multi.go); nothing else is granted it meanwhile.
	reserved bool
}

type waiter struct {
	ctx     context.Context
	holder  string
	owner   string // fence.OwnerOf(ctx): the principal the lease will belong to
	ttl     time.Duration
	session fence.SessionRef // the session the lease joins; zero for none
	reserve bool             // a multi-acquire's: it is served a reservation, not a lease
	shared  bool             // a shared acquire's: it is served a hold in a shared group (shared.go)
	resultC chan result      // buffered: the hand-off never blocks
}

type result struct {
	lease    fence.Lease
	reserved bool // a reserve waiter's: the resource is reserved for it
	err      error
}

// NewService returns a lock service that records its grants in ledger. Call
// Open before use.
func NewService(ledger fence.Ledger) *Service {
	return &Service{ledger: ledger, Logger: slog.Default(), resources: make(map[string]*entry), sems: make(map[string]*semaphore),
		sessions: make(map[fence.SessionRef]*session)}
}

// Open restores the leases and lock-delays recorded in the ledger and starts
// serving. Every recorded lease gets its full TTL from now, and every
// lock-delay its full length, whatever the wall clock says: the record may
// come from another machine, whose clock this one must not trust to end a
// lease early (a restart or a failover costs waiting, never safety). The
// recorded expiries are not rewritten: the next restore ignores them too.
func (s *Service) Open(ctx context.Context) error {
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.LockDelay < 0 || s.LockDelay > MaxLockDelay {
		return fmt.Errorf("lock: open: %w: lock delay %s is outside 0..%s", fence.ErrBadRequest, s.LockDelay, MaxLockDelay)
	}
	if s.Signer != nil {
		if _, err := s.Signer.MarshalText(); err != nil { // validates the key
			return fmt.Errorf("lock: open: %w", err)
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	leases, delays, err := s.ledger.Leases(ctx)
	if err != nil {
		return fmt.Errorf("lock: open: %w", err)
	}
	for _, l := range leases {
		l.Expires = s.now().Add(l.TTL)
		// The ledger keeps no sequencer: sign the restored lease again.
		if l.Sequencer, err = s.sign(l); err != nil {
			return fmt.Errorf("lock: open: restore lease %q: %w", l.Resource, err)
		}
		if l.Shared {
			e := s.resources[l.Resource]
			if e == nil {
				e = &entry{}
				s.resources[l.Resource] = e
			}
			s.addShareLocked(e, l)
			s.record(changeRestored, l, l.Token)
			continue
		}
		e := &entry{}
		s.resources[l.Resource] = e
		s.setLeaseLocked(e, l)
		leasesHeld.Inc()
		s.record(changeRestored, l, l.Token)
		s.restorePermit(l.Resource)
	}
	// The leases in a session restored above are the session's again, and
	// expire with it.
	for _, l := range leases {
		if _, _, ok := s.sessionAlive(l.Session, s.now()); ok {
			s.joinedSession(l.Session, l.Resource, l.Token, true)
			s.followSessionLocked(s.resources[l.Resource])
		}
	}
	// A revoke requested before gets its full grace again, from now.
	for _, l := range leases {
		if e := s.resources[l.Resource]; l.RevokeGrace > 0 && e.lease != nil && e.lease.RevokeAt.IsZero() {
			s.askLocked(l.Resource, e, s.now().Add(l.RevokeGrace), l.RevokeGrace)
		}
	}
	for _, d := range delays {
		e := &entry{}
		s.resources[d.Resource] = e
		s.delayLocked(d.Resource, e, s.now().Add(d.Delay), d.Delay)
		s.restorePermit(d.Resource)
	}
	return nil
}

// Close stops the service: waiting acquires and calls that arrive later
// return fence.ErrClosed, calls in flight finish, and expiry timers stop.
// Leases stay recorded in the ledger, to be restored by the next Open. It does
// not close the ledger. Every call returns after the first has finished.
func (s *Service) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.mu.Lock()
		entries := make([]*entry, 0, len(s.resources))
		for _, e := range s.resources {
			entries = append(entries, e)
		}
		s.mu.Unlock()
		// A call that takes e.mu after this loop has passed e finds the
		// service closed; one that held it before has finished its change.
		for _, e := range entries {
			e.mu.Lock()
			if e.lease != nil {
				s.clearLeaseLocked(e)
			}
			clearDelayLocked(e)
			for _, w := range e.queue {
				w.resultC <- result{err: fence.ErrClosed}
				waiters.Dec()
			}
			e.queue = nil
			e.mu.Unlock()
		}
		s.closeSemaphores()
		s.wg.Wait()
		if s.cancel != nil {
			s.cancel()
		}
	})
	return nil
}

// lockEntry locks e for a change, unless the service is closed.
func (s *Service) lockEntry(e *entry) error {
	e.mu.Lock()
	if s.closed.Load() {
		e.mu.Unlock()
		return fence.ErrClosed
	}
	return nil
}

// ref returns the resource's entry, creating it, and counts the caller in;
// unref must follow.
func (s *Service) ref(resource string) (*entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil, fence.ErrClosed
	}
	e := s.resources[resource]
	if e == nil {
		e = &entry{}
		s.resources[resource] = e
	}
	e.refs++
	s.wg.Add(1)
	return e, nil
}

// enter counts the caller of op in on the resource's entry, as ref, and
// locks it, as lockEntry: the opening of every operation on one resource.
// leave undoes both; an operation that unlocks early calls unref instead.
func (s *Service) enter(op, resource string) (*entry, error) {
	e, err := s.ref(resource)
	if err == nil {
		if err = s.lockEntry(e); err != nil {
			s.unref(resource, e)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("lock: %s %q: %w", op, resource, err)
	}
	return e, nil
}

// leave unlocks the entry that enter returned and counts the caller out.
func (s *Service) leave(resource string, e *entry) {
	e.mu.Unlock()
	s.unref(resource, e)
}

// unref counts the caller out of the resource's entry (see ref), which it
// forgets once nothing holds, waits for or refers to it. A permit's slot
// that becomes free serves its semaphore's queue (see permitsFreed).
func (s *Service) unref(resource string, e *entry) {
	if s.unrefQuiet(resource, e) {
		s.permitsFreed(resource)
	}
}

// unrefQuiet is unref without serving a semaphore; it reports whether the
// entry was forgotten.
func (s *Service) unrefQuiet(resource string, e *entry) (forgotten bool) {
	s.mu.Lock()
	e.refs--
	if e.refs == 0 {
		// With no references left only Close may hold e.mu, and briefly: this
		// never waits for a ledger write while holding s.mu.
		e.mu.Lock()
		// An entry in its lock-delay stays: it is what keeps the resource unavailable.
		forgotten = e.lease == nil && len(e.queue) == 0 && e.delayUntil.IsZero() && !e.reserved
		e.mu.Unlock()
		if forgotten {
			delete(s.resources, resource)
		}
	}
	s.mu.Unlock()
	s.wg.Done()
	return forgotten
}

// Status implements fence.Locker.
func (s *Service) Status(ctx context.Context, resource string) (fence.LockStatus, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return fence.LockStatus{}, fmt.Errorf("lock: status: %w", err)
	}
	e, err := s.enter("status", resource)
	if err != nil {
		return fence.LockStatus{}, err
	}
	defer s.unref(resource, e) // unlocked before the ledger is read
	s.expireLocked(resource, e, s.now())
	st := fence.LockStatus{Resource: resource}
	if e.lease != nil {
		st.Held, st.Holder, st.Token, st.Expires, st.Session = true, e.lease.Holder, e.lease.Token, e.lease.Expires, e.lease.Session
		st.RevokeAt = e.lease.RevokeAt
		if e.lease.Shared {
			st.Shared, st.Holders = true, holdersLocked(e)
		}
	}
	e.mu.Unlock()
	// Read after the lease, so that LastToken >= Token even if a grant slips in between.
	if st.LastToken, err = s.ledger.LastToken(ctx, resource); err != nil {
		return fence.LockStatus{}, fmt.Errorf("lock: status %q: %w", resource, err)
	}
	return st, nil
}

// List implements fence.Lister from the service's memory, and then, if the
// ledger can (state.DB's Barrier), confirms that memory is current, so that
// a server that no longer leads its store lists nothing. A lease whose
// expiry the service has not noticed yet is not listed.
func (s *Service) List(ctx context.Context, prefix, after string, limit int) ([]fence.LockStatus, bool, error) {
	if limit < 1 || limit > fence.MaxListLimit {
		return nil, false, fmt.Errorf("lock: list: %w: limit %d is outside 1..%d", fence.ErrBadRequest, limit, fence.MaxListLimit)
	}
	now := s.now()
	var locks []fence.LockStatus
	s.mu.Lock()
	for name, e := range s.resources {
		if !strings.HasPrefix(name, prefix) || name <= after {
			continue
		}
		e.mu.Lock() // after s.mu, as always; no ledger write under these
		if l := e.lease; l != nil && now.Before(l.Expires) {
			st := fence.LockStatus{Resource: name, Held: true, Holder: l.Holder,
				Token: l.Token, Expires: l.Expires, Waiters: len(e.queue), Session: l.Session, RevokeAt: l.RevokeAt}
			if l.Shared {
				st.Shared, st.Holders = true, holdersLocked(e)
			}
			locks = append(locks, st)
		}
		e.mu.Unlock()
	}
	s.mu.Unlock()
	slices.SortFunc(locks, func(a, b fence.LockStatus) int { return strings.Compare(a.Resource, b.Resource) })
	more := len(locks) > limit
	if more {
		locks = locks[:limit]
	}
	if b, ok := s.ledger.(interface{ Barrier(context.Context) error }); ok {
		if err := b.Barrier(ctx); err != nil {
			return nil, false, fmt.Errorf("lock: list: %w", err)
		}
	}
	return locks, more, nil
}

// now reads the service's clock.
func (s *Service) now() time.Time {
	if s.Clock != nil {
		return s.Clock()
	}
	return time.Now()
}

// sign returns the sequencer of l, "" if the service has no Signer.
func (s *Service) sign(l fence.Lease) (string, error) {
	if s.Signer == nil {
		return "", nil
	}
	return s.Signer.Sign(fence.Sequencer{Resource: l.Resource, Holder: l.Holder, Token: l.Token, Expires: wallclock.Report(l.Expires)})
}
