package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fence-lock/fence"
)

// Client is a fence.Locker and fence.Store over the v1 HTTP API. It is safe
// for concurrent use. Errors from the server come back as the same typed fence
// errors the server's own Locker and Store return (wrapped in a *Problem), so
// errors.Is(err, fence.ErrFenced) and errors.As(err, &fencedErr) work alike in
// process and over HTTP.
//
// Calls that are safe to repeat (reads, acquire — a retry by the same holder
// gets the same token —, renew, release, claim, and a put without a
// condition) are retried with backoff after a transport error or a 503; other
// calls are sent once, and a transport error leaves their outcome unknown.
type Client struct {
	// HTTPClient sends the requests. Default: http.DefaultClient. Deadlines
	// come from each call's context.
	HTTPClient *http.Client
	// Retries is how many times a call that is safe to repeat is retried.
	// Default 3; 0 after NewClient disables retries.
	Retries int
	// Backoff is the wait before the first retry, doubled for each next one
	// (with jitter), at most 1 s. Default 50 ms.
	Backoff time.Duration
	// AuthToken, if set, is sent as "Authorization: Bearer <AuthToken>"
	// with every request.
	AuthToken string

	base string // scheme://host[:port][/prefix], without a trailing slash
}

var (
	_ fence.Locker  = (*Client)(nil)
	_ fence.Revoker = (*Client)(nil)
	_ fence.Store   = (*Client)(nil)
)

