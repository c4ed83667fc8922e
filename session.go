package fence

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Errors with which a Session ends, besides *LeaseLostError.
var (
	// ErrLeaseExpired means no renewal succeeded before the lease's local
	// deadline: the lock service may have given the lock to someone else.
	ErrLeaseExpired = errors.New("fence: lease expired before a renewal succeeded")
	// ErrReleased means the session's lease was released by its owner.
	ErrReleased = errors.New("fence: lease released")
)

// Session is a lease that keeps itself alive: it renews about every TTL/3 and
// declares the lease lost by its own monotonic clock when no renewal has
// succeeded by the lease's local deadline (the TTL minus a safety margin,
// counted from when the last successful request was sent), without waiting
// for the server, which may be unreachable. A lease_lost answer ends it at
// once. It never re-acquires.
//
// Work done under the lease should use Context (cancelled when the lease
// ends) and carry Token on every write, so that the storage rejects it once a
// newer holder exists. A Session needs only a Locker, so it works the same in
// process and over HTTP. It is safe for concurrent use.
type Session struct {
	locker Locker
	keeper *Session // InSession: the session resource's Session, which keeps this lease alive; nil for its own renewals
	lease  Lease    // Token, Resource, Holder, TTL and Sequencer are fixed; Expires follows renewals
	margin time.Duration

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex    // guards lease.Expires, lease.RevokeAt, deadline, listed, asked and askedC
	deadline time.Time     // local: the lease is surely held before it
	revokeC  chan struct{} // closed once the server says a revoke was requested (lease.RevokeAt set)
	listed   bool          // InSession: the keeper's renewals listed the lease as asked to let go

	// A session's lease (the keeper of leases InSession): the leases in
	// the session asked to let go, as its last renewal listed them, and a
	// channel closed (and replaced) when that list changes.
	asked  []AskedLease
	askedC chan struct{}

	endMu    sync.Mutex  // serializes Release and Transfer; guards stopped and the loop's restart
	stopped  bool        // the keepalive loop has been told to stop
	expiry   *time.Timer // the local deadline armed after a failed end; guarded by endMu
	stopC    chan struct{}
	loopCtx  context.Context // for renewals; cancelled by Release
	loopStop context.CancelFunc
	loopDone chan struct{}
}

// SessionOption configures NewSession.
type SessionOption func(*sessionConfig)

type sessionConfig struct {
	ttl, wait, margin time.Duration
	holder            string
	limit             int
	shared            bool
	keeper            *Session
	ttlSet            bool // WithTTL was given
}

// WithTTL sets the lease's TTL. Default: DefaultTTL.
func WithTTL(ttl time.Duration) SessionOption {
	return func(c *sessionConfig) { c.ttl, c.ttlSet = ttl, true }
}

// WithWait sets how long to wait for the lock if another holder has it.
// Default: 0, fail at once with *LockHeldError.
func WithWait(wait time.Duration) SessionOption { return func(c *sessionConfig) { c.wait = wait } }

// WithLimit makes the session hold one of the n permits of a semaphore
// rather than a lock (see PermitAcquirer, which the Locker must implement):
// the lease's Resource is then the permit's slot resource. Default: 0, a
// lock.
func WithLimit(n int) SessionOption { return func(c *sessionConfig) { c.limit = n } }

// WithShared makes the session hold resource shared rather than
// exclusively (see SharedAcquirer, which the Locker must implement): beside
// other shared holders, with their group's token. Default: exclusive.
func WithShared() SessionOption { return func(c *sessionConfig) { c.shared = true } }

