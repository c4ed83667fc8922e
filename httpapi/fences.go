package httpapi

import (
	"fmt"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/wire"
)

// fenceHandlers binds the fences: the listing (GET /v1/fences) and a
// resource's fence (GET and POST /v1/fences/{resource}).
var fenceHandlers = handlerSet{
	wire.OpListFences: {serve: (*Handler).listFences},
	wire.OpGetFence:   {serve: (*Handler).fence},
	wire.OpClaimFence: {serve: (*Handler).claim},
}

func (s *Handler) fence(c *call) error {
	f, err := s.store.Fence(c.r.Context(), c.resource)
	if err != nil {
		return err
	}
	c.writeJSON(wire.FenceResponse{Resource: c.resource, LastFence: f})
	return nil
}

func (s *Handler) claim(c *call) error {
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

func (s *Handler) listFences(c *call) error {
	prefix, after, limit, err := pageQuery(c.r)
	if err != nil {
		return err
	}
	lister, ok := s.store.(fence.FenceLister)
	if !ok {
		return fmt.Errorf("%w: this server's storage cannot list its fences", fence.ErrNotFound)
	}
	// With auth, only what the caller may read, filtered in the one scan
	// of the store (not page after page of it).
	var keep func(string) bool
	if s.Authenticate != nil {
		keep = func(resource string) bool { return c.allowed(wire.PermRead, resource) == nil }
	}
	fences, more, err := lister.ListFences(c.r.Context(), prefix, after, limit, keep)
	if err != nil {
		return err
	}
	resp := wire.FenceListResponse{Fences: make([]wire.ListedFence, 0, len(fences))}
	for _, f := range fences {
		resp.Fences = append(resp.Fences, wire.ListedFence{Resource: f.Resource, LastToken: f.LastToken, LastFence: f.LastFence})
	}
	if more {
		resp.Next = fences[len(fences)-1].Resource
	}
	c.writeJSON(resp)
	return nil
}
