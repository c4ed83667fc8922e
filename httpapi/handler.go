package httpapi

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/fence-lock/fence"
)

// Each handler checks the request in the API's order of precedence
// (too_large, bad_request, fence_required, invalid_token) before it calls the
// Locker or the Store, which answer the rest (token_not_issued, fenced,
// precondition_failed, not_found). So a rejected request never reaches a
// mutating method.

// statusResponse is the body of /healthz and /readyz.
type statusResponse struct {
	Status string `json:"status"`
}

// leaseResponse is a Lease, the answer to acquire and renew.
type leaseResponse struct {
	Resource  string      `json:"resource"`
	Holder    string      `json:"holder"`
	Token     fence.Token `json:"token"`
	TTLMS     int64       `json:"ttl_ms"`
	ExpiresAt string      `json:"expires_at"`
	Sequencer string      `json:"sequencer,omitempty"` // absent when the server signs nothing
}

func newLeaseResponse(resource string, l fence.Lease) leaseResponse {
	return leaseResponse{
		Resource:  cmp.Or(l.Resource, resource),
		Holder:    l.Holder,
		Token:     l.Token,
		TTLMS:     l.TTL.Milliseconds(),
		ExpiresAt: timestamp(l.Expires),
		Sequencer: l.Sequencer,
	}
}

// timestamp formats t as RFC 3339 in UTC.
func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// releaseResponse is the answer to release.
type releaseResponse struct {
	Resource string `json:"resource"`
	Released bool   `json:"released"`
}

// revokeResponse is the answer to revoke. RevokedToken is 0 if the resource
// was free.
type revokeResponse struct {
	Resource     string      `json:"resource"`
	RevokedToken fence.Token `json:"revoked_token"`
	LastFence    fence.Token `json:"last_fence"`
}

// lockResponse is the answer to GET /v1/locks/{resource}. Holder, Token and
// ExpiresAt are set only while the lock is held.
type lockResponse struct {
	Resource  string      `json:"resource"`
	Held      bool        `json:"held"`
	Holder    string      `json:"holder,omitempty"`
	Token     fence.Token `json:"token,omitempty"`
	ExpiresAt string      `json:"expires_at,omitempty"`
	LastToken fence.Token `json:"last_token"`
}

// putResponse is the answer to PUT /v1/kv/{resource}/{key}.
type putResponse struct {
	Resource string      `json:"resource"`
	Key      string      `json:"key"`
	Revision fence.Rev   `json:"revision"`
	Fence    fence.Token `json:"fence"`
}

// deleteResponse is the answer to DELETE /v1/kv/{resource}/{key}.
type deleteResponse struct {
	Resource string    `json:"resource"`
	Key      string    `json:"key"`
	Revision fence.Rev `json:"revision"`
}

// fenceResponse is the answer to GET and POST /v1/fences/{resource}.
type fenceResponse struct {
	Resource  string      `json:"resource"`
	LastFence fence.Token `json:"last_fence"`
}

// keysResponse is the answer to GET /v1/keys. Keys is [] when the server
// signs nothing.
type keysResponse struct {
	Keys []fence.PublicKey `json:"keys"`
}

// txnResponse is the answer to POST /v1/txn.
type txnResponse struct {
	Revision fence.Rev `json:"revision"`
}

func (s *Server) keys(c *call) error {
	keys := s.Keys
	if keys == nil {
		keys = []fence.PublicKey{}
	}
	b, err := json.Marshal(keysResponse{Keys: keys})
	if err != nil { // a key of the wrong size or with a bad id
		return fmt.Errorf("%w: encoding the public keys: %w", errInternal, err)
	}
	c.writeRaw(b)
	return nil
}

func (s *Server) ready(c *call) error {
	if s.Ready != nil {
		if err := s.Ready(); err != nil {
			return fmt.Errorf("%w: %w", errNotReady, err)
		}
	}
	c.writeJSON(statusResponse{Status: "ok"})
	return nil
}

func (s *Server) lockStatus(c *call, m match) error {
	if err := c.params(m); err != nil {
		return err
	}
	st, err := s.locker.Status(c.r.Context(), c.resource)
	if err != nil {
		return err
	}
	resp := lockResponse{Resource: c.resource, Held: st.Held, LastToken: st.LastToken}
	if st.Held {
		resp.Holder, resp.Token, resp.ExpiresAt = st.Holder, st.Token, timestamp(st.Expires)
	}
	c.writeJSON(resp)
	return nil
}

// DefaultListLimit is the locks GET /v1/locks returns without a limit.
const DefaultListLimit = 100

// listResponse is the answer to GET /v1/locks. Next, when set, is the
// after of the next page.
type listResponse struct {
	Locks []listedLock `json:"locks"`
	Next  string       `json:"next,omitempty"`
}

// listedLock is one held lock of a listResponse.
type listedLock struct {
	Resource  string      `json:"resource"`
	Holder    string      `json:"holder"`
	Token     fence.Token `json:"token"`
	ExpiresAt string      `json:"expires_at"`
	Waiters   int         `json:"waiters"`
}