// InSession makes the lease join the server session that keeper keeps
// alive (keeper holds a session resource, SessionResource, and its
// SessionRef is not zero): the lease takes the session's TTL, sends no
// renewal of its own (keeper's renewals keep it), and ends when keeper
// ends, with keeper's error; Release releases it alone. A lease that
// cannot be in the session, a shared hold (WithShared) or one that asks
// for another TTL than the session's (WithTTL), or one asked for after
// keeper has ended, keeps itself alive as without InSession.
// The server ends it too if the session ends first. It sends no request of
// its own: it learns from keeper's renewals that a caller asked it to let
// go (RevokeRequested), and that it was revoked at that request's
// deadline; of an immediate revoke, only when a write under it is fenced,
// or when the session ends.
func InSession(keeper *Session) SessionOption {
	return func(c *sessionConfig) { c.keeper = keeper }
}

// CanJoinSession reports whether a Session with opts would join a server
// session whose TTL is ttl, given InSession: it is no shared hold, and asks
// for no other TTL. A client that opens sessions only for the leases that
// join them asks it first.
func CanJoinSession(ttl time.Duration, opts ...SessionOption) bool {
	var c sessionConfig
	for _, o := range opts {
		o(&c)
	}
	return !c.shared && (!c.ttlSet || c.ttl == ttl)
}

// WithHolder sets the holder id. Default: a new random id per session (NewHolderID).
func WithHolder(holder string) SessionOption { return func(c *sessionConfig) { c.holder = holder } }

// WithSafetyMargin sets how long before the TTL runs out the session
// declares the lease lost, to allow for clocks that run at different rates.
// Default: a tenth of the TTL.
func WithSafetyMargin(d time.Duration) SessionOption {
	return func(c *sessionConfig) { c.margin = d }
}

// NewHolderID returns a random holder id, unique with overwhelming probability.
func NewHolderID() string {
	b := make([]byte, 12)
	rand.Read(b) // never fails (crypto/rand)
	return "h-" + hex.EncodeToString(b)
}

// NewSession acquires resource through locker and keeps the lease alive until
// Release or loss. ctx bounds the acquire only; the session's own Context
// keeps ctx's values but not its cancellation.
func NewSession(ctx context.Context, locker Locker, resource string, opts ...SessionOption) (*Session, error) {
	c, err := newSessionConfig(ctx, opts)
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	if c.keeper != nil {
		ctx = WithSession(ctx, c.keeper.SessionRef())
		c.ttl = 0 // the session's
	}
	var l Lease
	switch sa, shares := locker.(SharedAcquirer); {
	case c.shared && c.limit != 0:
		err = fmt.Errorf("%w: a shared hold has no limit", ErrBadRequest)
	case c.shared && shares:
		l, err = sa.AcquireShared(ctx, resource, c.holder, c.ttl, c.wait)
	case c.shared:
		err = fmt.Errorf("%w: the Locker has no shared holds", ErrBadRequest)
	case c.limit == 0:
		l, err = locker.Acquire(ctx, resource, c.holder, c.ttl, c.wait)
	default:
		if pa, ok := locker.(PermitAcquirer); ok {
			l, err = pa.AcquirePermit(ctx, resource, c.holder, c.limit, c.ttl, c.wait)
		} else {
			err = fmt.Errorf("%w: the Locker has no semaphores", ErrBadRequest)
		}
	}
	if err != nil {
		return nil, err
	}
	return startSession(ctx, locker, l, c, sent)
}

// NewSessions acquires every one of resources through locker, which must be
// a MultiAcquirer, all at once or none (see MultiAcquirer.AcquireAll), and
// keeps each lease alive in a session of its own, in the order of
// resources. WithLimit does not apply. If a session cannot start, the
// others are released and it returns the error.
func NewSessions(ctx context.Context, locker Locker, resources []string, opts ...SessionOption) ([]*Session, error) {
	c, err := newSessionConfig(ctx, opts)
	if err != nil {
		return nil, err
	}
	ma, ok := locker.(MultiAcquirer)
	if !ok || c.limit != 0 || c.shared {
		return nil, fmt.Errorf("%w: the Locker cannot acquire several resources at once (or a limit or shared was given)", ErrBadRequest)
	}
	sent := time.Now()
	if c.keeper != nil {
		ctx = WithSession(ctx, c.keeper.SessionRef())
		c.ttl = 0 // the session's
	}
	ls, err := ma.AcquireAll(ctx, resources, c.holder, c.ttl, c.wait)
	if err != nil {
		return nil, err
	}
	sessions := make([]*Session, 0, len(ls))
	for i, l := range ls {
		s, err := startSession(ctx, locker, l, c, sent)
		if err != nil {
			for _, started := range sessions {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), started.lease.TTL)
				started.Release(rctx) // best effort: else it expires
				cancel()
			}
			for _, rest := range ls[i+1:] {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rest.TTL)
				locker.Release(rctx, rest.Resource, rest.Token) // best effort: else it expires
				cancel()
			}
			return nil, err
		}
		sessions = append(sessions, s)
	}
	return sessions, nil
}

