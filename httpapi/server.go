package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/support/logline"
	"github.com/fence-lock/fence/watch"
	"github.com/fence-lock/fence/wire"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Handler serves the fence v1 HTTP API over a fence.Locker and a fence.Store.
// It is an http.Handler; build it with NewHandler and set its fields before
// it serves. It is safe for concurrent use.
//
// A long-polling acquire extends its own connection's write deadline, so an
// http.Server's WriteTimeout (30 s, say) does not cut waits of up to
// fence.MaxWait short.
type Handler struct {
	// Logger receives one line per accepted storage write ("write accepted",
	// Info) and per rejected request ("request rejected", Warn; Error for
	// internal errors, with the cause). NewHandler sets slog.Default(); nil
	// means slog.Default() too. Those lines carry no source location (see
	// internal/support/logline).
	Logger *slog.Logger

	// Ready reports whether the server can serve requests: GET /readyz
	// answers 503 not_ready with its error. Nil, the default, means always
	// ready.
	Ready func() error

	// Keys are the public keys that verify the sequencers of this server's
	// leases, served by GET /v1/keys (an empty list if none). During a key
	// rotation it lists the old key and the new. The server does not check
	// the Fence-Sequencer header of requests: guards and middleware that
	// hold these keys do.
	Keys []fence.PublicKey

	// Authenticate, if non-nil, turns authorisation on: it says who sent
	// a request (a Caller), or returns an error wrapping
	// fence.ErrUnauthorized (401: no or unknown credentials). It is called
	// once per request of every route that needs credentials, before the
	// request's body is read; the caller's grants then decide (403
	// forbidden otherwise) with the permission that the operation's row of
	// wire.Routes names (docs/API.md, Authentication, lists them): "lock"
	// for leases, "read" to read, "write" for storage writes, "admin" to
	// revoke and, with ProtectMetrics, for GET /metrics. Where the row
	// lets any caller in (the cluster, the dashboard's files, a listing, a
	// watch stream), valid credentials suffice: a listing and a watch
	// stream show only the locks whose resource the caller may read.
	// POST /v1/txn needs "write" on every resource of its fences and ops
	// and "read" on every resource of its compares, checked once the body
	// is decoded. /healthz, /readyz, /v1/keys and /v1/openapi.json are
	// always open. A lease belongs to the caller that took it: the Locker
	// is called with the caller's name as fence.WithOwner, so another
	// caller's acquire of the same holder, renew or release is forbidden.
	// Nil, the default, means no authorisation.
	Authenticate func(r *http.Request) (Caller, error)

	// ProtectMetrics makes GET /metrics need the "admin" permission on
	// resource "" from Auth (so a grant on "*"). It has no effect if Auth
	// is nil.
	ProtectMetrics bool

	// RateLimit, if positive, is the requests per second each client may
	// send, with bursts of RateBurst (at least 1); a request over it is
	// answered 429 rate_limited with Retry-After, and counted in
	// fence_http_rate_limited_total. A client is its Caller, once
	// authenticated, else its source address (an IPv4 address or an IPv6
	// /64): a request that fails authentication counts against its
	// address. At most 65,536 addresses are tracked; past that, new ones
	// share one bucket (callers are all tracked: the auth file bounds
	// them). /healthz and /readyz are exempt. Zero, the default, means no
	// limit. Set it before the server serves.
	RateLimit rate.Limit
	RateBurst int

	// WaitersPerClient and Waiters cap the acquires that wait (wait_ms >
	// 0) at once: per client, counted as RateLimit counts them, and in
	// all. An acquire past either cap does not wait: it is granted if the
	// lock is free, else answered 409 lock_held at once (with Retry-After,
	// as ever), and counted in fence_http_waits_refused_total. Together
	// with the lock service's cap per resource, they bound what waiting
	// acquires hold however they are spread over resources. A standby
	// forwards its clients' requests from its own address: without
	// Authenticate, they count as one client here. Zero means no cap.
	WaitersPerClient, Waiters int

	// WatchersPerClient and Watchers cap the watch streams (GET
	// /v1/watch) open at once: per client, counted as RateLimit counts
	// them, and in all. A stream past either cap is answered 429
	// rate_limited with Retry-After 1 s, and counted in
	// fence_http_watches_refused_total. Forwarded requests without
	// credentials count against the total only. Zero means no cap.
	WatchersPerClient, Watchers int

	// Cluster, if not nil, answers GET /v1/cluster: this server's role, the
	// leader, the writer epoch and the servers. Nil, the default, answers
	// as a server on its own: role "leader", epoch 1.
	Cluster func(ctx context.Context) (wire.ClusterStatus, error)

	// Forward, if not nil, serves every request of a route that is not
	// answered locally (/healthz, /readyz, /metrics, /v1/keys, /v1/cluster
	// are), after the path and method are checked: a standby forwards them
	// to the leader. It does its own authorisation and rate limiting (the
	// leader's). Nil, the default, serves them here.
	Forward http.Handler

	// Events, if not nil, is the hub that GET /v1/watch streams from; the
	// server publishes a write_rejected event into it for every storage
	// write rejected as fenced. The lock service publishes the rest. Nil,
	// the default, answers GET /v1/watch 404.
	Events *watch.Hub

	// Unfenced are the prefixes of best-effort resources: a PUT or DELETE of
	// their keys without a Fencing-Token is accepted without fencing (the
	// fence is neither checked nor raised), logged as "write accepted" with
	// unfenced=true and counted in fence_storage_writes_total{op} like any
	// other; a write with a token is checked as anywhere else. Claims and
	// txns always need tokens. Nil, the default: every write needs one.
	// Set it before the server serves.
	Unfenced []string

	// Gatherer is what GET /metrics serves. Nil, the default, is
	// prometheus.DefaultGatherer. The package registers its metrics
	// nowhere (see Metrics): register them where Gatherer gathers.
	Gatherer prometheus.Gatherer

	limiters   limiters
	waiting    slots // acquires waiting, against WaitersPerClient and Waiters
	watching   slots // watch streams, against WatchersPerClient and Watchers
	logSampler logSampler
	locker     fence.Locker
	store      fence.Store
}

