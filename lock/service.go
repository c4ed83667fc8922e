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
	"github.com/fence-lock/fence/internal/logline"
	"github.com/fence-lock/fence/internal/wallclock"
	"github.com/fence-lock/fence/watch"
)

// Service is the lock service. It implements fence.Locker and is safe for
// concurrent use once Open has returned.
type Service struct {
	// Logger receives one line per grant, renew, release, expiry, revoke,
	// restored lease and lock-delay. Default: slog.Default(). Lines of
	// grants, renewals, releases and expiries carry no source location
	// (see internal/logline).
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
	granted time.Time   // when lease was granted; zero for a restored lease, whose grant time is unknown
	timer   *time.Timer // fires at lease.Expires
	queue   []*waiter   // first come, first served; empty while the resource is free, except during a lock-delay

	delayUntil time.Time   // while lease == nil: no grant before it (lock-delay); zero if none
	delayTimer *time.Timer // fires at delayUntil
}

type waiter struct {
	ctx     context.Context
	holder  string
	owner   string // fence.OwnerOf(ctx): the principal the lease will belong to
	ttl     time.Duration
	resultC chan result // buffered: the hand-off never blocks
}

type result struct {
	lease fence.Lease
	err   error
}

// NewService returns a lock service that records its grants in ledger. Call
// Open before use.
func NewService(ledger fence.Ledger) *Service {
	return &Service{ledger: ledger, Logger: slog.Default(), resources: make(map[string]*entry)}
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
		e := &entry{}
		s.resources[l.Resource] = e
		s.setLeaseLocked(e, l)
		leasesHeld.Inc()
		s.record(changeRestored, l, l.Token)
	}
	for _, d := range delays {
		e := &entry{}
		s.resources[d.Resource] = e
		s.delayLocked(d.Resource, e, s.now().Add(d.Delay), d.Delay)
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
				clearLeaseLocked(e)
			}
			clearDelayLocked(e)
			for _, w := range e.queue {
				w.resultC <- result{err: fence.ErrClosed}
				waiters.Dec()
			}
			e.queue = nil
			e.mu.Unlock()
		}
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

func (s *Service) unref(resource string, e *entry) {
	s.mu.Lock()
	e.refs--
	if e.refs == 0 {
		// With no references left only Close may hold e.mu, and briefly: this
		// never waits for a ledger write while holding s.mu.
		e.mu.Lock()
		// An entry in its lock-delay stays: it is what keeps the resource unavailable.
		free := e.lease == nil && len(e.queue) == 0 && e.delayUntil.IsZero()
		e.mu.Unlock()
		if free {
			delete(s.resources, resource)
		}
	}
	s.mu.Unlock()
	s.wg.Done()
}