// newSessionConfig applies opts to the defaults and checks the result. A
// lease acquired in a server session (WithSession in ctx) is kept alive by
// that session, not by renewals of its own, which the server refuses: a
// Session of it is refused.
func newSessionConfig(ctx context.Context, opts []SessionOption) (sessionConfig, error) {
	c := sessionConfig{ttl: DefaultTTL}
	if ref := SessionOf(ctx); !ref.IsZero() {
		return c, fmt.Errorf("%w: a lease in session %q is kept alive by the session's renewals: acquire it with the Locker, not a Session", ErrBadRequest, ref.Resource)
	}
	for _, o := range opts {
		o(&c)
	}
	if c.holder == "" {
		c.holder = NewHolderID()
	}
	if k := c.keeper; k != nil {
		if k.SessionRef().IsZero() {
			return c, fmt.Errorf("%w: InSession: %q is not a session's resource", ErrBadRequest, k.Resource())
		}
		if !CanJoinSession(k.TTL(), opts...) || k.Err() != nil {
			c.keeper = nil // a lease of its own
		} else {
			c.ttl, c.margin = k.TTL(), k.margin
			return c, nil
		}
	}
	if c.margin == 0 {
		c.margin = c.ttl / 10
	}
	if c.margin < 0 || c.margin >= c.ttl {
		return c, fmt.Errorf("%w: safety margin %s must be in [0, ttl %s)", ErrBadRequest, c.margin, c.ttl)
	}
	return c, nil
}

// startSession keeps l, granted by a request sent at sent, alive.
func startSession(ctx context.Context, locker Locker, l Lease, c sessionConfig, sent time.Time) (*Session, error) {
	s := &Session{locker: locker, keeper: c.keeper, lease: l, margin: c.margin, revokeC: make(chan struct{}), askedC: make(chan struct{})}
	if !l.RevokeAt.IsZero() {
		close(s.revokeC) // joined a shared group asked to let go already
	}
	s.ctx, s.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	s.newLoop()
	if c.keeper != nil {
		go s.keepalive()
		return s, nil
	}
	s.deadline = sent.Add(l.TTL - c.margin)
	if time.Since(sent) > c.margin {
		// The grant happened at some unknown moment during a long acquire
		// (a wait, a slow network): count from a renewal instead.
		if err := s.renew(ctx, time.Now().Add(l.TTL-c.margin)); err != nil {
			s.cancel(err)
			s.loopStop()
			close(s.loopDone)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.TTL)
			defer cancel()
			locker.Release(rctx, l.Resource, l.Token) // best effort: else it expires
			return nil, fmt.Errorf("fence: renewing a lease just acquired: %w", err)
		}
	}
	go s.keepalive()
	return s, nil
}

// newLoop makes the channels and context of a keepalive loop not yet
// started.
func (s *Session) newLoop() {
	s.stopC, s.loopDone = make(chan struct{}), make(chan struct{})
	s.loopCtx, s.loopStop = context.WithCancel(s.ctx)
	s.stopped = false
}

// Resource returns the locked resource: for a permit (WithLimit), its slot
// resource.
func (s *Session) Resource() string { return s.lease.Resource }

// Holder returns the holder id the lease was granted to.
func (s *Session) Holder() string { return s.lease.Holder }

