package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/wire"
)

// kvHandlers binds the fenced key-value store: GET, PUT and DELETE
// /v1/kv/{resource}/{key}.
var kvHandlers = handlerSet{
	wire.OpGetValue:    {serve: (*Handler).get},
	wire.OpPutValue:    {body: fence.MaxValueSize, serve: (*Handler).put},
	wire.OpDeleteValue: {serve: (*Handler).delete},
}

func (s *Handler) get(c *call) error {
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

func (s *Handler) put(c *call) error {
	value := c.body
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

func (s *Handler) delete(c *call) error {
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
