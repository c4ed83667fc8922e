package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/wire"
)

// lockHandlers binds the lock operations: status, listing, acquire (of one
// resource or several), renew, release, transfer and revoke.
var lockHandlers = handlerSet{
	wire.OpListLocks:    {serve: (*Handler).listLocks},
	wire.OpAcquireLocks: {body: maxAcquireAllBody, serve: (*Handler).acquireAll},
	wire.OpGetLock:      {serve: (*Handler).lockStatus},
	wire.OpAcquireLock:  {body: maxJSONBody, serve: (*Handler).acquire},
	wire.OpRenewLock:    {body: maxJSONBody, serve: (*Handler).renew},
	wire.OpReleaseLock:  {body: maxJSONBody, serve: (*Handler).release},
	wire.OpTransferLock: {body: maxJSONBody, serve: (*Handler).transfer},
	wire.OpRevokeLock:   {body: maxJSONBody, serve: (*Handler).revoke},
}

// maxJSONBody is the largest body of a lock request.
const maxJSONBody = 64 << 10

// maxAcquireAllBody is the largest body of a multi-acquire: room for
// fence.MaxMultiAcquire of the longest names, written with escapes.
const maxAcquireAllBody = 512 << 10

// TTL and wait limits in the API's milliseconds.
const (
	minTTLMS     = int64(fence.MinTTL / time.Millisecond)
	maxTTLMS     = int64(fence.MaxTTL / time.Millisecond)
	defaultTTLMS = int64(fence.DefaultTTL / time.Millisecond)
	maxWaitMS    = int64(fence.MaxWait / time.Millisecond)
)

func (s *Handler) lockStatus(c *call) error {
	st, err := s.locker.Status(c.r.Context(), c.resource)
	if err != nil {
		return err
	}
	st.Resource = c.resource
	c.writeJSON(wire.NewLockStatus(st))
	return nil
}

func (s *Handler) listLocks(c *call) error {
	prefix, after, limit, err := pageQuery(c.r)
	if err != nil {
		return err
	}
	lister, ok := s.locker.(fence.Lister)
	if !ok {
		return fmt.Errorf("%w: this server's lock service cannot list", fence.ErrNotFound)
	}
	resp := wire.ListResponse{Locks: []wire.ListedLock{}}
	// With auth, pages are filtered: ask for pages until this one is full
	// of locks the caller may read, or there are no more.
	for {
		locks, more, err := lister.List(c.r.Context(), prefix, after, limit-len(resp.Locks))
		if err != nil {
			return err
		}
		for _, l := range locks {
			after = l.Resource
			if c.allowed(wire.PermRead, l.Resource) != nil {
				continue
			}
			resp.Locks = append(resp.Locks, wire.NewListedLock(l))
		}
		if !more {
			break
		}
		if len(resp.Locks) == limit {
			resp.Next = after
			break
		}
	}
	c.writeJSON(resp)
	return nil
}

// pageQuery decodes the query of a listing: prefix, after (resource names
// or "") and limit (1..fence.MaxListLimit, wire.DefaultListLimit if absent).
func pageQuery(r *http.Request) (prefix, after string, limit int, err error) {
	q := r.URL.Query()
	for name := range q {
		if name != "prefix" && name != "after" && name != "limit" {
			return "", "", 0, badRequest("unknown query parameter %q (known: prefix, after, limit)", name)
		}
	}
	prefix, after = q.Get("prefix"), q.Get("after")
	if prefix != "" {
		if err := fence.ValidateResource(prefix); err != nil {
			return "", "", 0, fmt.Errorf("prefix: %w", err)
		}
	}
	if after != "" {
		if err := fence.ValidateResource(after); err != nil {
			return "", "", 0, fmt.Errorf("after: %w", err)
		}
	}
	limit = wire.DefaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > fence.MaxListLimit {
			return "", "", 0, badRequest("limit %q: want an integer in 1..%d", v, fence.MaxListLimit)
		}
		limit = n
	}
	return prefix, after, limit, nil
}

// takeWaitSlot counts a waiting acquire against the bounds on waiters (per
// client and in all) and returns the wait it may have, and what to call when
// it is over: past a bound, 0, so that it tries once (granted if free, else
// lock_held now).
func (s *Handler) takeWaitSlot(c *call, wait time.Duration) (time.Duration, func()) {
	if wait <= 0 {
		return wait, func() {}
	}
	key := clientSlotKey(c)
	if !s.waiting.take(key, perClient(c, s.WaitersPerClient), s.Waiters) {
		waitsRefused.Inc()
		return 0, func() {}
	}
	c.extendWriteDeadline(wait)
	return wait, func() { s.waiting.give(key) }
}

