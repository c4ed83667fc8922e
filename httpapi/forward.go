package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/wire"
)

// Forwarder is the Handler.Forward of a standby: it passes every request to
// the leader and its answer back, long polls included, with the operation
// that the Handler matched it to (a long poll or a stream gets the deadline
// it needs). It is safe for concurrent use.
//
// When no server leads, or the leader cannot be reached, it answers 503
// not_leader: nothing was applied, and the client may retry on any server.
// When the leader was reached but its answer did not come back, it answers
// 503 unavailable: the outcome is unknown.
type Forwarder struct {
	// Self is this server's advertise URL, sent in wire.ForwardedHeader.
	Self string
	// Leader returns the leader's base URL and a context that ends when
	// that server stops being the leader (as this server learns it), or
	// false while none leads. A forwarded request still waiting for its
	// answer when the context ends is cut short and answered unavailable,
	// so that requests held by a leader that froze are not held for ever.
	Leader func() (string, context.Context, bool)
	// Transport sends the forwarded requests. Default: a clone of
	// http.DefaultTransport.
	Transport http.RoundTripper

	once       sync.Once
	proxy      *httputil.ReverseProxy
	streams    context.Context // ends the forwarded watch streams
	endStreams context.CancelFunc
}

// EndStreams ends the watch streams being forwarded, and those forwarded
// later, so that a standby that shuts down is not held by them. Other
// requests in flight finish.
func (f *Forwarder) EndStreams() {
	f.once.Do(f.init)
	f.endStreams()
}

type targetKey struct{}

// opKey carries the operation that Handler matched a request to, so that
// the Forwarder does not match the path again.
type opKey struct{}

func withOp(ctx context.Context, op *wire.Op) context.Context {
	return context.WithValue(ctx, opKey{}, op)
}

// opFrom returns the operation Handler matched the request to; nil if the
// Forwarder serves a request that no Handler matched.
func opFrom(ctx context.Context) *wire.Op {
	op, _ := ctx.Value(opKey{}).(*wire.Op)
	return op
}

func withTarget(ctx context.Context, u *url.URL) context.Context {
	return context.WithValue(ctx, targetKey{}, u)
}

func targetFrom(ctx context.Context) *url.URL { return ctx.Value(targetKey{}).(*url.URL) }

// ServeHTTP implements http.Handler.
func (f *Forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if by := r.Header.Get(wire.ForwardedHeader); by != "" {
		writeProblem(w, fmt.Errorf("%w: this server does not lead either (forwarded by %s)", fence.ErrNotLeader, by), "")
		return
	}
	leader, term, ok := f.Leader()
	if !ok {
		writeProblem(w, fmt.Errorf("%w: no server leads the store right now (an election is in progress)", fence.ErrNotLeader), "")
		return
	}
	target, err := url.Parse(leader)
	if err != nil {
		writeProblem(w, fmt.Errorf("%w: the leader's address %q: %v", wire.ErrInternal, leader, err), "")
		return
	}
	f.once.Do(f.init)
	ctx, cancel := context.WithCancel(withTarget(r.Context(), target))
	defer cancel()
	// Not every ResponseWriter has a deadline; then there is none to extend.
	switch opFrom(r.Context()) {
	case wire.OpAcquireLock:
		// A long poll: the leader holds the answer for up to its wait.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(fence.MaxWait + 30*time.Second))
	case wire.OpWatch:
		// A stream, with a heartbeat: it ends when either side goes,
		// or when the leader changes.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
		defer context.AfterFunc(f.streams, cancel)()
	}
	stop := context.AfterFunc(term, cancel)
	defer stop()
	f.reverseProxy().ServeHTTP(w, r.WithContext(ctx))
}

func (f *Forwarder) reverseProxy() *httputil.ReverseProxy {
	f.once.Do(f.init)
	return f.proxy
}

func (f *Forwarder) init() {
	transport := f.Transport
	if transport == nil {
		transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	f.streams, f.endStreams = context.WithCancel(context.Background())
	f.proxy = &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(targetFrom(pr.In.Context()))
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			pr.Out.Header.Set(wire.ForwardedHeader, f.Self)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" {
				writeProblem(w, fmt.Errorf("%w: the leader %s cannot be reached: %v", fence.ErrNotLeader, targetFrom(r.Context()), err), "")
				return
			}
			if r.Context().Err() != nil && !errors.Is(r.Context().Err(), context.DeadlineExceeded) {
				err = errors.New("the leader was replaced while the request waited for its answer")
			}
			writeProblem(w, fmt.Errorf("%w: forwarding to the leader %s failed, outcome unknown: %v", fence.ErrClosed, targetFrom(r.Context()), err), "")
		},
	}
}