// NewClient returns a client of the fence server at addr, a base URL such as
// "http://127.0.0.1:7700".
func NewClient(addr string) (*Client, error) {
	u, err := url.Parse(addr)
	if err != nil {
		return nil, fmt.Errorf("httpapi: server address %q: %w", addr, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("httpapi: server address %q: want http://host:port or https://host:port", addr)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("httpapi: server address %q: no query or fragment allowed", addr)
	}
	return &Client{
		HTTPClient: http.DefaultClient,
		Retries:    3,
		Backoff:    50 * time.Millisecond,
		base:       strings.TrimSuffix(u.String(), "/"),
	}, nil
}

// Addr returns the server's base URL.
func (c *Client) Addr() string { return c.base }

// request is one API call.
type request struct {
	method    string
	path      string
	body      []byte
	header    http.Header
	retryable bool
}

// apiResponse is a successful answer.
type apiResponse struct {
	header http.Header
	body   []byte
}

// do sends req, retrying as the Client's doc says, and returns a 2xx answer
// or the error the answer stands for.
func (c *Client) do(ctx context.Context, req request) (apiResponse, error) {
	backoff := cmp.Or(c.Backoff, 50*time.Millisecond)
	for attempt := 0; ; attempt++ {
		resp, err, retry := c.once(ctx, req)
		if err == nil || !req.retryable || !retry || attempt >= c.Retries {
			return resp, err
		}
		wait := backoff << attempt
		wait = min(wait, time.Second)
		wait = wait/2 + rand.N(wait/2+1)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return apiResponse{}, fmt.Errorf("%w (retrying after: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// once sends req once. retry reports whether a failure may go away on its own.
func (c *Client) once(ctx context.Context, req request) (resp apiResponse, err error, retry bool) {
	hreq, err := http.NewRequestWithContext(ctx, req.method, c.base+req.path, bytes.NewReader(req.body))
	if err != nil {
		return apiResponse{}, fmt.Errorf("httpapi: %s %s: %w", req.method, req.path, err), false
	}
	for k, v := range req.header {
		hreq.Header[k] = v
	}
	if c.AuthToken != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.AuthToken)
	}
	if req.body != nil && hreq.Header.Get("Content-Type") == "" {
		hreq.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	hresp, err := hc.Do(hreq)
	if err != nil {
		return apiResponse{}, fmt.Errorf("httpapi: %s %s: %w", req.method, req.path, err), ctx.Err() == nil
	}
	defer hresp.Body.Close()
	body, err := io.ReadAll(hresp.Body)
	if err != nil {
		return apiResponse{}, fmt.Errorf("httpapi: %s %s: reading the answer: %w", req.method, req.path, err), ctx.Err() == nil
	}
	if hresp.StatusCode/100 != 2 {
		return apiResponse{}, ProblemError(hresp.StatusCode, body), hresp.StatusCode == http.StatusServiceUnavailable
	}
	return apiResponse{header: hresp.Header, body: body}, nil, false
}

func (c *Client) doJSON(ctx context.Context, req request, out any) error {
	resp, err := c.do(ctx, req)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp.body, out); err != nil {
		return fmt.Errorf("httpapi: %s %s: decoding the answer: %w", req.method, req.path, err)
	}
	return nil
}

func jsonBody(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own request types are marshalled
	}
	return b
}

// lockPath returns /v1/locks/{resource}{suffix}, the resource as one escaped segment.
func lockPath(resource, suffix string) string {
	return "/v1/locks/" + url.PathEscape(resource) + suffix
}

// kvPath returns /v1/kv/{resource}/{key}, each key segment escaped.
func kvPath(resource, key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "/v1/kv/" + url.PathEscape(resource) + "/" + strings.Join(segs, "/")
}

func (l leaseResponse) lease() (fence.Lease, error) {
	exp, err := time.Parse(time.RFC3339Nano, l.ExpiresAt)
	if err != nil {
		return fence.Lease{}, fmt.Errorf("httpapi: lease expires_at %q: %w", l.ExpiresAt, err)
	}
	return fence.Lease{Resource: l.Resource, Holder: l.Holder, Token: l.Token,
		TTL: time.Duration(l.TTLMS) * time.Millisecond, Expires: exp, Sequencer: l.Sequencer}, nil
}

// Keys returns the public keys that verify the server's sequencers, from
// GET /v1/keys: none if the server signs nothing. Use them to build a
// fence.KeySet.
func (c *Client) Keys(ctx context.Context) ([]fence.PublicKey, error) {
	var kr keysResponse
	if err := c.doJSON(ctx, request{method: "GET", path: "/v1/keys", retryable: true}, &kr); err != nil {
		return nil, err
	}
	return kr.Keys, nil
}

// SequencerHeader is the request header that carries a lease's sequencer
// (fence.Lease.Sequencer) next to Fencing-Token.
const SequencerHeader = "Fence-Sequencer"

// WithSequencer returns a copy of ctx that makes the Client's storage writes
// (Put, Delete, Claim, Txn) send sequencer in the Fence-Sequencer header; ""
// sends none. The fence server does not check the header yet: guards and
// middleware that hold the server's public keys (GET /v1/keys) verify it.
// client.Lease sets it on every write. It is fence.WithSequencer, so a guard
// with Keys set verifies the same sequencer.
func WithSequencer(ctx context.Context, sequencer string) context.Context {
	return fence.WithSequencer(ctx, sequencer)
}

// SequencerFrom returns the sequencer set by WithSequencer (or
// fence.WithSequencer), "" if none.
func SequencerFrom(ctx context.Context) string {
	s, _ := fence.SequencerFrom(ctx)
	return s
}

// withSequencer adds the Fence-Sequencer header of ctx to h, a write's
// headers, and returns h.
func withSequencer(ctx context.Context, h http.Header) http.Header {
	if s := SequencerFrom(ctx); s != "" {
		h.Set(SequencerHeader, s)
	}
	return h
}

// Acquire implements fence.Locker. ttl is rounded to whole milliseconds.
func (c *Client) Acquire(ctx context.Context, resource, holder string, ttl, wait time.Duration) (fence.Lease, error) {
	body := jsonBody(struct {
		Holder string `json:"holder"`
		TTLMS  int64  `json:"ttl_ms"`
		WaitMS int64  `json:"wait_ms"`
	}{holder, ttl.Milliseconds(), wait.Milliseconds()})
	var lr leaseResponse
	if err := c.doJSON(ctx, request{method: "POST", path: lockPath(resource, "/acquire"), body: body, retryable: true}, &lr); err != nil {
		return fence.Lease{}, err
	}
	return lr.lease()
}

// Renew implements fence.Locker.
func (c *Client) Renew(ctx context.Context, resource string, token fence.Token, ttl time.Duration) (fence.Lease, error) {
	var body []byte
	if ttl == 0 {
		body = jsonBody(struct {
			Token fence.Token `json:"token"`
		}{token})
	} else {
		body = jsonBody(struct {
			Token fence.Token `json:"token"`
			TTLMS int64       `json:"ttl_ms"`
		}{token, ttl.Milliseconds()})
	}
	var lr leaseResponse
	if err := c.doJSON(ctx, request{method: "POST", path: lockPath(resource, "/renew"), body: body, retryable: true}, &lr); err != nil {
		return fence.Lease{}, err
	}
	return lr.lease()
}

// Release implements fence.Locker.
func (c *Client) Release(ctx context.Context, resource string, token fence.Token) error {
	body := jsonBody(struct {
		Token fence.Token `json:"token"`
	}{token})
	return c.doJSON(ctx, request{method: "POST", path: lockPath(resource, "/release"), body: body, retryable: true}, nil)
}

// Status implements fence.Locker.
func (c *Client) Status(ctx context.Context, resource string) (fence.LockStatus, error) {
	var lr lockResponse
	if err := c.doJSON(ctx, request{method: "GET", path: lockPath(resource, ""), retryable: true}, &lr); err != nil {
		return fence.LockStatus{}, err
	}
	st := fence.LockStatus{Resource: lr.Resource, Held: lr.Held, Holder: lr.Holder, Token: lr.Token, LastToken: lr.LastToken}
	if lr.Held {
		exp, err := time.Parse(time.RFC3339Nano, lr.ExpiresAt)
		if err != nil {
			return fence.LockStatus{}, fmt.Errorf("httpapi: lock expires_at %q: %w", lr.ExpiresAt, err)
		}
		st.Expires = exp
	}
	return st, nil
}

// revokeAnswer is the body of a revoke's answer.
type revokeAnswer struct {
	Resource     string      `json:"resource"`
	RevokedToken fence.Token `json:"revoked_token"`
	LastFence    fence.Token `json:"last_fence"`
}

// Revoke implements fence.Revoker with POST /v1/locks/{resource}/revoke. It
// is sent once: a repeated revoke would issue another token, so a transport
// error leaves the outcome unknown.
func (c *Client) Revoke(ctx context.Context, resource string) (fence.RevokeResult, error) {
	var ra revokeAnswer
	if err := c.doJSON(ctx, request{method: "POST", path: lockPath(resource, "/revoke"), body: []byte("{}")}, &ra); err != nil {
		return fence.RevokeResult{}, err
	}
	return fence.RevokeResult{Resource: ra.Resource, Revoked: ra.RevokedToken, LastFence: ra.LastFence}, nil
}

// condHeader returns the Fencing-Token and condition headers of a write.
func condHeader(token fence.Token, cond fence.Cond) http.Header {
	h := http.Header{"Fencing-Token": {strconv.FormatUint(uint64(token), 10)}}
	switch {
	case cond.IfMatch != 0:
		h.Set("If-Match", strconv.Quote(strconv.FormatUint(uint64(cond.IfMatch), 10)))
	case cond.IfExists:
		h.Set("If-Match", "*")
	}
	if cond.IfAbsent {
		h.Set("If-None-Match", "*")
	}
	return h
}

// Put implements fence.Store.
func (c *Client) Put(ctx context.Context, resource, key string, value []byte, token fence.Token, cond fence.Cond) (fence.WriteResult, error) {
	h := withSequencer(ctx, condHeader(token, cond))
	h.Set("Content-Type", "application/octet-stream")
	var pr putResponse
	req := request{method: "PUT", path: kvPath(resource, key), body: value, header: h, retryable: cond == fence.Cond{}}
	if req.body == nil {
		req.body = []byte{}
	}
	if err := c.doJSON(ctx, req, &pr); err != nil {
		return fence.WriteResult{}, err
	}
	return fence.WriteResult{Rev: pr.Revision, LastFence: pr.Fence}, nil
}

// Delete implements fence.Store.
func (c *Client) Delete(ctx context.Context, resource, key string, token fence.Token, cond fence.Cond) (fence.WriteResult, error) {
	var dr deleteResponse
	if err := c.doJSON(ctx, request{method: "DELETE", path: kvPath(resource, key), header: withSequencer(ctx, condHeader(token, cond))}, &dr); err != nil {
		return fence.WriteResult{}, err
	}
	return fence.WriteResult{Rev: dr.Revision, LastFence: token}, nil
}

// Get implements fence.Store.
func (c *Client) Get(ctx context.Context, resource, key string) (fence.Item, error) {
	resp, err := c.do(ctx, request{method: "GET", path: kvPath(resource, key), retryable: true})
	if err != nil {
		return fence.Item{}, err
	}
	item := fence.Item{Resource: resource, Key: key, Value: resp.body}
	rev, err := strconv.ParseUint(strings.Trim(resp.header.Get("ETag"), `"`), 10, 64)
	if err != nil {
		return fence.Item{}, fmt.Errorf("httpapi: GET %s: ETag %q: %w", kvPath(resource, key), resp.header.Get("ETag"), err)
	}
	item.Rev = fence.Rev(rev)
	if item.Token, err = fence.ParseToken(resp.header.Get("Fencing-Token")); err != nil {
		return fence.Item{}, fmt.Errorf("httpapi: GET %s: %w", kvPath(resource, key), err)
	}
	return item, nil
}

// Fence implements fence.Store.
func (c *Client) Fence(ctx context.Context, resource string) (fence.Token, error) {
	var fr fenceResponse
	err := c.doJSON(ctx, request{method: "GET", path: "/v1/fences/" + url.PathEscape(resource), retryable: true}, &fr)
	return fr.LastFence, err
}

// Claim implements fence.Store.
func (c *Client) Claim(ctx context.Context, resource string, token fence.Token) (fence.WriteResult, error) {
	var fr fenceResponse
	req := request{method: "POST", path: "/v1/fences/" + url.PathEscape(resource), header: withSequencer(ctx, condHeader(token, fence.Cond{})), retryable: true}
	if err := c.doJSON(ctx, req, &fr); err != nil {
		return fence.WriteResult{}, err
	}
	return fence.WriteResult{LastFence: fr.LastFence}, nil
}

// Txn implements fence.Store. Values are sent as value_base64.
func (c *Client) Txn(ctx context.Context, t *fence.Txn) (fence.Rev, error) {
	type compare struct {
		Resource string    `json:"resource"`
		Key      string    `json:"key"`
		Revision fence.Rev `json:"revision"`
	}
	type op struct {
		Op          string  `json:"op"`
		Resource    string  `json:"resource"`
		Key         string  `json:"key"`
		ValueBase64 *string `json:"value_base64,omitempty"`
	}
	body := struct {
		Fences map[string]fence.Token `json:"fences"`
		If     []compare              `json:"if"`
		Then   []op                   `json:"then"`
	}{Fences: t.Fences, If: []compare{}, Then: []op{}}
	if body.Fences == nil {
		body.Fences = map[string]fence.Token{}
	}
	for _, cmpr := range t.If {
		body.If = append(body.If, compare{cmpr.Resource, cmpr.Key, cmpr.Rev})
	}
	for _, o := range t.Then {
		w := op{Op: string(o.Kind), Resource: o.Resource, Key: o.Key}
		if o.Kind == fence.OpPut {
			v := base64.StdEncoding.EncodeToString(o.Value)
			w.ValueBase64 = &v
		}
		body.Then = append(body.Then, w)
	}
	var tr txnResponse
	if err := c.doJSON(ctx, request{method: "POST", path: "/v1/txn", body: jsonBody(body), header: withSequencer(ctx, http.Header{})}, &tr); err != nil {
		return 0, err
	}
	return tr.Revision, nil
}

// IsAmbiguous reports whether err leaves the outcome of a call unknown: the
// request may or may not have taken effect (a transport error or timeout, or
// a 5xx), as opposed to an answer from the server.
func IsAmbiguous(err error) bool {
	if err == nil {
		return false
	}
	var p *Problem
	if errors.As(err, &p) {
		return p.Status >= 500
	}
	return true
}