func (s *Handler) acquire(c *call) error {
	req, err := decodeAcquire(c.body)
	c.holder = req.Holder
	if err != nil {
		return err
	}
	var done func()
	req.Wait, done = s.takeWaitSlot(c, req.Wait)
	defer done()
	// The request's context ends when the client goes away, which takes a
	// waiting acquire out of the queue.
	var l fence.Lease
	ctx := c.ownerContext()
	if !req.Session.IsZero() {
		ctx = fence.WithSession(ctx, req.Session)
	}
	switch {
	case req.Shared:
		if sa, ok := s.locker.(fence.SharedAcquirer); ok {
			l, err = sa.AcquireShared(ctx, c.resource, req.Holder, req.TTL, req.Wait)
		} else {
			err = fmt.Errorf("%w: this server's lock service has no shared holds", fence.ErrNotFound)
		}
	case req.Limit == 0:
		l, err = s.locker.Acquire(ctx, c.resource, req.Holder, req.TTL, req.Wait)
	default:
		if pa, ok := s.locker.(fence.PermitAcquirer); ok {
			l, err = pa.AcquirePermit(ctx, c.resource, req.Holder, req.Limit, req.TTL, req.Wait)
		} else {
			err = fmt.Errorf("%w: this server's lock service has no semaphores", fence.ErrNotFound)
		}
	}
	if err != nil {
		return err
	}
	// A permit's lease names its slot, the resource to renew and release.
	c.writeJSON(wire.NewLease(c.resource, l))
	return nil
}

// acquireAll answers POST /v1/locks, an addition to API.md: it grants
// every resource of the body to its holder in one change, or none. The
// caller needs lock on each; a waiting one counts as one waiter.
func (s *Handler) acquireAll(c *call) error {
	req, err := decodeAcquireAll(c.body)
	c.holder = req.Holder
	if err != nil {
		return err
	}
	for _, r := range req.Resources {
		if err := c.allowed(wire.PermLock, r); err != nil {
			return err
		}
	}
	ma, ok := s.locker.(fence.MultiAcquirer)
	if !ok {
		return fmt.Errorf("%w: this server's lock service cannot acquire several resources at once", fence.ErrNotFound)
	}
	var done func()
	req.Wait, done = s.takeWaitSlot(c, req.Wait)
	defer done()
	ctx := c.ownerContext()
	if !req.Session.IsZero() {
		ctx = fence.WithSession(ctx, req.Session)
	}
	ls, err := ma.AcquireAll(ctx, req.Resources, req.Holder, req.TTL, req.Wait)
	if err != nil {
		return err
	}
	resp := wire.AcquireAllResponse{Leases: make([]wire.Lease, len(ls))}
	for i, l := range ls {
		resp.Leases[i] = wire.NewLease(l.Resource, l)
	}
	c.writeJSON(resp)
	return nil
}

func (s *Handler) renew(c *call) error {
	req, err := decodeRenew(c.body)
	c.presented = req.Token
	if err != nil {
		return err
	}
	if err := checkDeadline(c.r.Header.Get(wire.DeadlineHeader), time.Now()); err != nil {
		return err
	}
	var l fence.Lease
	var asked []fence.AskedLease
	sr, renewsSessions := s.locker.(fence.SessionRenewer)
	if req.Holder == "" && renewsSessions && fence.IsSessionResource(c.resource) {
		l, asked, err = sr.RenewSession(c.ownerContext(), fence.SessionRef{Resource: c.resource, Token: req.Token}, req.TTL)
	} else if req.Holder == "" {
		l, err = s.locker.Renew(c.ownerContext(), c.resource, req.Token, req.TTL)
	} else if sa, ok := s.locker.(fence.SharedAcquirer); ok {
		c.holder = req.Holder
		l, err = sa.RenewShared(c.ownerContext(), c.resource, req.Holder, req.Token, req.TTL)
	} else {
		err = fmt.Errorf("%w: this server's lock service has no shared holds", fence.ErrNotFound)
	}
	if err != nil {
		return err
	}
	c.holder = l.Holder
	resp := wire.NewLease(c.resource, l)
	resp.Asked = wire.NewAsked(asked)
	c.writeJSON(resp)
	return nil
}