// Token returns the lease's fencing token. Send it with every write.
func (s *Session) Token() Token { return s.lease.Token }

// Sequencer returns the lease's signed sequencer, "" if the lock service
// signs nothing. Send it with writes, next to Token.
func (s *Session) Sequencer() string { return s.lease.Sequencer }

// SessionRef returns the server session this Session keeps alive, when it
// holds a session resource (see SessionResource): acquires in
// WithSession(ctx, s.SessionRef()) join it, and are kept alive by s's
// renewals alone. It is the zero SessionRef for any other resource.
func (s *Session) SessionRef() SessionRef {
	if !IsSessionResource(s.lease.Resource) {
		return SessionRef{}
	}
	return SessionRef{Resource: s.lease.Resource, Token: s.lease.Token}
}

// TTL returns the lease's time to live.
func (s *Session) TTL() time.Duration { return s.lease.TTL }

// Deadline returns the local deadline: by this process's clock, the lease is
// surely held before it, unless the server said otherwise. A lease in a
// session (InSession) has its session's.
func (s *Session) Deadline() time.Time {
	if s.keeper != nil {
		return s.keeper.Deadline()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

// Lease returns the lease as the server last described it.
func (s *Session) Lease() Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease
}

// RevokeRequested returns a channel that is closed once the lock service
// has said that a caller asked the holder to let go (cooperative
// revocation, fence.RevokeRequester): the lease is revoked at RevokeAt
// unless it is released before. The session learns it from a renewal, so
// within about a third of the TTL of the request; a watch of the resource
// (revoke_requested) learns it at once.
func (s *Session) RevokeRequested() <-chan struct{} { return s.revokeC }

// RevokeAt returns when the lock service revokes the lease, as it last
// said; zero if nobody asked the holder to let go.
func (s *Session) RevokeAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease.RevokeAt
}

// Done returns a channel that is closed when the lease ends: lost, expired
// or released.
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Context returns a context that is cancelled when the lease ends; its
// context.Cause is Err.
func (s *Session) Context() context.Context { return s.ctx }

// Err returns nil while the lease is held, and then why it ended: a
// *LeaseLostError (the server said so), ErrLeaseExpired (no renewal in time,
// wrapping the last renewal's error) or ErrReleased.
func (s *Session) Err() error {
	if s.ctx.Err() == nil {
		return nil
	}
	return context.Cause(s.ctx)
}

// Release stops the renewals and releases the lease. It returns nil when the
// lease is no longer held — released now, or ended before (see Err) — and an
// error when the release's outcome is unknown: the lease then expires by its
// TTL, and the session ends with ErrLeaseExpired at its local deadline, as
// if the server were unreachable; a lease in a session (InSession) is kept
// by the session meanwhile, and goes on until it ends. Release may be
// called again to retry.
func (s *Session) Release(ctx context.Context) error {
	_, err := s.end(func() (Lease, error) {
		if sa, ok := s.locker.(SharedAcquirer); ok && s.lease.Shared {
			return Lease{}, sa.ReleaseShared(ctx, s.lease.Resource, s.lease.Holder, s.lease.Token)
		}
		return Lease{}, s.locker.Release(ctx, s.lease.Resource, s.lease.Token)
	}, ErrReleased, true)
	if errors.Is(err, errEnded) {
		return nil // ended before: nothing to release
	}
	return err
}