func (s *Server) listLocks(c *call) error {
	q := c.r.URL.Query()
	for name := range q {
		if name != "prefix" && name != "after" && name != "limit" {
			return badRequest("unknown query parameter %q (known: prefix, after, limit)", name)
		}
	}
	prefix, after := q.Get("prefix"), q.Get("after")
	if prefix != "" {
		if err := fence.ValidateResource(prefix); err != nil {
			return fmt.Errorf("prefix: %w", err)
		}
	}
	if after != "" {
		if err := fence.ValidateResource(after); err != nil {
			return fmt.Errorf("after: %w", err)
		}
	}
	limit := DefaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > fence.MaxListLimit {
			return badRequest("limit %q: want an integer in 1..%d", v, fence.MaxListLimit)
		}
		limit = n
	}
	lister, ok := s.locker.(fence.Lister)
	if !ok {
		return fmt.Errorf("%w: this server's lock service cannot list", fence.ErrNotFound)
	}
	resp := listResponse{Locks: []listedLock{}}
	// With auth, pages are filtered: ask for pages until this one is full
	// of locks the caller may read, or there are no more.
	for {
		locks, more, err := lister.List(c.r.Context(), prefix, after, limit-len(resp.Locks))
		if err != nil {
			return err
		}
		for _, l := range locks {
			after = l.Resource
			if s.Auth != nil && s.Auth(c.r, permRead, l.Resource) != nil {
				continue
			}
			resp.Locks = append(resp.Locks, listedLock{Resource: l.Resource, Holder: l.Holder, Token: l.Token,
				ExpiresAt: timestamp(l.Expires), Waiters: l.Waiters})
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

func (s *Server) acquire(c *call, m match) error {
	body, err := c.readBody(maxJSONBody)
	if err != nil {
		return err
	}
	if err := c.params(m); err != nil {
		return err
	}
	req, err := decodeAcquire(body)
	c.holder = req.Holder
	if err != nil {
		return err
	}
	if req.Wait > 0 {
		c.extendWriteDeadline(req.Wait)
	}
	// The request's context ends when the client goes away, which takes a
	// waiting acquire out of the queue.
	l, err := s.locker.Acquire(c.r.Context(), c.resource, req.Holder, req.TTL, req.Wait)
	if err != nil {
		return err
	}
	c.writeJSON(newLeaseResponse(c.resource, l))
	return nil
}

func (s *Server) renew(c *call, m match) error {
	body, err := c.readBody(maxJSONBody)
	if err != nil {
		return err
	}
	if err := c.params(m); err != nil {
		return err
	}
	req, err := decodeRenew(body)
	c.presented = req.Token
	if err != nil {
		return err
	}
	l, err := s.locker.Renew(c.r.Context(), c.resource, req.Token, req.TTL)
	if err != nil {
		return err
	}
	c.holder = l.Holder
	c.writeJSON(newLeaseResponse(c.resource, l))
	return nil
}

func (s *Server) release(c *call, m match) error {
	body, err := c.readBody(maxJSONBody)
	if err != nil {
		return err
	}
	if err := c.params(m); err != nil {
		return err
	}
	t, err := decodeRelease(body)
	c.presented = t
	if err != nil {
		return err
	}
	if err := s.locker.Release(c.r.Context(), c.resource, t); err != nil {
		return err
	}
	c.writeJSON(releaseResponse{Resource: c.resource, Released: true})
	return nil
}

// revoke answers POST /v1/locks/{resource}/revoke (body empty or {}), an
// addition to API.md: it ends the current lease, if any, and raises the
// resource's fence to a new token issued to nobody, so that the old holder is
// fenced at once. It answers 404 not_found if the Locker is not a
// fence.Revoker.
//
// It is an admin action, but the route is UNPROTECTED until authorisation
// (an admin permission) lands: anyone who can reach the server can revoke.
func (s *Server) revoke(c *call, m match) error {
	body, err := c.readBody(maxJSONBody)
	if err != nil {
		return err
	}
	if err := c.params(m); err != nil {
		return err
	}
	if err := decodeRevoke(body); err != nil {
		return err
	}
	rv, ok := s.locker.(fence.Revoker)
	if !ok {
		return fmt.Errorf("%w: this server's lock service cannot revoke", fence.ErrNotFound)
	}
	res, err := rv.Revoke(c.r.Context(), c.resource)
	if err != nil {
		return err
	}
	c.writeJSON(revokeResponse{Resource: c.resource, RevokedToken: res.Revoked, LastFence: res.LastFence})
	return nil
}

func (s *Server) get(c *call, m match) error {
	if err := c.params(m); err != nil {
		return err
	}
	it, err := s.store.Get(c.r.Context(), c.resource, c.key)
	if err != nil {
		return err
	}
	h := c.w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(it.Value)))
	h.Set("Cache-Control", "no-store")
	h.Set("ETag", etag(it.Rev))
	h.Set(headerToken, it.Token.String())
	c.w.WriteHeader(http.StatusOK)
	c.w.Write(it.Value)
	return nil
}

