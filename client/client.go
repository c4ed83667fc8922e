// Package client is the Go client of a fence server: acquire a lease that
// keeps itself alive, and write through it so that every write carries its
// fencing token.
//
//	c, err := client.New("http://127.0.0.1:7700")
//	lease, err := c.Acquire(ctx, "orders", fence.WithTTL(10*time.Second))
//	defer lease.Release(ctx)
//	_, err = lease.Put(lease.Context(), "total", []byte("42")) // carries lease.Token()
//
// A Lease is a fence.Session (keepalive, Done, Context, Err, Release) plus the
// storage calls of the fence server, each stamped with the lease's token, and
// an http.RoundTripper that stamps it on the requests to any other service.
//
// By default a Client keeps one server session (fence.SessionResource) for
// all its leases: it opens it at its first acquire, and renews it alone,
// every TTL/3, however many leases it holds; each lease is still fenced on
// its own resource, and ends with the session (see fence.InSession). A
// lease that asks for a TTL other than the session's (WithSessionTTL,
// default fence.DefaultTTL), or a shared one, keeps itself alive;
// WithoutSession makes every lease do so. Close ends the session.
// When the server signs its grants, the lease's sequencer goes with the token
// in a Fence-Sequencer header.
//
// The address may list the servers of a cluster, separated by commas
// ("http://a:7700,http://b:7700"): the client stays on the server that
// answers and moves to the next one after a transport error or a 503, and
// retries calls that are safe to repeat (renewals among them) for up to
// API.RetryFor, so that a lease's keepalive carries on across a
// leader failover. See API for which calls are resent and when.
// Errors are the typed errors of package fence: errors.Is(err,
// fence.ErrFenced), errors.As(err, &fencedErr).
package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/wire"
)

// Client talks to a fence server, or to the servers of a cluster with
// failover between them. It is safe for concurrent use.
type Client struct {
	api *API

	noSession  bool          // WithoutSession
	sessionTTL time.Duration // WithSessionTTL
	sessionID  string        // the session's name and holder

	mu   sync.Mutex     // guards keep
	keep *fence.Session // the client's session; nil until the first acquire in it
}

// Option configures a Client in New.
type Option func(*Client)

// WithAuthToken makes the client send token as a bearer token
// ("Authorization: Bearer <token>") with every request.
func WithAuthToken(token string) Option {
	return func(c *Client) { c.api.AuthToken = token }
}

// WithoutSession makes every lease of the client keep itself alive, with
// renewals of its own, rather than join the client's session.
func WithoutSession() Option {
	return func(c *Client) { c.noSession = true }
}

// WithSessionTTL sets the TTL of the client's session, and so of the
// leases in it (those that ask for no other TTL). Default fence.DefaultTTL.
func WithSessionTTL(ttl time.Duration) Option {
	return func(c *Client) { c.sessionTTL = ttl }
}