// Transfer hands the lease to the first waiter whose holder is to ("": the
// first waiter) in one change, and ends the session (Err then wraps
// ErrReleased): the successor's token is greater, so what this holder
// still writes is fenced. It returns the successor's lease. Its Locker must
// be a Transferer. A session that has ended, or whose lease the server no
// longer has (*LeaseLostError), transfers nothing and returns the error. If
// the answer certainly changed nothing (nobody named to waits: an error
// wrapping ErrNotFound; or the request was refused as bad, forbidden or
// rate limited), the session goes on, renewed as before. After any other
// failure, whose outcome is unknown, it is no longer renewed, as after a
// failed Release: it ends at its local deadline unless released.
func (s *Session) Transfer(ctx context.Context, to string) (Lease, error) {
	tr, ok := s.locker.(Transferer)
	if !ok {
		return Lease{}, fmt.Errorf("fence: transfer %q: %w: the Locker cannot transfer", s.lease.Resource, ErrBadRequest)
	}
	if to != "" {
		if err := ValidateHolder(to); err != nil {
			return Lease{}, fmt.Errorf("fence: transfer %q: to: %w", s.lease.Resource, err)
		}
	}
	next, err := s.end(func() (Lease, error) {
		return tr.Transfer(ctx, s.lease.Resource, s.lease.Token, to)
	}, fmt.Errorf("%w: transferred to %q", ErrReleased, to), false)
	if errors.Is(err, errEnded) {
		return Lease{}, fmt.Errorf("fence: transfer %q: %w", s.lease.Resource, s.Err())
	}
	return next, err
}

// errEnded is end's error for a session that had ended before.
var errEnded = errors.New("the session has ended")

// end stops the keepalive and ends the lease with do (a release or a
// transfer); on success the session ends with cause. With lostIsDone, a
// lease the server no longer has counts as ended (a release's goal).
//
// A transfer (not lostIsDone) that the Locker refused with ErrNotFound
// changed nothing: the keepalive starts again.
func (s *Session) end(do func() (Lease, error), cause error, lostIsDone bool) (Lease, error) {
	s.endMu.Lock()
	defer s.endMu.Unlock()
	if !s.stopped {
		s.stopped = true
		close(s.stopC)
		s.loopStop() // a renewal in flight gives up at once
	}
	<-s.loopDone
	if s.ctx.Err() != nil {
		return Lease{}, errEnded
	}
	next, err := do()
	switch {
	case err == nil, lostIsDone && errors.Is(err, ErrLeaseLost):
		s.cancel(cause)
		return next, nil
	case errors.Is(err, ErrLeaseLost):
		s.cancel(err)
		return Lease{}, err
	case !lostIsDone && refusedUnchanged(err):
		// The transfer certainly did nothing: renew again, and forget a
		// local deadline that an earlier failure armed.
		if s.expiry != nil {
			s.expiry.Stop()
			s.expiry = nil
		}
		s.newLoop()
		go s.keepalive()
		return Lease{}, err
	}
	if s.keeper != nil {
		// Perhaps still held, and kept alive by the session: it follows the
		// session again, and Release may be retried.
		s.newLoop()
		go s.keepalive()
		return Lease{}, err
	}
	// Perhaps still held, and no longer renewed: the session ends at its
	// local deadline, as with an unreachable server, so that work under
	// Context stops before the server's lease can run out.
	s.mu.Lock()
	deadline := s.deadline
	s.mu.Unlock()
	if s.expiry == nil {
		cause := fmt.Errorf("%w (ending it failed: %w)", ErrLeaseExpired, err)
		s.expiry = time.AfterFunc(time.Until(deadline), func() { s.cancel(cause) })
	}
	return Lease{}, err
}