// writeHeaders checks the Fencing-Token, If-Match and If-None-Match headers
// of a write, bad_request before fence_required before invalid_token.
func (c *call) writeHeaders(withCond bool) (fence.Token, fence.Cond, error) {
	var cnd fence.Cond
	if withCond {
		var err error
		if cnd, err = cond(c.r.Header); err != nil {
			return 0, cnd, err
		}
	}
	t, err := fencingToken(c.r.Header)
	c.presented = t
	return t, cnd, err
}

func (s *Server) put(c *call, m match) error {
	value, err := c.readBody(fence.MaxValueSize)
	if err != nil {
		return err
	}
	if err := c.params(m); err != nil {
		return err
	}
	t, cnd, err := c.writeHeaders(true)
	if err != nil {
		return err
	}
	res, err := s.store.Put(c.r.Context(), c.resource, c.key, value, t, cnd)
	if err != nil {
		return err
	}
	c.accepted("put", t, res)
	c.writeJSON(putResponse{Resource: c.resource, Key: c.key, Revision: res.Rev, Fence: res.LastFence})
	return nil
}

func (s *Server) delete(c *call, m match) error {
	if err := c.params(m); err != nil {
		return err
	}
	t, cnd, err := c.writeHeaders(true)
	if err != nil {
		return err
	}
	res, err := s.store.Delete(c.r.Context(), c.resource, c.key, t, cnd)
	if err != nil {
		return err
	}
	c.accepted("delete", t, res)
	c.writeJSON(deleteResponse{Resource: c.resource, Key: c.key, Revision: res.Rev})
	return nil
}

func (s *Server) fence(c *call, m match) error {
	if err := c.params(m); err != nil {
		return err
	}
	f, err := s.store.Fence(c.r.Context(), c.resource)
	if err != nil {
		return err
	}
	c.writeJSON(fenceResponse{Resource: c.resource, LastFence: f})
	return nil
}

func (s *Server) claim(c *call, m match) error {
	if err := c.params(m); err != nil {
		return err
	}
	t, _, err := c.writeHeaders(false)
	if err != nil {
		return err
	}
	res, err := s.store.Claim(c.r.Context(), c.resource, t)
	if err != nil {
		return err
	}
	c.accepted("claim", t, res)
	c.writeJSON(fenceResponse{Resource: c.resource, LastFence: res.LastFence})
	return nil
}

func (s *Server) txn(c *call) error {
	body, err := c.readBody(maxTxnBody)
	if err != nil {
		return err
	}
	t, err := decodeTxn(body)
	if err != nil {
		return err
	}
	if err := s.authorizeTxn(c, t); err != nil {
		return err
	}
	rev, err := s.store.Txn(c.r.Context(), t)
	if err != nil {
		return err
	}
	// One line per fenced resource, in byte order of name. An accepted txn
	// raised each fence to its token, which is therefore the last fence.
	if len(t.Fences) > 0 {
		storageWrites.WithLabelValues("txn").Inc()
	}
	for _, res := range slices.Sorted(maps.Keys(t.Fences)) {
		ops := 0
		for _, op := range t.Then {
			if op.Resource == res {
				ops++
			}
		}
		tok := t.Fences[res]
		c.s.logger().LogAttrs(c.r.Context(), slog.LevelInfo, "write accepted",
			slog.String("op", "txn"),
			slog.String(keyResource, res),
			slog.Uint64(keyToken, uint64(tok)),
			slog.Uint64(keyLastFence, uint64(tok)),
			slog.Int("ops", ops),
			slog.Uint64(keyRevision, uint64(rev)))
	}
	c.writeJSON(txnResponse{Revision: rev})
	return nil
}

// ClusterStatus is the answer to GET /v1/cluster: what this server knows of
// the servers that share its store.
type ClusterStatus struct {
	// Role is this server's: "leader" (it serves requests from its state)
	// or "standby" (it forwards them to the leader).
	Role string `json:"role"`
	// Leader is the leader's advertise URL; "" while no server leads.
	Leader string `json:"leader"`
	// Epoch is the leader's writer epoch: it grows with every new leader.
	Epoch uint64 `json:"epoch"`
	// Store names the store's engine: "embedded", "etcd" or "postgres".
	Store string `json:"store"`
	// Servers are the servers that share the store, this one included.
	Servers []ClusterServer `json:"servers"`
}

// ClusterServer is one server of a ClusterStatus.
type ClusterServer struct {
	URL  string `json:"url"`  // its advertise URL; "" for an embedded store's server
	Role string `json:"role"` // "leader" or "standby"
}

// Roles of ClusterStatus and ClusterServer.
const (
	RoleLeader  = "leader"
	RoleStandby = "standby"
)

func (s *Server) cluster(c *call) error {
	st := ClusterStatus{Role: RoleLeader, Epoch: 1, Store: "embedded", Servers: []ClusterServer{{Role: RoleLeader}}}
	if s.Cluster != nil {
		var err error
		if st, err = s.Cluster(c.r.Context()); err != nil {
			return err
		}
	}
	if st.Servers == nil {
		st.Servers = []ClusterServer{}
	}
	c.writeJSON(st)
	return nil
}