// New returns a client of the server at addr, e.g. "http://127.0.0.1:7700",
// or of the servers of a cluster, their base URLs separated by commas
// ("http://a:7700,http://b:7700"), as NewAPI takes them.
func New(addr string, opts ...Option) (*Client, error) {
	api, err := NewAPI(addr)
	if err != nil {
		return nil, err
	}
	c := &Client{api: api, sessionTTL: fence.DefaultTTL, sessionID: "client-" + strings.TrimPrefix(fence.NewHolderID(), "h-")}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// API returns the underlying fence.Locker and fence.Store, for calls that
// take explicit tokens, and for its settings (HTTPClient, RetryFor, Retries).
func (c *Client) API() *API { return c.api }

// Acquire acquires resource and returns a lease that renews itself until
// Release or loss. It returns *fence.LockHeldError if another holder kept
// the lock for all of fence.WithWait.
func (c *Client) Acquire(ctx context.Context, resource string, opts ...fence.SessionOption) (*Lease, error) {
	var s *fence.Session
	err := c.inSession(ctx, opts, func(opts []fence.SessionOption) (err error) {
		s, err = fence.NewSession(ctx, c.api, resource, opts...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("client: acquire %q: %w", resource, err)
	}
	return &Lease{Session: s, store: c.api}, nil
}

// inSession calls acquire with opts, and the client's session (opened now
// if it is not open) unless the client has none; if the session ended
// just before the acquire, it opens another and acquires again. A server
// that refuses the session to the caller (no lock permission on its
// resource, or no sessions) gets leases of their own.
func (c *Client) inSession(ctx context.Context, opts []fence.SessionOption, acquire func([]fence.SessionOption) error) error {
	if c.noSession || !fence.CanJoinSession(c.sessionTTL, opts...) {
		return acquire(opts) // a lease of its own: no session to open
	}
	for attempt := 0; ; attempt++ {
		keep, err := c.session(ctx)
		switch {
		case errors.Is(err, fence.ErrForbidden), errors.Is(err, fence.ErrNotFound), errors.Is(err, fence.ErrBadRequest):
			return acquire(opts)
		case err != nil:
			return fmt.Errorf("opening the client's session: %w", err)
		}
		err = acquire(append(opts[:len(opts):len(opts)], fence.InSession(keep)))
		var lost *fence.LeaseLostError
		if attempt == 0 && errors.As(err, &lost) && lost.Resource == keep.Resource() {
			// The session ended on the server before its keeper noticed:
			// forget it, so that the retry opens another.
			c.mu.Lock()
			if c.keep == keep {
				c.keep = nil
			}
			c.mu.Unlock()
			continue
		}
		return err
	}
}

// session returns the client's session, opening it if it is not open.
func (c *Client) session(ctx context.Context) (*fence.Session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keep != nil && c.keep.Err() == nil {
		return c.keep, nil
	}
	keep, err := fence.NewSession(ctx, c.api, fence.SessionResource(c.sessionID), fence.WithTTL(c.sessionTTL), fence.WithHolder(c.sessionID))
	if err != nil {
		return nil, err
	}
	c.keep = keep
	return keep, nil
}

// Session returns the client's session, nil if none is open: its renewals
// keep the client's leases alive.
func (c *Client) Session() *fence.Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keep == nil || c.keep.Err() != nil {
		return nil
	}
	return c.keep
}

// Close releases the client's session, if one is open, and with it every
// lease in it; the leases of their own stay. The client may be used again:
// its next acquire opens another session.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	keep := c.keep
	c.keep = nil
	c.mu.Unlock()
	if keep == nil {
		return nil
	}
	return keep.Release(ctx)
}

// AcquireAll acquires every one of resources at once, all or none, and
// returns a lease per resource, in their order, each renewing itself until
// Release or loss. It returns *fence.LockHeldError, naming a resource that
// another holder kept for all of fence.WithWait, and then holds none.
func (c *Client) AcquireAll(ctx context.Context, resources []string, opts ...fence.SessionOption) ([]*Lease, error) {
	var ss []*fence.Session
	err := c.inSession(ctx, opts, func(opts []fence.SessionOption) (err error) {
		ss, err = fence.NewSessions(ctx, c.api, resources, opts...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("client: acquire %q: %w", resources, err)
	}
	ls := make([]*Lease, len(ss))
	for i, s := range ss {
		ls[i] = &Lease{Session: s, store: c.api}
	}
	return ls, nil
}

// WithLock runs fn under a lease on resource and releases it after. fn's ctx
// is cancelled as soon as the lease is lost. It returns fn's error; if fn
// succeeded but the lease was lost while it ran, the loss (so that the caller
// knows some writes may have been fenced); else the release's error.
func (c *Client) WithLock(ctx context.Context, resource string, fn func(ctx context.Context, l *Lease) error, opts ...fence.SessionOption) error {
	l, err := c.Acquire(ctx, resource, opts...)
	if err != nil {
		return err
	}
	workCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(l.Context(), func() { cancel(l.Err()) })
	defer stop()
	fnErr := fn(workCtx, l)
	lost := l.Err()
	relErr := l.Release(context.WithoutCancel(ctx))
	switch {
	case fnErr != nil:
		return fnErr
	case lost != nil:
		return fmt.Errorf("client: lease on %q lost while the work ran: %w", resource, lost)
	}
	return relErr
}

// Status returns the lock's status.
func (c *Client) Status(ctx context.Context, resource string) (fence.LockStatus, error) {
	return c.api.Status(ctx, resource)
}

// Get returns the item stored under resource/key.
func (c *Client) Get(ctx context.Context, resource, key string) (fence.Item, error) {
	return c.api.Get(ctx, resource, key)
}

// Fence returns the resource's last fence.
func (c *Client) Fence(ctx context.Context, resource string) (fence.Token, error) {
	return c.api.Fence(ctx, resource)
}

// Lease is a held lock: a fence.Session whose writes carry its token.
type Lease struct {
	*fence.Session
	store fence.Store
}

// check refuses a write once the lease has ended: the server would most
// likely reject it, and the caller should stop.
func (l *Lease) check() error {
	if err := l.Err(); err != nil {
		return fmt.Errorf("client: lease on %q has ended: %w", l.Resource(), err)
	}
	return nil
}

// Put writes value under key in the lease's resource, with its token.
func (l *Lease) Put(ctx context.Context, key string, value []byte) (fence.WriteResult, error) {
	return l.PutIf(ctx, key, value, fence.Cond{})
}

// PutIf writes value under key if cond holds.
func (l *Lease) PutIf(ctx context.Context, key string, value []byte, cond fence.Cond) (fence.WriteResult, error) {
	if err := l.check(); err != nil {
		return fence.WriteResult{}, err
	}
	return l.store.Put(l.stamp(ctx), l.Resource(), key, value, l.Token(), cond)
}

// CompareAndSwap writes value under key only if the key is at revision rev
// (0: only if it does not exist); otherwise it returns fence.ErrPreconditionFailed.
func (l *Lease) CompareAndSwap(ctx context.Context, key string, value []byte, rev fence.Rev) (fence.WriteResult, error) {
	if rev == 0 {
		return l.PutIf(ctx, key, value, fence.Cond{IfAbsent: true})
	}
	return l.PutIf(ctx, key, value, fence.Cond{IfMatch: rev})
}

// Get reads key from the lease's resource.
func (l *Lease) Get(ctx context.Context, key string) (fence.Item, error) {
	return l.store.Get(ctx, l.Resource(), key)
}

// Delete deletes key from the lease's resource, with its token.
func (l *Lease) Delete(ctx context.Context, key string) (fence.WriteResult, error) {
	if err := l.check(); err != nil {
		return fence.WriteResult{}, err
	}
	return l.store.Delete(l.stamp(ctx), l.Resource(), key, l.Token(), fence.Cond{})
}

// Claim raises the resource's fence to the lease's token without writing, so
// that any older holder is rejected from now on.
func (l *Lease) Claim(ctx context.Context) error {
	if err := l.check(); err != nil {
		return err
	}
	_, err := l.store.Claim(l.stamp(ctx), l.Resource(), l.Token())
	return err
}

// Txn applies t with the lease's token as the fence of its resource; fences
// of other resources (from other leases) stay as t has them.
func (l *Lease) Txn(ctx context.Context, t *fence.Txn) (fence.Rev, error) {
	if err := l.check(); err != nil {
		return 0, err
	}
	c := *t
	c.Fences = map[string]fence.Token{}
	for r, tok := range t.Fences {
		c.Fences[r] = tok
	}
	c.Fences[l.Resource()] = l.Token()
	return l.store.Txn(l.stamp(ctx), &c)
}

// stamp returns ctx with the lease's sequencer, if it has one, for the
// Fence-Sequencer header of a write (WithSequencer).
func (l *Lease) stamp(ctx context.Context) context.Context {
	if s := l.Sequencer(); s != "" {
		return WithSequencer(ctx, s)
	}
	return ctx
}

// Transport returns an http.RoundTripper that adds the header
// "Fencing-Token: <token>" to every mutating request (POST, PUT, PATCH,
// DELETE) it sends through base (http.DefaultTransport if nil), so that any
// service that checks fencing tokens can reject this holder once it is stale.
// When the lease has a sequencer it adds "Fence-Sequencer: <sequencer>" too.
// After the lease has ended it fails mutating requests without sending them.
func (l *Lease) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &fencingTransport{lease: l, base: base}
}

type fencingTransport struct {
	lease *Lease
	base  http.RoundTripper
}

func (t *fencingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return t.base.RoundTrip(req)
	}
	if err := t.lease.check(); err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper must close the body, even on errors
		}
		return nil, err
	}
	r := req.Clone(req.Context()) // a RoundTripper must not change the caller's request
	r.Header.Set("Fencing-Token", t.lease.Token().String())
	if s := t.lease.Sequencer(); s != "" {
		r.Header.Set(wire.SequencerHeader, s)
	}
	return t.base.RoundTrip(r)
}

// IsLost reports whether err means the lease is gone (lost, expired or
// fenced): the caller must stop working under it.
func IsLost(err error) bool {
	return errors.Is(err, fence.ErrLeaseLost) || errors.Is(err, fence.ErrLeaseExpired) || errors.Is(err, fence.ErrFenced)
}
