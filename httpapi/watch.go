package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/sse"
	"github.com/fence-lock/fence/watch"
	"github.com/fence-lock/fence/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// watchHandlers binds GET /v1/watch.
var watchHandlers = handlerSet{
	wire.OpWatch: {serve: (*Handler).watch},
}

// Watch streams, as GET /v1/watch answers them.
const (
	// watchWriteTimeout bounds each write to a watcher: one that stops
	// reading is cut off after it, even before it falls Buffer behind.
	watchWriteTimeout = 30 * time.Second
)

var (
	watchStreams = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fence_watch_streams",
		Help: "Watch streams (GET /v1/watch) open now.",
	})
	watchCutoffs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_watch_cutoffs_total",
		Help: "Watch streams cut off because their client fell too far behind.",
	})
	watchEvents = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fence_watch_events_sent_total",
		Help: "Events sent on watch streams.",
	})
)

// eventOf is the wire form of e.
func eventOf(e watch.Event) wire.Event {
	w := wire.Event{Type: string(e.Type), Resource: e.Resource, Holder: e.Holder, Token: e.Token,
		LastFence: e.LastFence, Key: e.Key, Op: e.Op, Mode: wire.ModeOf(e.Shared),
		Time: wire.Timestamp(e.Time), Detail: e.Detail}
	if !e.ExpiresAt.IsZero() {
		w.ExpiresAt = wire.Timestamp(e.ExpiresAt)
	}
	return w
}

// watch serves GET /v1/watch: the events of the resources under prefix, as
// Server-Sent Events, until the client goes, the hub closes, or the client
// falls Buffer behind.
func (s *Handler) watch(c *call) error {
	q := c.r.URL.Query()
	for name := range q {
		if name != "prefix" && name != "last_event_id" && name != "replay" {
			return badRequest("unknown query parameter %q (known: prefix, last_event_id, replay)", name)
		}
	}
	prefix := q.Get("prefix")
	if prefix != "" {
		if err := fence.ValidateResource(prefix); err != nil {
			return fmt.Errorf("prefix: %w", err)
		}
	}
	// The header is what a reconnecting EventSource sends: it is newer
	// than a last_event_id left in the URL.
	after := c.r.Header.Get(wire.LastEventIDHeader)
	if after == "" {
		after = q.Get("last_event_id")
	}
	replay := 0
	if v := q.Get("replay"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > watch.MaxReplay {
			return badRequest("replay %q: want an integer in 0..%d", v, watch.MaxReplay)
		}
		replay = n
	}
	if s.Events == nil {
		return fmt.Errorf("%w: this server's lock service cannot watch", fence.ErrNotFound)
	}
	key := clientSlotKey(c)
	if !s.watching.take(key, perClient(c, s.WatchersPerClient), s.Watchers) {
		watchesRefused.Inc()
		return &wire.RateLimitedError{RetryAfter: time.Second,
			Reason: "too many watch streams open: close one, or watch a shorter prefix with one stream"}
	}
	defer s.watching.give(key)
	var sub *watch.Sub
	var err error
	if after == "" && replay > 0 {
		sub, err = s.Events.SubscribeReplay(prefix, replay)
	} else { // a resume goes on from where it was, replay or not
		sub, err = s.Events.Subscribe(prefix, after)
	}
	switch {
	case errors.Is(err, watch.ErrBadID):
		return fmt.Errorf("%w: %s: %w", fence.ErrBadRequest, wire.LastEventIDHeader, err)
	case errors.Is(err, watch.ErrClosed):
		return fmt.Errorf("%w: %w", fence.ErrClosed, err)
	case err != nil:
		return err
	}
	defer sub.Close()
	watchStreams.Inc()
	defer watchStreams.Dec()

	h := c.w.Header()
	h.Set("Content-Type", sse.ContentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // tells nginx not to buffer the stream
	if head := sub.Head(); head != "" {
		h.Set(wire.EventHeadHeader, head)
	}
	c.w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(c.w)
	send := func(write func() error) bool {
		rc.SetWriteDeadline(time.Now().Add(watchWriteTimeout))
		return write() == nil && rc.Flush() == nil
	}
	if !send(func() error { return sse.WriteRetry(c.w, wire.WatchRetry) }) {
		return nil
	}
	ctx := c.r.Context()
	for {
		wait, cancel := context.WithTimeout(ctx, wire.HeartbeatInterval)
		e, err := sub.Next(wait)
		cancel()
		switch {
		case err == nil:
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			if !send(func() error { return sse.WriteComment(c.w, "heartbeat") }) {
				return nil
			}
			continue
		case errors.Is(err, watch.ErrSlow):
			watchCutoffs.Inc()
			s.logger().Warn("watch stream cut off: its client fell too far behind", "prefix", prefix, "behind", watch.Buffer)
			return nil
		default: // the client went, or the hub closed
			return nil
		}
		// Write every event ready, then flush once.
		ok := send(func() error {
			for {
				if err := s.writeEvent(c, e); err != nil {
					return err
				}
				if sub.Pending() == 0 {
					return nil
				}
				if e, err = sub.Next(ctx); err != nil {
					return nil // the loop above sees the error again
				}
			}
		})
		if !ok {
			return nil
		}
	}
}

// writeEvent writes e unless the caller may not read its resource.
func (s *Handler) writeEvent(c *call, e watch.Event) error {
	if e.Resource != "" && s.Authenticate != nil {
		// Authenticated again for every event, so that a token revoked
		// (an auth file reload) ends the stream.
		caller, err := s.Authenticate(c.r)
		if err != nil || caller == nil {
			return cmp.Or(err, fmt.Errorf("%w: no caller", fence.ErrUnauthorized))
		}
		c.caller = caller
		if c.allowed(wire.PermRead, e.Resource) != nil {
			return nil // not this caller's to see
		}
	}
	frame, err := e.Encoded(encodeEvent)
	if err != nil {
		return err // cannot happen: strings and numbers
	}
	watchEvents.Inc()
	_, err = c.w.Write(frame)
	return err
}

// encodeEvent is e as one Server-Sent Event, made once for every stream
// that sends it.
func encodeEvent(e watch.Event) ([]byte, error) {
	data, err := json.Marshal(eventOf(e))
	if err != nil {
		return nil, err
	}
	return sse.Encode(sse.Event{ID: e.ID, Type: string(e.Type), Data: string(data)})
}

// rejected publishes a write_rejected event for a fenced storage write.
func (c *call) rejected(err error) {
	var fe *fence.FencedError
	if c.s.Events == nil || !errors.As(err, &fe) {
		return
	}
	c.s.Events.Publish(watch.Event{Type: watch.WriteRejected, Resource: fe.Resource, Token: fe.Presented,
		LastFence: fe.LastFence, Key: c.key, Op: c.storageOp()})
}
