package client

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/wire"
)

// The listings: GET /v1/locks and GET /v1/fences, a page at a time.

// Fences returns a page of the resources for which a token was issued or a
// fence raised, held now or not, with their last token and last fence,
// from GET /v1/fences: those whose names start with prefix, after after
// (byte order), at most limit (0: the server's default, 100), and the after
// of the next page ("" if this is the last). With auth, only the resources
// the client may read are listed.
func (c *API) Fences(ctx context.Context, prefix, after string, limit int) ([]fence.FenceStatus, string, error) {
	req := send(wire.OpListFences, "", "", request{retryable: true})
	req.path += pageQuery(prefix, after, limit)
	var fr wire.FenceListResponse
	if err := c.doJSON(ctx, req, &fr); err != nil {
		return nil, "", err
	}
	fences := make([]fence.FenceStatus, 0, len(fr.Fences))
	for _, f := range fr.Fences {
		fences = append(fences, fence.FenceStatus{Resource: f.Resource, LastToken: f.LastToken, LastFence: f.LastFence})
	}
	return fences, fr.Next, nil
}

// pageQuery is the query of a listing's page, "" or "?...".
func pageQuery(prefix, after string, limit int) string {
	q := url.Values{}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if after != "" {
		q.Set("after", after)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// List returns a page of the locks held now whose resource names start
// with prefix, after after (byte order), at most limit (0: the server's
// default, 100), from GET /v1/locks, and the after of the next page ("" if
// this is the last). Each lock has Waiters set, and no LastToken. With auth,
// only the locks the client may read are listed.
func (c *API) List(ctx context.Context, prefix, after string, limit int) ([]fence.LockStatus, string, error) {
	req := send(wire.OpListLocks, "", "", request{retryable: true})
	req.path += pageQuery(prefix, after, limit)
	var lr wire.ListResponse
	if err := c.doJSON(ctx, req, &lr); err != nil {
		return nil, "", err
	}
	locks := make([]fence.LockStatus, 0, len(lr.Locks))
	for _, l := range lr.Locks {
		exp, err := time.Parse(time.RFC3339Nano, l.ExpiresAt)
		if err != nil {
			return nil, "", fmt.Errorf("client: lock expires_at %q: %w", l.ExpiresAt, err)
		}
		st := fence.LockStatus{Resource: l.Resource, Held: true, Holder: l.Holder, Token: l.Token, Expires: exp, Waiters: l.Waiters,
			Session: l.Session.Decode(), Shared: l.Mode == wire.ModeShared, Holders: l.Holders}
		if l.RevokeAt != "" {
			if st.RevokeAt, err = wire.ParseTimestamp(l.RevokeAt); err != nil {
				return nil, "", fmt.Errorf("client: lock revoke_at: %w", err)
			}
		}
		locks = append(locks, st)
	}
	return locks, lr.Next, nil
}