// NewHandler returns a Handler that answers lock requests with locker and
// storage requests with store. Both must be non-nil, unless Forward is set.
func NewHandler(locker fence.Locker, store fence.Store) *Handler {
	return &Handler{
		Logger: slog.Default(),
		locker: locker,
		store:  store,
	}
}

func (s *Handler) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}

// call is one request being served, with what is known of it for the log.
type call struct {
	s     *Handler
	w     *recorder
	r     *http.Request
	route *route // nil if the path matched no route

	caller Caller // who sent the request; nil without Authenticate or before it

	body      []byte // read before the handler is called (see handler)
	resource  string
	key       string
	rawKey    string // the path's {key} or {file} as sent, still escaped
	holder    string
	presented fence.Token
	unfenced  bool // a write of a best-effort resource without a token
}

// ServeHTTP implements http.Handler. It routes on r.URL.EscapedPath(), so
// that a percent-encoded '/' stays inside its segment, and answers every
// error as a problem.
func (s *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	c := &call{s: s, w: &recorder{ResponseWriter: w}, r: r}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p) // net/http's way to abort a response; it logs nothing
			}
			s.logger().LogAttrs(r.Context(), slog.LevelError, "panic serving request",
				slog.String("method", r.Method), slog.String("path", r.URL.EscapedPath()),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			if c.w.status == 0 {
				c.fail(fmt.Errorf("%w: panic: %v", wire.ErrInternal, p))
			}
		}
		requestDuration.WithLabelValues(c.routeLabel(), methodLabel(r.Method), strconv.Itoa(cmp.Or(c.w.status, http.StatusOK))).
			Observe(time.Since(start).Seconds())
	}()

	m, ok := matchPath(r.URL.EscapedPath())
	if !ok {
		c.fail(fmt.Errorf("%w: no route for %q", fence.ErrNotFound, r.URL.EscapedPath()))
		return
	}
	c.route = m.route
	if !m.route.allows(r.Method) {
		c.fail(fmt.Errorf("%w: %s %s; allowed: %s", wire.ErrMethodNotAllowed, r.Method, m.route.Pattern, m.route.allow))
		return
	}
	if err := s.refuseCrossSite(r); err != nil {
		c.fail(err)
		return
	}
	if s.Forward != nil && !m.route.Local {
		s.Forward.ServeHTTP(c.w, r.WithContext(withOp(r.Context(), m.route.by[r.Method].Op)))
		return
	}
	if err := s.admit(c, m, start); err != nil {
		c.fail(err)
		return
	}
	h := m.route.by[r.Method].handler
	if err := c.prepare(h, m); err != nil {
		c.fail(err)
		return
	}
	if err := h.serve(s, c); err != nil {
		c.fail(err)
	}
}

// Caller is the authenticated sender of a request, as
// Handler.Authenticate finds it.
type Caller interface {
	// Name identifies the caller: the rate limit and the leases of a
	// caller are its own.
	Name() string
	// Allowed reports whether the caller has perm ("lock", "read",
	// "write" or "admin") on resource; resource "" asks for a grant on
	// every resource.
	Allowed(perm, resource string) bool
}