// Acquire implements fence.Locker. The lease belongs to fence.OwnerOf(ctx).
func (s *Service) Acquire(ctx context.Context, resource, holder string, ttl, wait time.Duration) (fence.Lease, error) {
	start := time.Now()
	owner := fence.OwnerOf(ctx)
	if err := validateAcquire(resource, holder, ttl, wait); err != nil {
		return fence.Lease{}, fmt.Errorf("lock: acquire: %w", err)
	}
	e, err := s.ref(resource)
	if err != nil {
		return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w", resource, err)
	}
	defer s.unref(resource, e)

	if err := s.lockEntry(e); err != nil {
		return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w", resource, err)
	}
	now := s.now()
	s.expireLocked(resource, e, now)
	switch {
	case e.lease == nil && s.delayedLocked(e, now):
		if wait <= 0 {
			err := s.heldErrorLocked(resource, e, now)
			e.mu.Unlock()
			return fence.Lease{}, err
		}
		// Queued behind earlier waiters; the end of the delay hands off.
	case e.lease == nil:
		l, err := s.grantLocked(ctx, resource, e, holder, owner, ttl)
		e.mu.Unlock()
		if err == nil {
			waitSeconds.Observe(time.Since(start).Seconds())
		}
		return l, err
	case e.lease.Holder == holder:
		// A retry by the holder: the same token, the TTL of this request;
		// but only for the lease's owner, since anyone can name a holder.
		if err := s.forbiddenLocked("acquire", resource, e, owner); err != nil {
			e.mu.Unlock()
			return fence.Lease{}, err
		}
		l, err := s.refreshLocked(ctx, resource, e, ttl, now, changeRetried)
		e.mu.Unlock()
		return l, err
	case wait <= 0:
		err := s.heldErrorLocked(resource, e, now)
		e.mu.Unlock()
		return fence.Lease{}, err
	}
	if s.MaxWaiters > 0 && len(e.queue) >= s.MaxWaiters {
		waitersRejectedTotal.Inc()
		err := s.heldErrorLocked(resource, e, now)
		e.mu.Unlock()
		return fence.Lease{}, err
	}
	w := &waiter{ctx: ctx, holder: holder, owner: owner, ttl: ttl, resultC: make(chan result, 1)}
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
	e.mu.Lock()
	if dequeueLocked(e, w) {
		var err error
		if cause != nil {
			err = fmt.Errorf("lock: acquire %q: %w", resource, cause)
		} else {
			err = s.heldErrorLocked(resource, e, s.now())
		}
		e.mu.Unlock()
		return fence.Lease{}, err
	}
	e.mu.Unlock()
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

func dequeueLocked(e *entry, w *waiter) bool {
	for i, q := range e.queue {
		if q == w {
			e.queue = append(e.queue[:i], e.queue[i+1:]...)
			waiters.Dec()
			return true
		}
	}
	return false
}

// Renew implements fence.Locker: only the lease's owner, fence.OwnerOf(ctx),
// may renew it.
func (s *Service) Renew(ctx context.Context, resource string, token fence.Token, ttl time.Duration) (fence.Lease, error) {
	if err := validateLease(resource, token, ttl); err != nil {
		return fence.Lease{}, fmt.Errorf("lock: renew: %w", err)
	}
	e, err := s.ref(resource)
	if err != nil {
		return fence.Lease{}, fmt.Errorf("lock: renew %q: %w", resource, err)
	}
	defer s.unref(resource, e)
	if err := s.lockEntry(e); err != nil {
		return fence.Lease{}, fmt.Errorf("lock: renew %q: %w", resource, err)
	}
	defer e.mu.Unlock()
	now := s.now()
	s.expireLocked(resource, e, now)
	if err := leaseLostLocked(resource, e, token); err != nil {
		return fence.Lease{}, err
	}
	if err := s.forbiddenLocked("renew", resource, e, fence.OwnerOf(ctx)); err != nil {
		return fence.Lease{}, err
	}
	return s.refreshLocked(ctx, resource, e, ttl, now, changeRenewed)
}

// Release implements fence.Locker: only the lease's owner, fence.OwnerOf(ctx),
// may release it.
func (s *Service) Release(ctx context.Context, resource string, token fence.Token) error {
	if err := validateLease(resource, token, 0); err != nil {
		return fmt.Errorf("lock: release: %w", err)
	}
	e, err := s.ref(resource)
	if err != nil {
		return fmt.Errorf("lock: release %q: %w", resource, err)
	}
	defer s.unref(resource, e)
	if err := s.lockEntry(e); err != nil {
		return fmt.Errorf("lock: release %q: %w", resource, err)
	}
	defer e.mu.Unlock()
	s.expireLocked(resource, e, s.now())
	if err := leaseLostLocked(resource, e, token); err != nil {
		return err
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

// Status implements fence.Locker.
func (s *Service) Status(ctx context.Context, resource string) (fence.LockStatus, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return fence.LockStatus{}, fmt.Errorf("lock: status: %w", err)
	}
	e, err := s.ref(resource)
	if err != nil {
		return fence.LockStatus{}, fmt.Errorf("lock: status %q: %w", resource, err)
	}
	defer s.unref(resource, e)
	if err := s.lockEntry(e); err != nil {
		return fence.LockStatus{}, fmt.Errorf("lock: status %q: %w", resource, err)
	}
	s.expireLocked(resource, e, s.now())
	st := fence.LockStatus{Resource: resource}
	if e.lease != nil {
		st.Held, st.Holder, st.Token, st.Expires = true, e.lease.Holder, e.lease.Token, e.lease.Expires
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
			locks = append(locks, fence.LockStatus{Resource: name, Held: true, Holder: l.Holder,
				Token: l.Token, Expires: l.Expires, Waiters: len(e.queue)})
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

// Revoke implements fence.Revoker: it ends the current lease, if any, and
// raises the resource's fence to a new token issued to nobody, so that the
// old holder is fenced at once; then waiters are served as after a release.
// A lock-delay in progress ends too, since the old holder is fenced. A revoke
// is logged ("lock revoked") and counted in fence_lock_revocations_total.
func (s *Service) Revoke(ctx context.Context, resource string) (fence.RevokeResult, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return fence.RevokeResult{}, fmt.Errorf("lock: revoke: %w", err)
	}
	e, err := s.ref(resource)
	if err != nil {
		return fence.RevokeResult{}, fmt.Errorf("lock: revoke %q: %w", resource, err)
	}
	defer s.unref(resource, e)
	if err := s.lockEntry(e); err != nil {
		return fence.RevokeResult{}, fmt.Errorf("lock: revoke %q: %w", resource, err)
	}
	defer e.mu.Unlock()
	if e.lease != nil && !s.now().Before(e.lease.Expires) {
		// Expired, not noticed yet. No hand-off here: it would grant the
		// first waiter a lease that this revoke would then take away. The
		// revoke ends the recorded lease anyway, and hands off after.
		l := *e.lease
		clearLeaseLocked(e)
		expirationsTotal.Inc()
		s.record(changeExpired, l, l.Token)
	}
	var holder string
	if e.lease != nil {
		holder = e.lease.Holder
	}
	lastFence, revoked, err := s.ledger.Revoke(ctx, resource)
	if err != nil {
		// The lease stays in memory: if the ledger did record the revoke,
		// the old holder is fenced anyway, and a retry revokes again.
		return fence.RevokeResult{}, fmt.Errorf("lock: revoke %q: %w", resource, err)
	}
	if e.lease != nil {
		clearLeaseLocked(e)
	}
	clearDelayLocked(e)
	revocationsTotal.Inc()
	s.Logger.Info("lock revoked", "resource", resource, "holder", holder,
		"token", uint64(revoked), "last_fence", uint64(lastFence))
	s.Events.Publish(watch.Event{Type: watch.Revoked, Resource: resource, Holder: holder, Token: revoked, LastFence: lastFence})
	s.Events.Publish(watch.Event{Type: watch.FenceRaised, Resource: resource, Token: lastFence, LastFence: lastFence})
	// The grant to the first waiter is a second ledger change, not part of
	// a Handoff: a revoke ends whatever lease is recorded and issues a token
	// to nobody first, which Handoff, ending one lease by its token, does
	// not. A revoke is rare, and a crash between the two changes leaves the
	// resource fenced and free.
	s.handOffLocked(resource, e, changeNone)
	return fence.RevokeResult{Resource: resource, Revoked: revoked, LastFence: lastFence}, nil
}

// grantLocked issues the next token to holder, for owner; the ledger raises
// the resource's fence, and records the owner, before this returns.
func (s *Service) grantLocked(ctx context.Context, resource string, e *entry, holder, owner string, ttl time.Duration) (fence.Lease, error) {
	// The deadline counts from before the ledger write: the holder's own clock
	// started even earlier, so it never believes in a lease the service has ended.
	expires := s.now().Add(ttl)
	// The ledger takes the owner from ctx, which is the service's own (or
	// another caller's) when a waiter is served: set it to the grantee's.
	token, err := s.ledger.Grant(fence.WithOwner(ctx, owner), resource, holder, ttl, wallclock.Report(expires))
	if err != nil {
		return fence.Lease{}, fmt.Errorf("lock: acquire %q: %w", resource, err)
	}
	return s.grantedLocked(e, fence.Lease{Resource: resource, Holder: holder, Owner: owner, Token: token, TTL: ttl, Expires: expires}, token)
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
	if e.timer != nil {
		e.timer.Stop()
	}
	// A timer that fired already and waits for e.mu finds the new deadline and does nothing.
	e.timer = time.AfterFunc(l.Expires.Sub(s.now()), func() { s.expire(l.Resource) })
}

func clearLeaseLocked(e *entry) {
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
	if e.lease == nil || now.Before(e.lease.Expires) {
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
	if e.lease != nil && ended == changeNone {
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
				clearLeaseLocked(e)
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
		w := s.firstWaiterLocked(resource, e)
		if w == nil {
			return
		}
		popLocked(e)
		l, err := s.grantLocked(s.ctx, resource, e, w.holder, w.owner, w.ttl)
		if err != nil {
			w.resultC <- result{err: err}
			if e.lease != nil {
				return // recorded but not signed: it runs out its TTL
			}
			continue
		}
		if !s.serveLocked(resource, e, w, l) {
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
	old := *e.lease
	w := s.firstWaiterLocked(resource, e)
	if w == nil {
		lastFence, err := s.ledger.End(ctx, resource, old.Token)
		if err != nil {
			return false, err
		}
		clearLeaseLocked(e)
		s.record(c, old, lastFence)
		return false, nil
	}
	// The deadline counts from before the ledger write, as in grantLocked.
	expires := s.now().Add(w.ttl)
	// ctx is the releaser's or the service's: the new lease is the waiter's.
	token, lastFence, err := s.ledger.Handoff(fence.WithOwner(ctx, w.owner), resource, old.Token, w.holder, w.ttl, wallclock.Report(expires))
	if err != nil {
		return false, err
	}
	clearLeaseLocked(e)
	s.record(c, old, lastFence)
	popLocked(e)
	l, err := s.grantedLocked(e, fence.Lease{Resource: resource, Holder: w.holder, Owner: w.owner, Token: token, TTL: w.ttl, Expires: expires}, lastFence)
	if err != nil {
		// Recorded but not signed: w learns why, and the lease runs out its TTL.
		w.resultC <- result{err: err}
		return false, nil
	}
	return s.serveLocked(resource, e, w, l), nil
}

// firstWaiterLocked answers and drops the waiters at the head of the queue
// whose callers have gone, and returns the first one still waiting, left at
// the head; nil if there is none.
func (s *Service) firstWaiterLocked(resource string, e *entry) *waiter {
	for len(e.queue) > 0 {
		w := e.queue[0]
		err := w.ctx.Err()
		if err == nil {
			return w
		}
		popLocked(e)
		w.resultC <- result{err: fmt.Errorf("lock: acquire %q: %w", resource, err)}
	}
	return nil
}

// popLocked takes the first waiter out of the queue.
func popLocked(e *entry) {
	e.queue = e.queue[1:]
	waiters.Dec()
}

// serveLocked answers w, taken out of the queue, and the later waiters of the
// same holder that may use l (see owns) with l, and reports whether all of
// them had gone: then nobody holds l, and the caller ends it at once. The
// later waiters of the same holder but another owner get fence.ErrForbidden,
// as an acquire arriving now would: they must not share another principal's
// lease.
func (s *Service) serveLocked(resource string, e *entry, w *waiter, l fence.Lease) (abandoned bool) {
	served := []*waiter{w}
	rest := e.queue[:0]
	for _, q := range e.queue {
		switch {
		case q.holder != w.holder:
			rest = append(rest, q)
		case owns(l, q.owner):
			served = append(served, q)
			waiters.Dec()
		default:
			waiters.Dec()
			q.resultC <- result{err: s.forbidden("acquire", resource, l, q.owner)}
		}
	}
	e.queue = rest
	abandoned = true
	for _, q := range served {
		if err := q.ctx.Err(); err != nil {
			q.resultC <- result{err: fmt.Errorf("lock: acquire %q: %w", resource, err)}
		} else {
			q.resultC <- result{lease: l}
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
	clearLeaseLocked(e)
	lastFence, err := s.ledger.End(s.ctx, resource, l.Token)
	if err != nil {
		s.Logger.Error("recording the end of a lease failed", "resource", resource, "token", uint64(l.Token), "error", err)
	}
	s.record(c, l, lastFence)
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

// change is a kind of change to a lease: the line it is logged as, and the
// event it is published as ("" for none).
type change struct {
	msg   string
	event watch.Type
}

// The changes to a lease.
var (
	changeNone      = change{}
	changeRestored  = change{"lease restored", ""}
	changeGranted   = change{"lock acquired", watch.Granted}
	changeRetried   = change{"lock acquire retried", watch.Renewed}
	changeRenewed   = change{"lock renewed", watch.Renewed}
	changeReleased  = change{"lock released", watch.Released}
	changeAbandoned = change{"abandoned grant released", watch.Released}
	changeExpired   = change{"lock expired", watch.Expired}
)

// record logs the change c to lease l, with its owner if it has one, and
// publishes it to s.Events; a grant raises the resource's fence too, and is
// followed by a FenceRaised event.
func (s *Service) record(c change, l fence.Lease, lastFence fence.Token) {
	attrs := make([]slog.Attr, 0, 7)
	attrs = append(attrs, slog.String("resource", l.Resource), slog.String("holder", l.Holder),
		slog.Uint64("token", uint64(l.Token)), slog.Uint64("last_fence", uint64(lastFence)),
		slog.Int64("ttl_ms", l.TTL.Milliseconds()), slog.String("expires_at", l.Expires.UTC().Format(time.RFC3339Nano)))
	if l.Owner != "" {
		attrs = append(attrs, slog.String("owner", l.Owner))
	}
	logline.Log(context.Background(), s.Logger, slog.LevelInfo, c.msg, attrs...)
	if c.event == "" || s.Events == nil {
		return
	}
	e := watch.Event{Type: c.event, Resource: l.Resource, Holder: l.Holder, Token: l.Token, LastFence: lastFence}
	if c.event == watch.Granted || c.event == watch.Renewed {
		e.ExpiresAt = l.Expires
	}
	s.Events.Publish(e)
	if c.event == watch.Granted {
		s.Events.Publish(watch.Event{Type: watch.FenceRaised, Resource: l.Resource, Token: l.Token, LastFence: lastFence})
	}
}

func validateAcquire(resource, holder string, ttl, wait time.Duration) error {
	if err := fence.ValidateResource(resource); err != nil {
		return err
	}
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
