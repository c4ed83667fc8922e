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
	resp := wire.FenceListResponse{Fences: []wire.ListedFence{}}
	// With auth, pages are filtered as in listLocks.
	for {
		fences, more, err := lister.ListFences(c.r.Context(), prefix, after, limit-len(resp.Fences))
		if err != nil {
			return err
		}
		for _, f := range fences {
			after = f.Resource
			if c.allowed(wire.PermRead, f.Resource) != nil {
				continue
			}
			resp.Fences = append(resp.Fences, wire.ListedFence{Resource: f.Resource, LastToken: f.LastToken, LastFence: f.LastFence})
		}
		if !more {
			break
		}
		if len(resp.Fences) == limit {
			resp.Next = after
			break
		}
	}
	c.writeJSON(resp)
	return nil
}