// refusedUnchanged reports whether err is an answer that certainly changed
// nothing: nobody of that name waits, or the request was refused before it
// was served (bad, forbidden, rate limited).
func refusedUnchanged(err error) bool {
	for _, target := range []error{ErrNotFound, ErrBadRequest, ErrInvalidToken, ErrForbidden, ErrRateLimited} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// renew renews the lease once, giving up at until, and on success moves the
// local deadline.
func (s *Session) renew(ctx context.Context, until time.Time) error {
	sent := time.Now()
	ctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	var l Lease
	var asked []AskedLease
	var err error
	sr, renewsSessions := s.locker.(SessionRenewer)
	switch sa, shares := s.locker.(SharedAcquirer); {
	case shares && s.lease.Shared:
		l, err = sa.RenewShared(ctx, s.lease.Resource, s.lease.Holder, s.lease.Token, s.lease.TTL)
	case renewsSessions && IsSessionResource(s.lease.Resource):
		l, asked, err = sr.RenewSession(ctx, SessionRef{Resource: s.lease.Resource, Token: s.lease.Token}, s.lease.TTL)
	default:
		l, err = s.locker.Renew(ctx, s.lease.Resource, s.lease.Token, s.lease.TTL)
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.lease.Expires = l.Expires
	s.deadline = sent.Add(s.lease.TTL - s.margin)
	if !l.RevokeAt.IsZero() && s.lease.RevokeAt.IsZero() {
		s.lease.RevokeAt, s.lease.RevokeGrace = l.RevokeAt, l.RevokeGrace
		close(s.revokeC)
	} else if !l.RevokeAt.IsZero() {
		s.lease.RevokeAt = l.RevokeAt
	}
	if !slices.Equal(s.asked, asked) {
		s.asked = asked
		close(s.askedC)
		s.askedC = make(chan struct{})
	}
	s.mu.Unlock()
	return nil
}

// askedFor returns, for a session's lease, whether its last renewal listed
// the lease with token on resource as asked to let go, and until when; and
// the channel that closes when that list changes.
func (s *Session) askedFor(resource string, token Token) (at time.Time, listed bool, changed <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.asked {
		if a.Resource == resource && a.Token == token {
			return a.RevokeAt, true, s.askedC
		}
	}
	return time.Time{}, false, s.askedC
}

// keepalive renews every TTL/3 until Release, a lease_lost answer, or the
// local deadline passing without a successful renewal. A lease in a session
// follows its session instead.
func (s *Session) keepalive() {
	if s.keeper != nil {
		s.follow()
		return
	}
	defer close(s.loopDone)
	interval := s.lease.TTL / 3
	retry := max(s.lease.TTL/20, time.Millisecond)
	next := time.NewTimer(interval)
	defer next.Stop()
	expiry := time.NewTimer(time.Until(s.Deadline()))
	defer expiry.Stop()
	var lastErr error
	for {
		select {
		case <-s.stopC:
			return
		case <-expiry.C:
		case <-next.C:
		}
		if !time.Now().Before(s.Deadline()) {
			// Also after this process was frozen: whichever timer fired,
			// the deadline decides.
			s.cancel(fmt.Errorf("%w (last renewal: %v)", ErrLeaseExpired, lastErr))
			return
		}
		err := s.renew(s.loopCtx, s.Deadline())
		switch {
		case s.loopCtx.Err() != nil:
			return // Release
		case err == nil:
			lastErr = nil
			next.Reset(interval)
			expiry.Reset(time.Until(s.Deadline()))
		case errors.Is(err, ErrLeaseLost):
			s.cancel(err)
			return
		default:
			lastErr = err
			next.Reset(retry)
		}
	}
}

// follow is the keepalive of a lease in a session (InSession): it renews
// nothing, and ends the lease when the session ends, with its error. The
// session's renewals list the leases in it that a caller asked to let go:
// listed, the lease's RevokeRequested closes; listed and then no longer,
// the lease was revoked (its holder did not release it: Release stops this
// loop first), and it ends with *LeaseLostError.
func (s *Session) follow() {
	defer close(s.loopDone)
	for {
		at, listed, changed := s.keeper.askedFor(s.lease.Resource, s.lease.Token)
		s.mu.Lock()
		switch {
		case listed && s.lease.RevokeAt.IsZero():
			s.lease.RevokeAt, s.listed = at, true
			close(s.revokeC)
		case listed:
			s.lease.RevokeAt, s.listed = at, true
		case s.listed:
			s.mu.Unlock()
			s.cancel(&LeaseLostError{Resource: s.lease.Resource, Presented: s.lease.Token})
			return
		}
		s.mu.Unlock()
		select {
		case <-s.stopC:
			return
		case <-s.keeper.Done():
			s.cancel(fmt.Errorf("fence: the session %q ended: %w", s.keeper.Resource(), s.keeper.Err()))
			return
		case <-changed:
		}
	}
}