// checkDeadline refuses a request whose Fence-Deadline (v; "" for none)
// passed before now: its client gave up on it (the server was paused while
// the request waited in its socket, say), and a renewal applied now would
// hold for a full TTL a lease its holder has let go. The deadline is on
// this server's clock, as the client learnt it from its lease answers; a
// slack here would serve exactly the renewal of a server woken just after
// its client gave up.
func checkDeadline(v string, now time.Time) error {
	if v == "" {
		return nil
	}
	d, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return badRequest("%s %q: want an RFC 3339 time", wire.DeadlineHeader, v)
	}
	if now.After(d) {
		return badRequest("%s %s passed %s ago by this server's clock: the client had given up on this request, so it was not applied",
			wire.DeadlineHeader, v, now.Sub(d).Round(time.Millisecond))
	}
	return nil
}

func (s *Handler) release(c *call) error {
	req, err := decodeRelease(c.body)
	c.presented, c.holder = req.Token, req.Holder
	if err != nil {
		return err
	}
	if req.Holder == "" {
		err = s.locker.Release(c.ownerContext(), c.resource, req.Token)
	} else if sa, ok := s.locker.(fence.SharedAcquirer); ok {
		err = sa.ReleaseShared(c.ownerContext(), c.resource, req.Holder, req.Token)
	} else {
		err = fmt.Errorf("%w: this server's lock service has no shared holds", fence.ErrNotFound)
	}
	if err != nil {
		return err
	}
	c.writeJSON(wire.ReleaseResponse{Resource: c.resource, Released: true})
	return nil
}

// transfer answers POST /v1/locks/{resource}/transfer, an addition to
// API.md: the holder of token hands the lease to the first waiter whose
// holder is "to" (absent or "": the first waiter), in one change. It
// answers 404 not_found if nobody named waits, or if the Locker is not a
// fence.Transferer.
func (s *Handler) transfer(c *call) error {
	req, err := decodeTransfer(c.body)
	c.presented = req.Token
	if err != nil {
		return err
	}
	tr, ok := s.locker.(fence.Transferer)
	if !ok {
		return fmt.Errorf("%w: this server's lock service cannot transfer", fence.ErrNotFound)
	}
	l, err := tr.Transfer(c.ownerContext(), c.resource, req.Token, req.To)
	if err != nil {
		return err
	}
	c.holder = l.Holder
	c.writeJSON(wire.TransferResponse{Resource: c.resource, Holder: l.Holder, Token: l.Token, ExpiresAt: wire.Timestamp(l.Expires)})
	return nil
}

// revoke answers POST /v1/locks/{resource}/revoke (body empty or {}), an
// addition to API.md: it ends the current lease, if any, and raises the
// resource's fence to a new token issued to nobody, so that the old holder is
// fenced at once. It answers 404 not_found if the Locker is not a
// fence.Revoker. It needs the admin permission.
//
// With {"grace_ms": N} it asks the holder to let go instead (cooperative
// revocation): 202 with the lease asked and its revoke_at, when the
// resource is revoked unless the holder releases it first; a free
// resource is revoked at once (200).
func (s *Handler) revoke(c *call) error {
	grace, err := decodeRevoke(c.body)
	if err != nil {
		return err
	}
	var res fence.RevokeResult
	if grace == 0 {
		rv, ok := s.locker.(fence.Revoker)
		if !ok {
			return fmt.Errorf("%w: this server's lock service cannot revoke", fence.ErrNotFound)
		}
		if res, err = rv.Revoke(c.r.Context(), c.resource); err != nil {
			return err
		}
	} else {
		rr, ok := s.locker.(fence.RevokeRequester)
		if !ok {
			return fmt.Errorf("%w: this server's lock service cannot ask a holder to let go", fence.ErrNotFound)
		}
		var asked fence.Lease
		if asked, res, err = rr.RequestRevoke(c.r.Context(), c.resource, grace); err != nil {
			return err
		}
		if asked.Token != 0 {
			c.holder = asked.Holder
			c.writeJSONStatus(http.StatusAccepted, wire.RevokeAsked{Resource: c.resource, Holder: asked.Holder, Token: asked.Token,
				RevokeAt: wire.Timestamp(asked.RevokeAt), Mode: wire.ModeOf(asked.Shared)})
			return nil
		}
	}
	c.writeJSON(wire.RevokeResponse{Resource: c.resource, RevokedToken: res.Revoked, LastFence: res.LastFence})
	return nil
}

