package client

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/wire"
)

// API is a fence.Locker and fence.Store over the v1 HTTP API: one call per
// request, with explicit tokens (Client builds self-renewing leases on it).
// It is safe
// for concurrent use. Errors from the server come back as the same typed fence
// errors the server's own Locker and Store return (wrapped in a *wire.Problem), so
// errors.Is(err, fence.ErrFenced) and errors.As(err, &fencedErr) work alike in
// process and over HTTP.
//
// An API talks to one server or to the servers of a cluster
// (NewAPI("http://a:7700,http://b:7700")). It sends every call to its
// current address and stays there while that server answers; after a
// transport error or a 503 it moves on to the next address, round robin, for
// the retry and for the calls that follow.
//
// Calls that are safe to repeat (reads, acquire — a retry by the same holder
// gets the same token —, renew, release, claim, and a put without a
// condition) are retried after a transport error or a 503 until they get
// another answer, their context ends, or RetryFor has passed since the call
// began: long enough to ride out a leader failover. The other calls (txn, a
// conditional put, delete, revoke) are resent only when the request certainly
// did not take effect: no connection could be made, so nothing was sent, or
// the server answered 503 not_leader (fence.ErrNotLeader). After any other
// transport error or 503 their outcome is unknown (see IsAmbiguous) and the
// error is returned. A TLS handshake that fails (a certificate not trusted,
// a client certificate refused) is returned at once: retrying would not help.
type API struct {
	// HTTPClient sends the requests. Default: http.DefaultClient. Deadlines
	// come from each call's context.
	HTTPClient *http.Client
	// Retries caps how many times one call is resent after its first
	// attempt. Default (from NewAPI) -1; a negative value sets no cap,
	// so that RetryFor alone bounds the retries. 0 disables retries: every
	// call is sent once (a failure still moves the client on to the next
	// address for the calls that follow).
	Retries int
	// RetryFor is how long after a call began a retry may still start; the
	// call's context can end it sooner, and an attempt under way is not cut
	// short. Default (from NewAPI) DefaultRetryFor; 0 or less disables
	// retries.
	RetryFor time.Duration
	// Backoff is the wait before a retry, doubled for each next one (with
	// jitter), at most 1 s. A retry that moves to an address that has not
	// failed in the last 2 s goes at once, without a wait and without
	// doubling the next one. Default 50 ms.
	Backoff time.Duration
	// AuthToken, if set, is sent as "Authorization: Bearer <AuthToken>"
	// with every request.
	AuthToken string

	srv   *servers    // nil unless made by NewAPI
	clock serverClock // the leader's clock, learnt from lease answers, for Fence-Deadline
}

var (
	_ fence.Locker  = (*API)(nil)
	_ fence.Revoker = (*API)(nil)
	_ fence.Store   = (*API)(nil)
)

// DefaultRetryFor is the default of API.RetryFor: longer than a leader
// failover (2-3 s) takes, with room to spare.
const DefaultRetryFor = 15 * time.Second

const (
	// maxBackoff bounds the wait between two retries.
	maxBackoff = time.Second
	// recentFailure is how long an address counts as failed: a retry that
	// moves to an address that failed longer ago goes at once. It is longer
	// than maxBackoff, so that a call that finds every address failing
	// backs off rather than spinning through them.
	recentFailure = 2 * maxBackoff
)

