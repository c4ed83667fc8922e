package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/wire"
)

// RequireFence returns middleware that enforces fencing tokens in front of any
// HTTP service: a mutating request (POST, PUT, PATCH, DELETE) must carry
// Fencing-Token, which must not be lower than the fence of the request's
// resource (as resource names it); the fence is then raised to it through f
// before the handler runs. It answers like fence does: 428 fence_required
// without a token, 400 invalid_token for a malformed one, 409 fenced for a
// stale one (problem+json), and 500 internal if f fails otherwise. Other methods pass
// through. The handler reads the token with TokenFrom.
//
// The check happens before the handler's own write: a holder that passed it
// and then paused can still write after a newer holder claimed. For a write
// that is atomic with its check, the handler writes through a guard with the
// same token (postgres.Guard.Run, redis.Guard.Apply, etcd.Guard.Apply).
//
//	fenced := httpapi.RequireFence(pgGuard, func(r *http.Request) string { return r.PathValue("account") })
//	mux.Handle("PUT /accounts/{account}", fenced(putAccount))
//
// Wrap each route's handler, not the mux: r.PathValue is set only once the
// mux has matched the request.
//
// RequireFence does not check sequencers: anyone who can send a request can
// raise the fence to any token. Use RequireFenceSigned to require them.
func RequireFence(f fence.Fencer, resource func(*http.Request) string) func(http.Handler) http.Handler {
	return RequireFenceSigned(f, nil, resource)
}

// RequireFenceSigned is RequireFence that also requires, if keys is not nil,
// a Fence-Sequencer header (wire.SequencerHeader) that keys verifies for the
// request's resource and Fencing-Token (fence.KeySet.Verify): a mutating
// request without one, or with one that is malformed, badly signed, signed by
// a key not in keys, or for another resource or token, is answered 403
// invalid_sequencer, and nothing is claimed. A valid sequencer never makes a
// stale token acceptable: the fence is still checked and raised through f.
// With nil keys it is RequireFence.
//
// The handler's context carries the sequencer (fence.SequencerFrom), so that a
// guard with Keys set, used in the handler, verifies it again.
func RequireFenceSigned(f fence.Fencer, keys fence.KeySet, resource func(*http.Request) string) func(http.Handler) http.Handler {
	return RequireFenceWith(f, resource, FenceOptions{Keys: keys})
}

// FenceOptions are the options of RequireFenceWith.
type FenceOptions struct {
	// Keys, if not nil, require a valid sequencer (see RequireFenceSigned).
	Keys fence.KeySet
	// Unfenced are the prefixes of best-effort resources, as fence serve
	// --unfenced takes them: a mutating request of one without a
	// Fencing-Token passes unfenced (TokenFrom reports none); with a token
	// it is checked as any other. Never for ledgers, inventory or bookings.
	Unfenced []string
}

// RequireFenceWith is RequireFence with options.
func RequireFenceWith(f fence.Fencer, resource func(*http.Request) string, opts FenceOptions) func(http.Handler) http.Handler {
	keys := opts.Keys
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.Method {
			case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			default:
				next.ServeHTTP(w, r)
				return
			}
			ctx := r.Context()
			if seq := r.Header.Get(wire.SequencerHeader); seq != "" {
				ctx = fence.WithSequencer(ctx, seq)
			}
			token, err := fencingToken(r.Header)
			if errors.Is(err, fence.ErrFenceRequired) && hasPrefix(resource(r), opts.Unfenced) {
				next.ServeHTTP(w, r.WithContext(ctx)) // best effort: unfenced
				return
			}
			if err == nil {
				res := resource(r)
				if err = fence.ValidateResource(res); err == nil {
					if err = keys.Check(ctx, res, token); err == nil {
						err = f.Claim(ctx, res, token)
					}
				}
			}
			if err != nil {
				writeProblem(w, err, "")
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, tokenKey{}, token)))
		})
	}
}

// hasPrefix reports whether s starts with one of prefixes.
func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

type tokenKey struct{}

// TokenFrom returns the fencing token that RequireFence accepted for the
// request of ctx, and whether there is one.
func TokenFrom(ctx context.Context) (fence.Token, bool) {
	t, ok := ctx.Value(tokenKey{}).(fence.Token)
	return t, ok
}

// StoreFencer adapts a fence.Store (fence's own storage, or a Client of a
// fence server) to fence.Fencer, so that RequireFence can claim there.
func StoreFencer(s fence.Store) fence.Fencer { return storeFencer{s} }

type storeFencer struct{ s fence.Store }

func (f storeFencer) Claim(ctx context.Context, resource string, token fence.Token) error {
	if _, err := f.s.Claim(ctx, resource, token); err != nil {
		return fmt.Errorf("httpapi: claim %q: %w", resource, err)
	}
	return nil
}