// acquireRequest is the body of POST /v1/locks/{resource}/acquire.
type acquireRequest struct {
	Holder  string
	TTL     time.Duration // 0 in a session without ttl_ms: the session's
	Wait    time.Duration
	Limit   int              // 0: a lock; else one of Limit permits
	Session fence.SessionRef // zero: none
	Shared  bool             // "mode": "shared"
}

// decodeAcquire decodes {"holder", "ttl_ms", "wait_ms", "limit",
// "session", "mode"}: holder required, ttl_ms in 10..86400000 (default
// 10000, or in a session the session's), wait_ms in 0..300000 (default 0),
// limit in 1..fence.MaxPermits (absent: a lock, not a permit), session
// {"resource", "token"} (absent: none), mode "exclusive" (the default) or
// "shared", which takes neither a limit nor a session.
func decodeAcquire(data []byte) (acquireRequest, error) {
	ms, err := decodeObject("acquire", data, "holder", "ttl_ms", "wait_ms", "limit", "session", "mode")
	if err != nil {
		return acquireRequest{}, err
	}
	req, err := decodeAcquireMembers(ms)
	if err != nil {
		return req, err
	}
	if v := get(ms, "mode"); v != nil {
		mode, err := str("mode", v)
		if err != nil {
			return req, err
		}
		switch mode {
		case wire.ModeExclusive:
		case wire.ModeShared:
			req.Shared = true
		default:
			return req, badRequest("mode must be %q or %q, not %s", wire.ModeExclusive, wire.ModeShared, clip(v))
		}
	}
	switch {
	case req.Shared && req.Limit != 0:
		return req, badRequest("acquire: a shared hold has no limit: permits are exclusive leases on slots")
	case req.Shared && !req.Session.IsZero():
		return req, badRequest("acquire: a shared hold is in no session: acquire it without one")
	}
	return req, nil
}

// decodeSessionRef decodes {"resource", "token"}, both required.
func decodeSessionRef(v json.RawMessage) (fence.SessionRef, error) {
	var ref fence.SessionRef
	ms, err := decodeObject("session", v, "resource", "token")
	if err != nil {
		return ref, err
	}
	r, t := get(ms, "resource"), get(ms, "token")
	if r == nil || t == nil {
		return ref, badRequest("session: resource and token are required")
	}
	if ref.Resource, err = str("session resource", r); err != nil {
		return ref, err
	}
	if ref.Token, err = jsonToken("session token", t); err != nil {
		return ref, badRequest("%v", err)
	}
	return ref, ref.Validate()
}

// decodeAcquireMembers decodes the members of an acquire's body, checked
// already for unknown and repeated names.
func decodeAcquireMembers(ms []member) (acquireRequest, error) {
	var req acquireRequest
	var err error
	h := get(ms, "holder")
	if h == nil {
		return req, badRequest("acquire: holder is required")
	}
	if req.Holder, err = str("holder", h); err != nil {
		return req, err
	}
	if err := fence.ValidateHolder(req.Holder); err != nil {
		return req, err
	}
	if req.TTL, err = millis("ttl_ms", get(ms, "ttl_ms"), minTTLMS, maxTTLMS, defaultTTLMS); err != nil {
		return req, err
	}
	if req.Wait, err = millis("wait_ms", get(ms, "wait_ms"), 0, maxWaitMS, 0); err != nil {
		return req, err
	}
	if v := get(ms, "limit"); v != nil {
		n, ok := integer(v, 1, fence.MaxPermits)
		if !ok {
			return req, badRequest("limit must be an integer in 1..%d, not %s", fence.MaxPermits, clip(v))
		}
		req.Limit = int(n)
	}
	if v := get(ms, "session"); v != nil {
		if req.Session, err = decodeSessionRef(v); err != nil {
			return req, err
		}
		if get(ms, "ttl_ms") == nil {
			req.TTL = 0 // the session's
		}
	}
	return req, nil
}

// acquireAllRequest is the body of POST /v1/locks.
type acquireAllRequest struct {
	acquireRequest
	Resources []string
}

