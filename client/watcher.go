package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/fence-lock/fence/sse"
	"github.com/fence-lock/fence/watch"
	"github.com/fence-lock/fence/wire"
)

// Watcher is a watch stream (GET /v1/watch) that reconnects itself: when
// the stream breaks (a server restarts, the leader changes, a proxy cuts
// it), Next connects again, to the next server if need be, and resumes
// after the last event received, so that no event the server still has is
// missed. When the server cannot resume, Next returns a watch.Lost event:
// list the locks again to catch up. Make it with Client.Watch. Next and
// Close may be called concurrently; Next must not be.
type Watcher struct {
	c      *API
	ctx    context.Context
	cancel context.CancelFunc
	prefix string

	lastID string        // the last event's ID, sent as Last-Event-ID
	retry  time.Duration // the stream's reconnection delay
	body   *idleReader   // nil while not connected
	rd     *sse.Reader

	closeOnce sync.Once
}

// Watch returns a watcher of the events of the resources that start with
// prefix ("" for all), from the next event on, or after the event with ID
// after if it is not "" (a watcher's LastID, kept from before). It
// connects on the first Next, and ends when ctx ends or at Close.
func (c *API) Watch(ctx context.Context, prefix, after string) *Watcher {
	ctx, cancel := context.WithCancel(ctx)
	return &Watcher{c: c, ctx: ctx, cancel: cancel, prefix: prefix, lastID: after, retry: wire.WatchRetry}
}

// LastID returns the ID of the last event Next returned (or the after that
// Watch was given, before the first), with which a new watcher resumes.
func (w *Watcher) LastID() string { return w.lastID }

// Next returns the next event, connecting or reconnecting as needed. It
// returns an error when the watcher's context ends, after Close, when a
// server rejects the watch (bad_request, unauthorized, forbidden: resending
// would not help), or when no server could be reached for the client's
// RetryFor; after that last error, calling Next again tries again.
func (w *Watcher) Next() (watch.Event, error) {
	for {
		if err := w.ctx.Err(); err != nil {
			return watch.Event{}, fmt.Errorf("client: watch: %w", err)
		}
		if w.body == nil {
			if err := w.connect(); err != nil {
				return watch.Event{}, err
			}
		}
		f, err := w.rd.Next()
		if err == nil {
			e, err := decodeEvent(f)
			if err != nil {
				w.disconnect()
				return watch.Event{}, err
			}
			w.lastID = e.ID
			return e, nil
		}
		// The stream broke: wait the server's reconnection delay, then
		// connect again.
		w.retry = w.delay()
		w.disconnect()
		t := time.NewTimer(w.retry)
		select {
		case <-w.ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// delay is the wait before a reconnection: the stream's retry field, at
// most wire.WatchRetry.
func (w *Watcher) delay() time.Duration {
	if d := w.rd.Retry(); d > 0 && d < wire.WatchRetry {
		return d
	}
	return wire.WatchRetry
}

// Start connects now, rather than at the first Next, so that every event
// published after it returns is received. It does nothing if connected.
func (w *Watcher) Start() error {
	if w.body != nil {
		return nil
	}
	return w.connect()
}

func (w *Watcher) connect() error {
	h := http.Header{}
	if w.lastID != "" {
		h.Set(wire.LastEventIDHeader, w.lastID)
	}
	req := send(wire.OpWatch, "", "", request{header: h, retryable: true, stream: true})
	if w.prefix != "" {
		req.path += "?prefix=" + url.QueryEscape(w.prefix)
	}
	resp, err := w.c.do(w.ctx, req)
	if err != nil {
		return fmt.Errorf("client: watch: %w", err)
	}
	w.body = newIdleReader(resp.stream, watchIdleTimeout)
	w.rd = sse.NewReader(w.body)
	return nil
}

// watchIdleTimeout is how long a watcher waits for a byte, heartbeats
// included, before it takes the stream for dead and reconnects: a stream
// whose server vanished without closing the connection stays silent.
const watchIdleTimeout = 2*wire.HeartbeatInterval + 5*time.Second

// idleReader closes its stream when no Read returned data for a while.
type idleReader struct {
	io.ReadCloser
	idle  time.Duration
	timer *time.Timer
}

func newIdleReader(r io.ReadCloser, idle time.Duration) *idleReader {
	return &idleReader{ReadCloser: r, idle: idle, timer: time.AfterFunc(idle, func() { r.Close() })}
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 {
		r.timer.Reset(r.idle)
	}
	return n, err
}

func (r *idleReader) Close() error {
	r.timer.Stop()
	return r.ReadCloser.Close()
}

func (w *Watcher) disconnect() {
	if w.body != nil {
		w.body.Close()
		w.body = nil
	}
}

// Close ends the watcher: a Next under way returns.
func (w *Watcher) Close() error {
	w.closeOnce.Do(w.cancel)
	return nil
}

// decodeEvent decodes one event of a watch stream.
func decodeEvent(f sse.Event) (watch.Event, error) {
	var j wire.Event
	if err := json.Unmarshal([]byte(f.Data), &j); err != nil {
		return watch.Event{}, fmt.Errorf("client: watch: decoding event %s: %w", f.ID, err)
	}
	if j.Type == "" || f.Type != "" && f.Type != j.Type {
		return watch.Event{}, fmt.Errorf("client: watch: event %s: type %q in a %q event", f.ID, j.Type, f.Type)
	}
	e := watch.Event{ID: f.ID, Type: watch.Type(j.Type), Resource: j.Resource, Holder: j.Holder, Token: j.Token,
		LastFence: j.LastFence, Key: j.Key, Op: j.Op, Detail: j.Detail, Shared: j.Mode == wire.ModeShared}
	var err error
	if e.Time, err = wire.ParseTimestamp(j.Time); err != nil {
		return watch.Event{}, fmt.Errorf("client: watch: event %s: time: %w", f.ID, err)
	}
	if j.ExpiresAt != "" {
		if e.ExpiresAt, err = wire.ParseTimestamp(j.ExpiresAt); err != nil {
			return watch.Event{}, fmt.Errorf("client: watch: event %s: expires_at: %w", f.ID, err)
		}
	}
	return e, nil
}