// NewAPI returns a client of the fence server at addrs: one base URL such
// as "http://127.0.0.1:7700", or the base URLs of the servers of one cluster
// separated by commas ("http://a:7700,http://b:7700"), tried in that order.
// Each must be http or https with a host and without a query or fragment;
// spaces around an entry are ignored; an empty entry or an address listed
// twice is an error.
func NewAPI(addrs string) (*API, error) {
	var list []string
	seen := map[string]bool{}
	for i, addr := range strings.Split(addrs, ",") {
		addr = strings.TrimSpace(addr)
		if addr == "" {
			if !strings.Contains(addrs, ",") {
				return nil, errors.New("client: no server address: want http://host:port or https://host:port")
			}
			return nil, fmt.Errorf("client: server addresses %q: entry %d is empty", addrs, i+1)
		}
		base, err := parseAddr(addr)
		if err != nil {
			return nil, err
		}
		// Scheme and host name are case-insensitive: HTTP://A and http://a
		// are one server.
		u, _ := url.Parse(base)
		key := u.Scheme + "://" + strings.ToLower(u.Host) + u.EscapedPath()
		if seen[key] {
			return nil, fmt.Errorf("client: server addresses %q: %q is listed twice", addrs, addr)
		}
		seen[key] = true
		list = append(list, base)
	}
	return &API{
		HTTPClient: http.DefaultClient,
		Retries:    -1,
		RetryFor:   DefaultRetryFor,
		Backoff:    50 * time.Millisecond,
		srv:        newServers(list),
	}, nil
}