// decodeAcquireAll decodes {"resources", "holder", "ttl_ms", "wait_ms",
// "session"}: resources required, an array of 1..fence.MaxMultiAcquire
// distinct valid names; the rest as for an acquire (no limit: permits are
// taken one by one).
func decodeAcquireAll(data []byte) (acquireAllRequest, error) {
	var req acquireAllRequest
	ms, err := decodeObject("acquire", data, "resources", "holder", "ttl_ms", "wait_ms", "session")
	if err != nil {
		return req, err
	}
	rs := get(ms, "resources")
	if rs == nil {
		return req, badRequest("acquire: resources is required")
	}
	es, err := elements("resources", rs, fence.MaxMultiAcquire)
	if err != nil {
		return req, err
	}
	if len(es) == 0 {
		return req, badRequest("acquire: resources is empty")
	}
	seen := make(map[string]bool, len(es))
	for _, e := range es {
		name, err := str("resources", e)
		if err != nil {
			return req, err
		}
		if err := fence.ValidateResource(name); err != nil {
			return req, err
		}
		if seen[name] {
			return req, badRequest("acquire: resource %q is named twice", name)
		}
		seen[name] = true
		req.Resources = append(req.Resources, name)
	}
	req.acquireRequest, err = decodeAcquireMembers(ms)
	return req, err
}

// renewRequest is the body of POST /v1/locks/{resource}/renew.
type renewRequest struct {
	Token  fence.Token
	TTL    time.Duration // 0: keep the lease's TTL
	Holder string        // "": not named (required for a shared hold)
}

// decodeRenew decodes {"token", "ttl_ms", "holder"}: token required,
// ttl_ms optional in 10..86400000 (absent: 0, the lease's current TTL),
// holder optional (a holder id).
func decodeRenew(data []byte) (renewRequest, error) {
	var req renewRequest
	ms, err := decodeObject("renew", data, "token", "ttl_ms", "holder")
	if err != nil {
		return req, err
	}
	t := get(ms, "token")
	if t == nil {
		return req, badRequest("renew: token is required")
	}
	// Every bad_request check comes before the token's, which is invalid_token.
	if req.TTL, err = millis("ttl_ms", get(ms, "ttl_ms"), minTTLMS, maxTTLMS, 0); err != nil {
		return req, err
	}
	if req.Holder, err = optionalHolder(get(ms, "holder")); err != nil {
		return req, err
	}
	if req.Token, err = jsonToken("token", t); err != nil {
		return req, err
	}
	return req, nil
}

// releaseRequest is the body of POST /v1/locks/{resource}/release.
type releaseRequest struct {
	Token  fence.Token
	Holder string // "": not named (required for a shared hold)
}

// decodeRelease decodes {"token", "holder"}: token required, holder
// optional (a holder id).
func decodeRelease(data []byte) (releaseRequest, error) {
	var req releaseRequest
	ms, err := decodeObject("release", data, "token", "holder")
	if err != nil {
		return req, err
	}
	t := get(ms, "token")
	if t == nil {
		return req, badRequest("release: token is required")
	}
	if req.Holder, err = optionalHolder(get(ms, "holder")); err != nil {
		return req, err
	}
	req.Token, err = jsonToken("token", t)
	return req, err
}

// optionalHolder decodes the holder member of a renew or release: absent
// is "".
func optionalHolder(v json.RawMessage) (string, error) {
	if v == nil {
		return "", nil
	}
	h, err := str("holder", v)
	if err != nil {
		return "", err
	}
	return h, fence.ValidateHolder(h)
}

// transferRequest is the body of POST /v1/locks/{resource}/transfer.
type transferRequest struct {
	Token fence.Token
	To    string // "": the first waiter
}

// decodeTransfer decodes {"token", "to"}: token required, to optional (a
// holder id; absent or "" for the first waiter).
func decodeTransfer(data []byte) (transferRequest, error) {
	var req transferRequest
	ms, err := decodeObject("transfer", data, "token", "to")
	if err != nil {
		return req, err
	}
	t := get(ms, "token")
	if t == nil {
		return req, badRequest("transfer: token is required")
	}
	// Every bad_request check comes before the token's, which is invalid_token.
	if to := get(ms, "to"); to != nil {
		if req.To, err = str("to", to); err != nil {
			return req, err
		}
		if req.To != "" {
			if err := fence.ValidateHolder(req.To); err != nil {
				return req, fmt.Errorf("to: %w", err)
			}
		}
	}
	if req.Token, err = jsonToken("token", t); err != nil {
		return req, err
	}
	return req, nil
}

// decodeRevoke decodes a revoke's body: empty, or {"grace_ms"} with
// grace_ms optional in 10..86400000 (absent: 0, revoke now).
func decodeRevoke(data []byte) (time.Duration, error) {
	if len(data) == 0 {
		return 0, nil
	}
	ms, err := decodeObject("revoke", data, "grace_ms")
	if err != nil {
		return 0, err
	}
	return millis("grace_ms", get(ms, "grace_ms"), minTTLMS, maxTTLMS, 0)
}
