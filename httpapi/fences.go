package httpapi

import "github.com/fence-lock/fence/wire"

// fenceHandlers binds a resource's fence: GET and POST /v1/fences/{resource}.
var fenceHandlers = handlerSet{
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