// parseAddr checks one server address and returns it as a base URL without a
// trailing slash.
func parseAddr(addr string) (string, error) {
	u, err := url.Parse(addr)
	if err != nil {
		return "", fmt.Errorf("client: server address %q: %w", addr, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("client: server address %q: want http://host:port or https://host:port", addr)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", fmt.Errorf("client: server address %q: no query or fragment allowed", addr)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// Addr returns the servers' base URLs as NewAPI took them (without
// trailing slashes), separated by commas: with one server, its base URL.
// NewAPI(c.Addr()) makes a client of the same servers.
func (c *API) Addr() string {
	if c.srv == nil {
		return ""
	}
	return strings.Join(c.srv.addrs, ",")
}

// Addrs returns the servers' base URLs in the order NewAPI took them.
func (c *API) Addrs() []string {
	if c.srv == nil {
		return nil
	}
	return slices.Clone(c.srv.addrs)
}

// Current returns the base URL of the server the client talks to now: the
// one that answered last, or the next after one that failed.
func (c *API) Current() string {
	if c.srv == nil {
		return ""
	}
	return c.srv.addrs[c.srv.current()]
}

// servers is an API's list of server addresses and which one is current.
// A copy of an API shares it.
type servers struct {
	addrs  []string       // base URLs: scheme://host[:port][/prefix], without a trailing slash
	epoch  time.Time      // the origin of failed, on the monotonic clock
	cur    atomic.Int64   // the index in addrs of the current address
	failed []atomic.Int64 // per address: when it last failed, in ns since epoch; 0 never
}

func newServers(addrs []string) *servers {
	return &servers{addrs: addrs, epoch: time.Now(), failed: make([]atomic.Int64, len(addrs))}
}

// current returns the index of the current address.
func (s *servers) current() int { return int(s.cur.Load()) }

// fail records that the address at i failed and, if it is still the current
// one, makes the next one current. Concurrent calls that failed on the same
// address move the client on once, not once each.
func (s *servers) fail(i int) {
	s.failed[i].Store(max(1, int64(time.Since(s.epoch))))
	s.cur.CompareAndSwap(int64(i), int64((i+1)%len(s.addrs)))
}

// failedRecently reports whether the address at i failed in the last
// recentFailure.
func (s *servers) failedRecently(i int) bool {
	at := s.failed[i].Load()
	return at != 0 && time.Since(s.epoch)-time.Duration(at) < recentFailure
}

// request is one API call.
type request struct {
	method    string
	path      string
	body      []byte
	header    http.Header
	retryable bool
	stream    bool // a 2xx answer's body is left open in apiResponse.stream
}

// apiResponse is a successful answer.
type apiResponse struct {
	header http.Header
	body   []byte
	stream io.ReadCloser // for a request.stream, instead of body; the caller closes it
}

// outcome is what one attempt tells of a request.
type outcome int

const (
	answered  outcome = iota // a 2xx, or an answer that another attempt would not change
	final                    // the call's context ended, or the request could not be sent: no retry
	unsent                   // no connection could be made: the server got nothing
	notLeader                // 503 not_leader: the server did nothing
	unknown                  // another transport error or 503: the request may have taken effect
)

// failed reports whether the attempt counts against its server: the client
// moves on to the next address.
func (o outcome) failed() bool { return o == unsent || o == notLeader || o == unknown }

// retry reports whether the request may be sent again after this outcome:
// always if it certainly did not take effect, else only if it is safe to
// repeat.
func (o outcome) retry(retryable bool) bool {
	return o == unsent || o == notLeader || o == unknown && retryable
}

// do sends req, retrying and moving between servers as the API's doc
// says, and returns a 2xx answer or the error the last attempt ended with.
func (c *API) do(ctx context.Context, req request) (apiResponse, error) {
	if c.srv == nil {
		return apiResponse{}, fmt.Errorf("client: %s %s: the API was not made by NewAPI", req.method, req.path)
	}
	start := time.Now()
	backoff := min(c.Backoff, maxBackoff)
	if backoff <= 0 {
		backoff = 50 * time.Millisecond
	}
	waits := 0       // retries that waited so far
	var unsure error // the first error that left the outcome unknown
	for attempt := 0; ; attempt++ {
		i := c.srv.current()
		resp, err, out := c.once(ctx, c.srv.addrs[i], req)
		if out.failed() {
			c.srv.fail(i)
		}
		if out == unknown {
			unsure = cmp.Or(unsure, err)
		} else {
			err = maybeApplied(err, unsure)
		}
		if err == nil || !out.retry(req.retryable) || c.Retries >= 0 && attempt >= c.Retries {
			return resp, err
		}
		left := c.RetryFor - time.Since(start)
		if left <= 0 {
			return resp, err
		}
		if next := c.srv.current(); next != i && !c.srv.failedRecently(next) {
			continue // another server, which may well answer: at once
		}
		wait := backoff
		for range min(waits, 32) {
			wait = min(2*wait, maxBackoff)
		}
		waits++
		wait = wait/2 + rand.N(wait/2+1)
		t := time.NewTimer(min(wait, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return apiResponse{}, fmt.Errorf("%w (retrying after: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// maybeAppliedError is the error of a call whose last attempt failed after
// an earlier one had left the outcome unknown: the request may have taken
// effect then, whatever the last attempt says.
type maybeAppliedError struct {
	err     error // the last attempt's
	earlier error // the earlier attempt's
}

func (e *maybeAppliedError) Error() string {
	return e.err.Error() + "; an earlier attempt may have taken effect: " + e.earlier.Error()
}

func (e *maybeAppliedError) Unwrap() error { return e.err }

// maybeApplied returns err, the error of an attempt that did not leave the
// outcome unknown, as a *maybeAppliedError if an earlier attempt ended with
// unsure, an error that did.
func maybeApplied(err, unsure error) error {
	if err == nil || unsure == nil {
		return err
	}
	return &maybeAppliedError{err: err, earlier: unsure}
}

// once sends req once to the server at base and says what came of it.
func (c *API) once(ctx context.Context, base string, req request) (resp apiResponse, err error, out outcome) {
	hreq, err := http.NewRequestWithContext(ctx, req.method, base+req.path, bytes.NewReader(req.body))
	if err != nil {
		return apiResponse{}, fmt.Errorf("client: %s %s: %w", req.method, req.path, err), final
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
		err = fmt.Errorf("client: %s %s: %w", req.method, req.path, err)
		switch {
		case ctx.Err() != nil, isTLSRefusal(err):
			return apiResponse{}, err, final
		case isDialError(err):
			return apiResponse{}, err, unsent
		}
		return apiResponse{}, err, unknown
	}
	if req.stream && hresp.StatusCode/100 == 2 {
		return apiResponse{header: hresp.Header, stream: hresp.Body}, nil, answered
	}
	defer hresp.Body.Close()
	body, err := io.ReadAll(hresp.Body)
	if err != nil {
		err = fmt.Errorf("client: %s %s: reading the answer: %w", req.method, req.path, err)
		if ctx.Err() != nil {
			return apiResponse{}, err, final
		}
		return apiResponse{}, err, unknown
	}
	if hresp.StatusCode/100 != 2 {
		err := wire.ProblemError(hresp.StatusCode, body)
		switch {
		case hresp.StatusCode != http.StatusServiceUnavailable:
			return apiResponse{}, err, answered
		case errors.Is(err, fence.ErrNotLeader):
			return apiResponse{}, err, notLeader
		}
		return apiResponse{}, err, unknown
	}
	return apiResponse{header: hresp.Header, body: body}, nil, answered
}

// isDialError reports whether err, from http.Client.Do, says that no
// connection to the server could be made (refused, unreachable, no such
// host), so that the server received nothing. An error once connected (a
// reset, a timeout, an EOF) does not count: the request may have arrived.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// isTLSRefusal reports whether err is a TLS handshake that failed for good:
// this client did not trust the server's certificate, or the server sent an
// alert (it wants a client certificate, say). Retrying would not help.
func isTLSRefusal(err error) bool {
	var cv *tls.CertificateVerificationError
	var op *net.OpError
	return errors.As(err, &cv) || errors.As(err, &op) && op.Op == "remote error"
}

func (c *API) doJSON(ctx context.Context, req request, out any) error {
	resp, err := c.do(ctx, req)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp.body, out); err != nil {
		return fmt.Errorf("client: %s %s: decoding the answer: %w", req.method, req.path, err)
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

// send returns req as a request of op, on resource and key (where op's
// path has them): its method and path come from the API's route table.
func send(op *wire.Op, resource, key string, req request) request {
	req.method, req.path = op.Method, op.Path(resource, key)
	return req
}

// Keys returns the public keys that verify the server's sequencers, from
// GET /v1/keys: none if the server signs nothing. Use them to build a
// fence.KeySet.
func (c *API) Keys(ctx context.Context) ([]fence.PublicKey, error) {
	var kr wire.KeysResponse
	if err := c.doJSON(ctx, send(wire.OpGetKeys, "", "", request{retryable: true}), &kr); err != nil {
		return nil, err
	}
	return kr.Keys, nil
}

// Cluster returns what the server the client talks to now knows of its
// cluster, from GET /v1/cluster: its role, the leader, the epoch and the
// servers.
func (c *API) Cluster(ctx context.Context) (wire.ClusterStatus, error) {
	var st wire.ClusterStatus
	err := c.doJSON(ctx, send(wire.OpGetCluster, "", "", request{retryable: true}), &st)
	return st, err
}

// WithSequencer returns a copy of ctx that makes the API's storage writes
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
		h.Set(wire.SequencerHeader, s)
	}
	return h
}

// Renew implements fence.Locker.
func (c *API) Renew(ctx context.Context, resource string, token fence.Token, ttl time.Duration) (fence.Lease, error) {
	return c.renew(ctx, resource, wire.RenewRequest{Token: token, TTLMS: ttl.Milliseconds()})
}

// RenewSession implements fence.SessionRenewer.
func (c *API) RenewSession(ctx context.Context, ref fence.SessionRef, ttl time.Duration) (fence.Lease, []fence.AskedLease, error) {
	if !fence.IsSessionResource(ref.Resource) {
		return fence.Lease{}, nil, fmt.Errorf("client: renew: %w: %q is no session's resource", fence.ErrBadRequest, ref.Resource)
	}
	lr, err := c.renewWire(ctx, ref.Resource, wire.RenewRequest{Token: ref.Token, TTLMS: ttl.Milliseconds()})
	if err != nil {
		return fence.Lease{}, nil, err
	}
	l, err := lr.Decode()
	if err != nil {
		return fence.Lease{}, nil, err
	}
	asked, err := lr.DecodeAsked()
	return l, asked, err
}

// renew sends POST /v1/locks/{resource}/renew with body (ttl_ms 0 is absent).
func (c *API) renew(ctx context.Context, resource string, body wire.RenewRequest) (fence.Lease, error) {
	lr, err := c.renewWire(ctx, resource, body)
	if err != nil {
		return fence.Lease{}, err
	}
	return lr.Decode()
}

// renewWire sends a renewal, with ctx's deadline on the server's clock in
// Fence-Deadline once the client knows that clock: a server that reads it
// after the client gave up (it was paused, say) applies nothing, instead
// of holding the lease for a TTL nobody renews. A refusal of a deadline
// the client has not reached means the estimate is wrong (another server
// leads): the renewal goes again without one.
func (c *API) renewWire(ctx context.Context, resource string, body wire.RenewRequest) (wire.Lease, error) {
	var lr wire.Lease
	req := request{body: jsonBody(body), retryable: true}
	if d, ok := ctx.Deadline(); ok {
		if sd, known := c.clock.toServer(d); known {
			req.header = http.Header{wire.DeadlineHeader: {sd.UTC().Format(time.RFC3339Nano)}}
		}
	}
	sent := time.Now()
	err := c.doJSON(ctx, send(wire.OpRenewLock, resource, "", req), &lr)
	if err != nil && req.header != nil && errors.Is(err, fence.ErrBadRequest) && ctx.Err() == nil {
		c.clock.forget()
		req.header = nil
		sent = time.Now()
		err = c.doJSON(ctx, send(wire.OpRenewLock, resource, "", req), &lr)
	}
	if err == nil {
		c.clock.learn(sent, time.Now(), lr)
	}
	return lr, err
}

// Release implements fence.Locker.
func (c *API) Release(ctx context.Context, resource string, token fence.Token) error {
	return c.release(ctx, resource, wire.ReleaseRequest{Token: token})
}

// release sends POST /v1/locks/{resource}/release with body.
func (c *API) release(ctx context.Context, resource string, body wire.ReleaseRequest) error {
	return c.doJSON(ctx, send(wire.OpReleaseLock, resource, "", request{body: jsonBody(body), retryable: true}), nil)
}

// Status implements fence.Locker.
func (c *API) Status(ctx context.Context, resource string) (fence.LockStatus, error) {
	var lr wire.LockStatus
	if err := c.doJSON(ctx, send(wire.OpGetLock, resource, "", request{retryable: true}), &lr); err != nil {
		return fence.LockStatus{}, err
	}
	st := fence.LockStatus{Resource: lr.Resource, Held: lr.Held, Holder: lr.Holder, Token: lr.Token, LastToken: lr.LastToken, Session: lr.Session.Decode(),
		Shared: lr.Mode == wire.ModeShared, Holders: lr.Holders}
	if lr.Held {
		exp, err := time.Parse(time.RFC3339Nano, lr.ExpiresAt)
		if err != nil {
			return fence.LockStatus{}, fmt.Errorf("client: lock expires_at %q: %w", lr.ExpiresAt, err)
		}
		st.Expires = exp
		if lr.RevokeAt != "" {
			if st.RevokeAt, err = wire.ParseTimestamp(lr.RevokeAt); err != nil {
				return fence.LockStatus{}, fmt.Errorf("client: lock revoke_at: %w", err)
			}
		}
	}
	return st, nil
}

var _ fence.Transferer = (*API)(nil)

// Transfer implements fence.Transferer: POST /v1/locks/{resource}/transfer.
// It is sent once: resent after a transfer that took effect, it would be
// answered lease_lost, so a transport error leaves the outcome unknown.
// The lease it returns is the successor's, without its TTL and sequencer.
func (c *API) Transfer(ctx context.Context, resource string, token fence.Token, to string) (fence.Lease, error) {
	body := jsonBody(struct {
		Token fence.Token `json:"token"`
		To    string      `json:"to,omitempty"`
	}{token, to})
	var tr wire.TransferResponse
	if err := c.doJSON(ctx, send(wire.OpTransferLock, resource, "", request{body: body}), &tr); err != nil {
		return fence.Lease{}, err
	}
	exp, err := time.Parse(time.RFC3339Nano, tr.ExpiresAt)
	if err != nil {
		return fence.Lease{}, fmt.Errorf("client: transfer expires_at %q: %w", tr.ExpiresAt, err)
	}
	return fence.Lease{Resource: tr.Resource, Holder: tr.Holder, Token: tr.Token, Expires: exp}, nil
}

// wire.RevokeResponse is the body of a revoke's answer.

// Revoke implements fence.Revoker with POST /v1/locks/{resource}/revoke. It
// is sent once: a repeated revoke would issue another token, so a transport
// error leaves the outcome unknown.
func (c *API) Revoke(ctx context.Context, resource string) (fence.RevokeResult, error) {
	var ra wire.RevokeResponse
	if err := c.doJSON(ctx, send(wire.OpRevokeLock, resource, "", request{body: []byte("{}")}), &ra); err != nil {
		return fence.RevokeResult{}, err
	}
	return fence.RevokeResult{Resource: ra.Resource, Revoked: ra.RevokedToken, LastFence: ra.LastFence}, nil
}

var _ fence.RevokeRequester = (*API)(nil)

// RequestRevoke implements fence.RevokeRequester with POST
// /v1/locks/{resource}/revoke and grace_ms. It is sent once, as Revoke is.
func (c *API) RequestRevoke(ctx context.Context, resource string, grace time.Duration) (fence.Lease, fence.RevokeResult, error) {
	var ans struct { // a 202's members (wire.RevokeAsked), or a 200's (wire.RevokeResponse)
		Holder       string      `json:"holder"`
		Token        fence.Token `json:"token"`
		RevokeAt     string      `json:"revoke_at"`
		Mode         string      `json:"mode"`
		RevokedToken fence.Token `json:"revoked_token"`
		LastFence    fence.Token `json:"last_fence"`
	}
	body := jsonBody(wire.RevokeRequest{GraceMS: grace.Milliseconds()})
	if err := c.doJSON(ctx, send(wire.OpRevokeLock, resource, "", request{body: body}), &ans); err != nil {
		return fence.Lease{}, fence.RevokeResult{}, err
	}
	if ans.RevokeAt == "" {
		return fence.Lease{}, fence.RevokeResult{Resource: resource, Revoked: ans.RevokedToken, LastFence: ans.LastFence}, nil
	}
	at, err := wire.ParseTimestamp(ans.RevokeAt)
	if err != nil {
		return fence.Lease{}, fence.RevokeResult{}, fmt.Errorf("client: revoke_at: %w", err)
	}
	return fence.Lease{Resource: resource, Holder: ans.Holder, Token: ans.Token, RevokeAt: at, RevokeGrace: grace,
		Shared: ans.Mode == wire.ModeShared}, fence.RevokeResult{}, nil
}

// condHeader returns the Fencing-Token and condition headers of a write.
func condHeader(token fence.Token, cond fence.Cond) http.Header {
	h := http.Header{}
	if token != 0 { // 0: an unfenced write, without the header
		h.Set(wire.TokenHeader, strconv.FormatUint(uint64(token), 10))
	}
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
func (c *API) Put(ctx context.Context, resource, key string, value []byte, token fence.Token, cond fence.Cond) (fence.WriteResult, error) {
	h := withSequencer(ctx, condHeader(token, cond))
	h.Set("Content-Type", "application/octet-stream")
	var pr wire.PutResponse
	req := send(wire.OpPutValue, resource, key, request{body: value, header: h, retryable: cond == fence.Cond{}})
	if req.body == nil {
		req.body = []byte{}
	}
	if err := c.doJSON(ctx, req, &pr); err != nil {
		return fence.WriteResult{}, err
	}
	return fence.WriteResult{Rev: pr.Revision, LastFence: pr.Fence}, nil
}

var _ fence.UnfencedStore = (*API)(nil)

// PutUnfenced implements fence.UnfencedStore: a write without a token, which
// the server accepts only for its best-effort resources (fence serve
// --unfenced); elsewhere it is fence_required.
func (c *API) PutUnfenced(ctx context.Context, resource, key string, value []byte, cond fence.Cond) (fence.WriteResult, error) {
	return c.Put(ctx, resource, key, value, 0, cond)
}

// DeleteUnfenced implements fence.UnfencedStore, as PutUnfenced.
func (c *API) DeleteUnfenced(ctx context.Context, resource, key string, cond fence.Cond) (fence.WriteResult, error) {
	return c.Delete(ctx, resource, key, 0, cond)
}

// Delete implements fence.Store.
func (c *API) Delete(ctx context.Context, resource, key string, token fence.Token, cond fence.Cond) (fence.WriteResult, error) {
	var dr wire.DeleteResponse
	if err := c.doJSON(ctx, send(wire.OpDeleteValue, resource, key, request{header: withSequencer(ctx, condHeader(token, cond))}), &dr); err != nil {
		return fence.WriteResult{}, err
	}
	return fence.WriteResult{Rev: dr.Revision, LastFence: token}, nil
}

// Get implements fence.Store.
func (c *API) Get(ctx context.Context, resource, key string) (fence.Item, error) {
	resp, err := c.do(ctx, send(wire.OpGetValue, resource, key, request{retryable: true}))
	if err != nil {
		return fence.Item{}, err
	}
	item := fence.Item{Resource: resource, Key: key, Value: resp.body}
	rev, err := strconv.ParseUint(strings.Trim(resp.header.Get("ETag"), `"`), 10, 64)
	if err != nil {
		return fence.Item{}, fmt.Errorf("client: GET %s: ETag %q: %w", wire.OpGetValue.Path(resource, key), resp.header.Get("ETag"), err)
	}
	item.Rev = fence.Rev(rev)
	if item.Token, err = fence.ParseToken(resp.header.Get("Fencing-Token")); err != nil {
		return fence.Item{}, fmt.Errorf("client: GET %s: %w", wire.OpGetValue.Path(resource, key), err)
	}
	return item, nil
}

// Fence implements fence.Store.
func (c *API) Fence(ctx context.Context, resource string) (fence.Token, error) {
	var fr wire.FenceResponse
	err := c.doJSON(ctx, send(wire.OpGetFence, resource, "", request{retryable: true}), &fr)
	return fr.LastFence, err
}

// Claim implements fence.Store.
func (c *API) Claim(ctx context.Context, resource string, token fence.Token) (fence.WriteResult, error) {
	var fr wire.FenceResponse
	req := send(wire.OpClaimFence, resource, "", request{header: withSequencer(ctx, condHeader(token, fence.Cond{})), retryable: true})
	if err := c.doJSON(ctx, req, &fr); err != nil {
		return fence.WriteResult{}, err
	}
	return fence.WriteResult{LastFence: fr.LastFence}, nil
}

// Txn implements fence.Store. Values are sent as value_base64.
func (c *API) Txn(ctx context.Context, t *fence.Txn) (fence.Rev, error) {
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
	var tr wire.TxnResponse
	if err := c.doJSON(ctx, send(wire.OpTxn, "", "", request{body: jsonBody(body), header: withSequencer(ctx, http.Header{})}), &tr); err != nil {
		return 0, err
	}
	return tr.Revision, nil
}

// IsAmbiguous reports whether err leaves the outcome of a call unknown: the
// request may or may not have taken effect (a transport error or timeout once
// connected, or a 5xx), as opposed to an answer from the server. A call
// whose every attempt certainly did nothing is not ambiguous: it could not
// connect, or it was answered 503 not_leader (fence.ErrNotLeader).
func IsAmbiguous(err error) bool {
	if err == nil {
		return false
	}
	if m := (*maybeAppliedError)(nil); errors.As(err, &m) {
		return true
	}
	var p *wire.Problem
	if errors.As(err, &p) {
		return p.Status >= 500 && !errors.Is(p, fence.ErrNotLeader)
	}
	return !isDialError(err)
}
