package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/docs"
	"github.com/fence-lock/fence/internal/support/logline"
	"github.com/fence-lock/fence/ui"
	"github.com/fence-lock/fence/wire"
)

// Each handler checks the request in the API's order of precedence
// (too_large, bad_request, fence_required, invalid_token) before it calls the
// Locker or the Store, which answer the rest (token_not_issued, fenced,
// precondition_failed, not_found). So a rejected request never reaches a
// mutating method.

// ui answers GET /ui/{file}: the dashboard's files, index.html for /ui and
// /ui/.
func (s *Handler) ui(c *call, m match) error {
	name, err := unescape("file", m.key)
	if err != nil {
		return err
	}
	if name == "" {
		name = "index.html"
	}
	if !fs.ValidPath(name) {
		return fmt.Errorf("%w: no dashboard file %q", fence.ErrNotFound, name)
	}
	b, err := fs.ReadFile(ui.Files(), name)
	if err != nil {
		return fmt.Errorf("%w: no dashboard file %q", fence.ErrNotFound, name)
	}
	h := c.w.Header()
	h.Set("Content-Type", ui.ContentType(name))
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	c.w.WriteHeader(http.StatusOK)
	if c.r.Method != "HEAD" {
		c.w.Write(b)
	}
	return nil
}

// openAPI answers GET /v1/openapi.json: the API's OpenAPI 3.1 document.
func (s *Handler) openAPI(c *call, _ match) error {
	c.writeRaw(bytes.TrimSpace(docs.OpenAPIJSON))
	return nil
}

func (s *Handler) keys(c *call, _ match) error {
	keys := s.Keys
	if keys == nil {
		keys = []fence.PublicKey{}
	}
	b, err := json.Marshal(wire.KeysResponse{Keys: keys})
	if err != nil { // a key of the wrong size or with a bad id
		return fmt.Errorf("%w: encoding the public keys: %w", wire.ErrInternal, err)
	}
	c.writeRaw(b)
	return nil
}

func (s *Handler) ready(c *call, _ match) error {
	if s.Ready != nil {
		if err := s.Ready(); err != nil {
			return fmt.Errorf("%w: %v", wire.ErrNotReady, err) // not_ready, whatever the cause
		}
	}
	c.writeJSON(wire.Health{Status: "ok"})
	return nil
}

func (s *Handler) lockStatus(c *call, m match) error {
	if err := c.params(m); err != nil {
		return err
	}
	st, err := s.locker.Status(c.r.Context(), c.resource)
	if err != nil {
		return err
	}
	resp := wire.LockStatus{Resource: c.resource, Held: st.Held, LastToken: st.LastToken}
	if st.Held {
		resp.Holder, resp.Token, resp.ExpiresAt = st.Holder, st.Token, wire.Timestamp(st.Expires)
	}
	c.writeJSON(resp)
	return nil
}

func (s *Handler) listLocks(c *call, _ match) error {
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
	limit := wire.DefaultListLimit
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
			resp.Locks = append(resp.Locks, wire.ListedLock{Resource: l.Resource, Holder: l.Holder, Token: l.Token,
				ExpiresAt: wire.Timestamp(l.Expires), Waiters: l.Waiters})
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

func (s *Handler) acquire(c *call, m match) error {
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
		key := clientSlotKey(c)
		if s.waiting.take(key, perClient(c, s.WaitersPerClient), s.Waiters) {
			defer s.waiting.give(key)
			c.extendWriteDeadline(req.Wait)
		} else {
			waitsRefused.Inc()
			req.Wait = 0 // try once: granted if free, else lock_held now
		}
	}
	// The request's context ends when the client goes away, which takes a
	// waiting acquire out of the queue.
	l, err := s.locker.Acquire(c.ownerContext(), c.resource, req.Holder, req.TTL, req.Wait)
	if err != nil {
		return err
	}
	c.writeJSON(wire.NewLease(c.resource, l))
	return nil
}

func (s *Handler) renew(c *call, m match) error {
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
	l, err := s.locker.Renew(c.ownerContext(), c.resource, req.Token, req.TTL)
	if err != nil {
		return err
	}
	c.holder = l.Holder
	c.writeJSON(wire.NewLease(c.resource, l))
	return nil
}

func (s *Handler) release(c *call, m match) error {
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
	if err := s.locker.Release(c.ownerContext(), c.resource, t); err != nil {
		return err
	}
	c.writeJSON(wire.ReleaseResponse{Resource: c.resource, Released: true})
	return nil
}

// revoke answers POST /v1/locks/{resource}/revoke (body empty or {}), an
// addition to API.md: it ends the current lease, if any, and raises the
// resource's fence to a new token issued to nobody, so that the old holder is
// fenced at once. It answers 404 not_found if the Locker is not a
// fence.Revoker. It needs the admin permission.
func (s *Handler) revoke(c *call, m match) error {
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
	c.writeJSON(wire.RevokeResponse{Resource: c.resource, RevokedToken: res.Revoked, LastFence: res.LastFence})
	return nil
}

func (s *Handler) get(c *call, m match) error {
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
	h.Set("ETag", wire.ETag(it.Rev))
	h.Set(wire.TokenHeader, it.Token.String())
	c.w.WriteHeader(http.StatusOK)
	c.w.Write(it.Value)
	return nil
}