// admit authenticates the request, if the route needs it, charges it to its
// client's rate limit, and authorises it as the method of m's route says. A
// request that fails authentication is charged to its source address, so
// that bad credentials are rate limited too.
func (s *Handler) admit(c *call, m match, now time.Time) error {
	how := m.route.by[c.r.Method]
	var authErr error
	if s.Authenticate != nil && (how.Access != wire.Open && how.Access != wire.AdminIfProtected || how.Access == wire.AdminIfProtected && s.ProtectMetrics) {
		c.caller, authErr = s.Authenticate(c.r)
		if authErr == nil && (c.caller == nil || c.caller.Name() == "") {
			// An Authenticate that names nobody lets nobody in: a caller
			// without a name would own no lease and share its rate limit.
			authErr = fmt.Errorf("%w: no caller", fence.ErrUnauthorized)
		}
		if authErr != nil {
			c.caller = nil
		}
	}
	if !m.route.Exempt {
		if err := s.rateLimit(c, now); err != nil {
			return err
		}
	}
	if authErr != nil {
		return authErr
	}
	switch how.Access {
	case wire.OnResource:
		// A resource that does not decode is checked as sent; the handler
		// then answers bad_request to those allowed to see it.
		resource, err := url.PathUnescape(m.resource)
		if err != nil {
			resource = m.resource
		}
		return c.allowed(how.Perm, resource)
	case wire.AdminIfProtected:
		if s.ProtectMetrics {
			return c.allowed(how.Perm, "")
		}
	}
	return nil // open, or any caller: the handler filters or checks per resource
}

// allowed returns nil if the request's caller has perm on resource, or if
// there is no authorisation; else an error wrapping fence.ErrForbidden.
func (c *call) allowed(perm wire.Perm, resource string) error {
	if c.s.Authenticate == nil {
		return nil
	}
	if c.caller == nil {
		return fmt.Errorf("%w: not authenticated", fence.ErrUnauthorized)
	}
	if c.caller.Allowed(string(perm), resource) {
		return nil
	}
	if resource == "" {
		return fmt.Errorf("%w: %q has no %s permission on every resource (a grant on *)", fence.ErrForbidden, c.caller.Name(), perm)
	}
	return fmt.Errorf("%w: %q has no %s permission on %q", fence.ErrForbidden, c.caller.Name(), perm, resource)
}

// ownerContext returns the request's context with its caller as the owner
// of the leases it takes, renews and releases.
func (c *call) ownerContext() context.Context {
	if c.caller == nil {
		return c.r.Context()
	}
	return fence.WithOwner(c.r.Context(), c.caller.Name())
}

func (c *call) routeLabel() string {
	if c.route == nil {
		return unmatched
	}
	return c.route.Pattern
}

// readBody reads the request body, at most limit bytes. A body over the
// limit is too_large; when its Content-Length says so, nothing is read. The
// connection is then closed, since the rest of the body is still on it.
func (c *call) readBody(limit int64) ([]byte, error) {
	if c.r.ContentLength > limit {
		c.w.Header().Set("Connection", "close")
		return nil, fmt.Errorf("%w: body is %d bytes, more than %d", fence.ErrTooLarge, c.r.ContentLength, limit)
	}
	if c.r.Body == nil {
		return nil, nil
	}
	data, err := io.ReadAll(http.MaxBytesReader(c.w, c.r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			c.w.Header().Set("Connection", "close")
			return nil, fmt.Errorf("%w: body is more than %d bytes", fence.ErrTooLarge, limit)
		}
		return nil, badRequest("reading body: %v", err)
	}
	return data, nil
}