// writeHeaders checks the Fencing-Token, If-Match and If-None-Match headers
// of a write (a put or delete with withCond; a claim without), bad_request
// before fence_required before invalid_token. A put or delete without a
// token of a best-effort resource (Handler.Unfenced) sets c.unfenced.
func (c *call) writeHeaders(withCond bool) (fence.Token, fence.Cond, error) {
	var cnd fence.Cond
	if withCond {
		var err error
		if cnd, err = cond(c.r.Header); err != nil {
			return 0, cnd, err
		}
	}
	t, err := fencingToken(c.r.Header)
	if withCond && errors.Is(err, fence.ErrFenceRequired) && c.s.unfenced(c.resource) {
		c.unfenced = true
		return 0, cnd, nil
	}
	c.presented = t
	return t, cnd, err
}

// unfencedStore returns the store's unfenced writes; a store without them
// (a Handler with Unfenced set over one) refuses them all.
func (s *Handler) unfencedStore() fence.UnfencedStore {
	if u, ok := s.store.(fence.UnfencedStore); ok {
		return u
	}
	return noUnfenced{}
}

// noUnfenced is the UnfencedStore of a store that has none.
type noUnfenced struct{}

func (noUnfenced) PutUnfenced(context.Context, string, string, []byte, fence.Cond) (fence.WriteResult, error) {
	return fence.WriteResult{}, fmt.Errorf("%w: this server's store cannot write without a token", fence.ErrFenceRequired)
}

func (noUnfenced) DeleteUnfenced(context.Context, string, string, fence.Cond) (fence.WriteResult, error) {
	return fence.WriteResult{}, fmt.Errorf("%w: this server's store cannot write without a token", fence.ErrFenceRequired)
}

// unfenced reports whether resource is a best-effort one (Handler.Unfenced).
func (s *Handler) unfenced(resource string) bool { return hasPrefix(resource, s.Unfenced) }

func (s *Handler) put(c *call, m match) error {
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
	var res fence.WriteResult
	if c.unfenced {
		res, err = s.unfencedStore().PutUnfenced(c.r.Context(), c.resource, c.key, value, cnd)
	} else {
		res, err = s.store.Put(c.r.Context(), c.resource, c.key, value, t, cnd)
	}
	if err != nil {
		return err
	}
	c.accepted("put", t, res)
	c.writeJSON(wire.PutResponse{Resource: c.resource, Key: c.key, Revision: res.Rev, Fence: res.LastFence})
	return nil
}

func (s *Handler) delete(c *call, m match) error {
	if err := c.params(m); err != nil {
		return err
	}
	t, cnd, err := c.writeHeaders(true)
	if err != nil {
		return err
	}
	var res fence.WriteResult
	if c.unfenced {
		res, err = s.unfencedStore().DeleteUnfenced(c.r.Context(), c.resource, c.key, cnd)
	} else {
		res, err = s.store.Delete(c.r.Context(), c.resource, c.key, t, cnd)
	}
	if err != nil {
		return err
	}
	c.accepted("delete", t, res)
	c.writeJSON(wire.DeleteResponse{Resource: c.resource, Key: c.key, Revision: res.Rev})
	return nil
}

func (s *Handler) fence(c *call, m match) error {
	if err := c.params(m); err != nil {
		return err
	}
	f, err := s.store.Fence(c.r.Context(), c.resource)
	if err != nil {
		return err
	}
	c.writeJSON(wire.FenceResponse{Resource: c.resource, LastFence: f})
	return nil
}

func (s *Handler) claim(c *call, m match) error {
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
	c.writeJSON(wire.FenceResponse{Resource: c.resource, LastFence: res.LastFence})
	return nil
}

func (s *Handler) txn(c *call, _ match) error {
	body, err := c.readBody(maxTxnBody)
	if err != nil {
		return err
	}
	// A txn that only lacks a fence or has an invalid token comes with
	// its names, which are authorized first: forbidden wins over both.
	t, err := decodeTxn(body)
	if t == nil {
		return err
	}
	if err := s.authorizeTxn(c, t); err != nil {
		return err
	}
	if err != nil {
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
		logline.Log(c.r.Context(), c.s.logger(), slog.LevelInfo, "write accepted",
			slog.String("op", "txn"),
			slog.String(keyResource, res),
			slog.Uint64(keyToken, uint64(tok)),
			slog.Uint64(keyLastFence, uint64(tok)),
			slog.Int("ops", ops),
			slog.Uint64(keyRevision, uint64(rev)))
	}
	c.writeJSON(wire.TxnResponse{Revision: rev})
	return nil
}

func (s *Handler) cluster(c *call, _ match) error {
	st := wire.ClusterStatus{Role: wire.RoleLeader, Epoch: 1, Store: "embedded", Servers: []wire.ClusterServer{{Role: wire.RoleLeader}}}
	if s.Cluster != nil {
		var err error
		if st, err = s.Cluster(c.r.Context()); err != nil {
			return err
		}
	}
	if st.Servers == nil {
		st.Servers = []wire.ClusterServer{}
	}
	c.writeJSON(st)
	return nil
}