// fail answers err as a problem, logs the rejection (within its class's
// budget: see logSampler) and counts it.
func (c *call) fail(err error) {
	ctx := c.r.Context()
	if wire.CodeOf(err).Err == wire.ErrInternal && ctx.Err() != nil {
		// The client went away or the server is shutting down. The outcome
		// of a write cut short is unknown, which unavailable says without
		// blaming the server.
		err = fmt.Errorf("%w: request canceled: %w", fence.ErrClosed, err)
	}
	allow := ""
	if c.route != nil {
		allow = c.route.allow
	}
	if errors.Is(err, fence.ErrUnauthorized) && c.route != nil && c.route.Browser {
		// Browsers ask for a password on a Basic challenge. (The API's own
		// 401s have none: a browser would prompt for every one of the
		// page's requests; the page asks for a token itself.)
		c.w.Header().Add("WWW-Authenticate", `Basic realm="fence", charset="UTF-8"`)
	}
	p := writeProblem(c.w, err, allow)

	attrs := []slog.Attr{
		slog.String("code", p.Code),
		slog.Int("status", p.Status),
		slog.String("method", c.r.Method),
		slog.String("route", c.routeLabel()),
	}
	if res := c.resource; res != "" || p.Resource != nil {
		if p.Resource != nil {
			res = *p.Resource
		}
		attrs = append(attrs, slog.String(keyResource, res))
	}
	if c.key != "" {
		attrs = append(attrs, slog.String(keyKey, c.key))
	}
	if c.holder != "" {
		attrs = append(attrs, slog.String(keyHolder, c.holder))
	}
	if c.caller != nil {
		attrs = append(attrs, slog.String("caller", c.caller.Name()))
	}
	if presented := fence.Token(tokenOf(p.Presented)); presented != 0 || c.presented != 0 {
		attrs = append(attrs, slog.Uint64(keyPresented, uint64(cmp.Or(presented, c.presented))))
	}
	if p.LastFence != nil {
		attrs = append(attrs, slog.Uint64(keyLastFence, *p.LastFence))
	}
	if p.LastToken != nil {
		attrs = append(attrs, slog.Uint64(keyLastToken, *p.LastToken))
	}
	if p.Current != nil {
		attrs = append(attrs, slog.Uint64(keyCurrent, *p.Current))
	}
	attrs = append(attrs, slog.String("detail", p.Detail))
	level := slog.LevelWarn
	if p.Code == "internal" {
		level = slog.LevelError
		attrs = append(attrs, slog.String("err", err.Error()))
	}
	if ok, suppressed := c.s.logSampler.allow(logClass(p.Code), time.Now()); ok {
		if suppressed > 0 {
			attrs = append(attrs, slog.Int64("suppressed", suppressed))
		}
		logline.Log(ctx, c.s.logger(), level, "request rejected", attrs...)
	}

	httpRejections.WithLabelValues(c.routeLabel(), p.Code).Inc()
	if c.isStorageWrite() && slices.Contains(rejectionReasons, p.Code) {
		storageRejections.WithLabelValues(p.Code).Inc()
		c.rejected(err)
	}
}

// isStorageWrite reports whether the request is a write to the storage.
func (c *call) isStorageWrite() bool { return c.storageOp() != "" }

// tokenOf returns the token a problem member holds, 0 if it is absent.
func tokenOf(v *uint64) uint64 {
	if v == nil {
		return 0
	}
	return *v
}

// storageOp names the storage write the request is: put, delete, claim or
// txn; "" if it is none.
func (c *call) storageOp() string {
	if c.route == nil {
		return ""
	}
	return c.route.by[c.r.Method].Write
}

// Log keys, as in the API's JSON.
const (
	keyResource  = "resource"
	keyKey       = "key"
	keyHolder    = "holder"
	keyToken     = "token"
	keyPresented = "presented"
	keyLastFence = "last_fence"
	keyLastToken = "last_token"
	keyCurrent   = "current"
	keyRevision  = "revision"
)

// accepted logs and counts an accepted storage write.
func (c *call) accepted(op string, t fence.Token, res fence.WriteResult) {
	storageWrites.WithLabelValues(op).Inc()
	attrs := []slog.Attr{slog.String("op", op), slog.String(keyResource, c.resource)}
	if c.key != "" {
		attrs = append(attrs, slog.String(keyKey, c.key))
	}
	attrs = append(attrs,
		slog.Uint64(keyToken, uint64(t)),
		slog.Uint64(keyLastFence, uint64(res.LastFence)),
		slog.String(keyHolder, res.Holder),
		slog.Uint64(keyRevision, uint64(res.Rev)))
	if c.unfenced {
		attrs = append(attrs, slog.Bool("unfenced", true))
	}
	logline.Log(c.r.Context(), c.s.logger(), slog.LevelInfo, "write accepted", attrs...)
}

// writeJSON answers 200 with v as JSON.
func (c *call) writeJSON(v any) { c.writeJSONStatus(http.StatusOK, v) }

// writeJSONStatus answers status with v as JSON.
func (c *call) writeJSONStatus(status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen: the responses hold strings, numbers and bools
		c.fail(fmt.Errorf("%w: encoding response: %w", wire.ErrInternal, err))
		return
	}
	c.writeRawStatus(status, b)
}

// writeRaw answers 200 with b, a JSON value.
func (c *call) writeRaw(b []byte) { c.writeRawStatus(http.StatusOK, b) }

// writeRawStatus answers status with b, a JSON value.
func (c *call) writeRawStatus(status int, b []byte) {
	h := c.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	c.w.WriteHeader(status)
	c.w.Write(append(b, '\n'))
}

// extendWriteDeadline lets a long poll of wait outlive the server's WriteTimeout.
func (c *call) extendWriteDeadline(wait time.Duration) {
	err := http.NewResponseController(c.w).SetWriteDeadline(time.Now().Add(wait + 30*time.Second))
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		c.s.logger().LogAttrs(c.r.Context(), slog.LevelDebug, "cannot extend write deadline", slog.String("err", err.Error()))
	}
}

// recorder remembers the status of a response, for the metrics and the
// panic handler.
type recorder struct {
	http.ResponseWriter
	status int // 0 until the header is written
}

func (w *recorder) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
