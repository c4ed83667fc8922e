package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fence-lock/fence/internal/tools/bench"
)

// A watcher is one watch stream on a connection of its own, read by one
// goroutine with a light parser: it looks at the "id", "event", "retry" and
// (once per event for all watchers, see timeCache) "data" fields, and
// decodes no JSON.

// Sizes of a watcher's buffers: the connection's (response headers, chunk
// framing) and the stream's lines. An event is some 300 bytes.
const (
	connBuffer   = 8 << 10
	streamBuffer = 4 << 10
	delayBatch   = 256 // delays a watcher keeps before adding them to a shared histogram
	histShards   = 32
	timelineSize = 64 // watchers (the first) that also record the delay by second
)

// The SSE fields a watcher reads.
var (
	idField    = []byte("id: ")
	eventField = []byte("event: ")
	dataField  = []byte("data: ")
	retryField = []byte("retry: ")
	lostType   = []byte("lost")
	timeMember = []byte(`"time":"`)
)

// watchSet is the watchers of one measurement.
type watchSet struct {
	addr    string
	sem     chan struct{}          // a token per handshake in flight
	base    int64                  // the sequence number of the last event before they subscribed
	start   atomic.Int64           // the run's start, Unix nanoseconds, for the timeline
	seconds int                    // the timeline's length
	stream  atomic.Pointer[string] // the server's stream name, once a watcher has read an event
	times   *timeCache

	shards [histShards]struct {
		mu sync.Mutex
		h  bench.Histogram
	}
	connectMu      sync.Mutex
	connectLatency bench.Histogram // handshakes, reconnections included

	ctx     context.Context
	cancel  context.CancelFunc
	stopped atomic.Bool
	wg      sync.WaitGroup
	ws      []*watcher
}

// newWatchSet returns a set of watchers of the server at addr that have
// seen every event up to base; it connects none.
func newWatchSet(addr string, base int64, parallel int, dur time.Duration) *watchSet {
	s := &watchSet{addr: addr, sem: make(chan struct{}, parallel), base: base,
		seconds: int(dur/time.Second) + 2, times: new(timeCache)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// connect opens n watch streams, at most cap(s.sem) handshakes at once, and
// returns once each has its 200 (the server has subscribed it).
func (s *watchSet) connect(n int) error {
	errs := make(chan error, n)
	for i := range n {
		w := &watcher{set: s, id: i, retry: time.Second, lastSeq: s.base}
		w.last.Store(s.base)
		if i < timelineSize {
			w.timeline = make([]delaySum, s.seconds)
		}
		s.ws = append(s.ws, w)
		s.wg.Go(func() { w.run(errs) })
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// caughtUp returns how many watchers have read (or been told they lost)
// every event up to seq.
func (s *watchSet) caughtUp(seq int64) int {
	n := 0
	for _, w := range s.ws {
		if w.last.Load() >= seq {
			n++
		}
	}
	return n
}

// stop ends every stream and waits for the watchers' goroutines.
func (s *watchSet) stop() {
	s.stopped.Store(true)
	s.cancel()
	for _, w := range s.ws {
		w.closeConn()
	}
	s.wg.Wait()
}

// watchStats are the counts of a watcher, or of all.
type watchStats struct {
	delivered   int64  // events read, each once, in order
	dups        int64  // events read again (an ID not after the last one's)
	silent      int64  // events skipped without a lost event: never announced
	lostSignals int64  // lost events read
	lostEvents  int64  // events they announced lost
	undelivered int64  // events neither read nor announced lost by the end
	noTime      int64  // events without a readable "time"
	ends        int64  // streams that ended while the watcher wanted more
	endsEOF     int64  // of them, ended by the server (the body's end)
	reconnects  int64  // streams opened again after an end
	connectErrs int64  // connections and reconnections that failed (tried again)
	firstEnd    string // why the first stream that did not end with its body ended, or a reconnection failed
}

func (a *watchStats) add(b *watchStats) {
	a.delivered += b.delivered
	a.dups += b.dups
	a.silent += b.silent
	a.lostSignals += b.lostSignals
	a.lostEvents += b.lostEvents
	a.undelivered += b.undelivered
	a.noTime += b.noTime
	a.ends += b.ends
	a.endsEOF += b.endsEOF
	a.reconnects += b.reconnects
	a.connectErrs += b.connectErrs
	if a.firstEnd == "" {
		a.firstEnd = b.firstEnd
	}
}

// delaySum sums the delays of the events of one second of the run.
type delaySum struct {
	n        int64
	sum, max time.Duration
}

// results returns, once the set has stopped, the delay of every delivery,
// the handshakes' latencies, the counts (undelivered: of the events up to
// final), and the delay by second of the run.
func (s *watchSet) results(final int64) (delays, connects *bench.Histogram, st watchStats, timeline []delaySum) {
	delays = new(bench.Histogram)
	for i := range s.shards {
		delays.Merge(&s.shards[i].h)
	}
	timeline = make([]delaySum, s.seconds)
	for _, w := range s.ws {
		if final > w.lastSeq {
			w.stats.undelivered = final - w.lastSeq
		}
		st.add(&w.stats)
		for i, d := range w.timeline {
			timeline[i].n += d.n
			timeline[i].sum += d.sum
			timeline[i].max = max(timeline[i].max, d.max)
		}
	}
	return delays, &s.connectLatency, st, timeline
}

// timeCache holds the server time of recent events by sequence number, so
// that only the first watcher to read an event parses its time.
type timeCache struct {
	slots [1 << 16]struct{ seq, nanos atomic.Int64 }
}

// at returns the server time of event seq, in Unix nanoseconds, from the
// cache or from data, its "data" line; 0 if it has none.
func (c *timeCache) at(seq int64, data []byte) int64 {
	slot := &c.slots[seq&(int64(len(c.slots))-1)]
	if slot.seq.Load() == seq {
		return slot.nanos.Load()
	}
	i := bytes.Index(data, timeMember)
	if i < 0 {
		return 0
	}
	v := data[i+len(timeMember):]
	j := bytes.IndexByte(v, '"')
	if j < 0 {
		return 0
	}
	t, err := time.Parse(time.RFC3339Nano, string(v[:j]))
	if err != nil {
		return 0
	}
	n := t.UnixNano()
	slot.nanos.Store(n)
	slot.seq.Store(seq)
	return n
}

// watcher is one watch stream and the goroutine that reads it.
type watcher struct {
	set  *watchSet
	id   int
	last atomic.Int64 // lastSeq, for caughtUp

	mu   sync.Mutex // guards conn
	conn net.Conn

	// Owned by the watcher's goroutine; read by results after stop.
	lastSeq  int64         // the sequence number of the last event read or announced lost
	stream   string        // the server's stream name, from the first event ID
	retry    time.Duration // the stream's retry field
	delays   []time.Duration
	timeline []delaySum // nil but for the first timelineSize
	stats    watchStats
}

// run connects, reports the outcome on connected, then reads the stream
// until the set stops, reconnecting with Last-Event-ID (after the stream's
// retry delay) whenever the stream ends.
func (w *watcher) run(connected chan<- error) {
	ctx := w.set.ctx
	var lr *bufio.Reader
	var err error
	for attempt := 1; ; attempt++ {
		if lr, err = w.connect(ctx, ""); err == nil || attempt == 3 || ctx.Err() != nil {
			break
		}
		w.stats.connectErrs++
		sleep(ctx, time.Second)
	}
	if err != nil {
		connected <- fmt.Errorf("watcher %d: %w", w.id, err)
		return
	}
	connected <- nil
	w.delays = make([]time.Duration, 0, delayBatch)
	defer w.flush()
	for {
		err := w.read(lr)
		if ctx.Err() != nil {
			return
		}
		w.stats.ends++
		if errors.Is(err, io.EOF) {
			w.stats.endsEOF++
		} else if w.stats.firstEnd == "" {
			w.stats.firstEnd = err.Error()
		}
		w.closeConn()
		for {
			if !sleep(ctx, w.retry) {
				return
			}
			if lr, err = w.connect(ctx, w.lastID()); err == nil {
				w.stats.reconnects++
				break
			}
			if ctx.Err() != nil {
				return
			}
			w.stats.connectErrs++
			if w.stats.firstEnd == "" {
				w.stats.firstEnd = "reconnecting: " + err.Error()
			}
		}
	}
}

// lastID returns the ID of the last event read, for Last-Event-ID; "" if
// no watcher has read one yet.
func (w *watcher) lastID() string {
	stream := w.stream
	if stream == "" {
		p := w.set.stream.Load()
		if p == nil {
			return ""
		}
		stream = *p
	}
	return fmt.Sprintf("%s-%d", stream, w.lastSeq)
}

// connect opens a watch stream, resuming after the event ID after unless it
// is "", and returns the reader of its events.
func (w *watcher) connect(ctx context.Context, after string) (*bufio.Reader, error) {
	select {
	case w.set.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-w.set.sem }()
	start := time.Now()
	d := net.Dialer{Timeout: 10 * time.Second}
	c, err := d.DialContext(ctx, "tcp", w.set.addr)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET /v1/watch?prefix=" + url.QueryEscape(prefix) + " HTTP/1.1\r\nHost: " + w.set.addr +
		"\r\nAccept: text/event-stream\r\nCache-Control: no-cache\r\n"
	if after != "" {
		req += "Last-Event-ID: " + after + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		abort(c)
		return nil, err
	}
	br := bufio.NewReaderSize(c, connBuffer)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		abort(c)
		return nil, fmt.Errorf("GET /v1/watch: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		abort(c)
		return nil, fmt.Errorf("GET /v1/watch: %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	c.SetDeadline(time.Time{})
	if !w.setConn(c) {
		abort(c)
		return nil, context.Canceled
	}
	w.set.connectMu.Lock()
	w.set.connectLatency.Record(time.Since(start))
	w.set.connectMu.Unlock()
	return bufio.NewReaderSize(resp.Body, streamBuffer), nil
}

// read reads events until the stream ends, and returns why.
func (w *watcher) read(lr *bufio.Reader) error {
	var (
		seq          int64
		haveID, lost bool
		at           int64
	)
	for {
		line, err := lr.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return fmt.Errorf("a line of the stream is longer than %d bytes", lr.Size())
		}
		if err != nil {
			return err
		}
		line = line[:len(line)-1]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		switch {
		case len(line) == 0: // the event's end
			if haveID {
				w.take(seq, lost, at)
			}
			haveID, lost, at = false, false, 0
		case line[0] == ':': // a comment: a heartbeat
		case bytes.HasPrefix(line, idField):
			id := line[len(idField):]
			i := bytes.LastIndexByte(id, '-')
			n, ok := parseUint(id[i+1:])
			if i <= 0 || !ok {
				return fmt.Errorf("event ID %q is not <stream>-<seq>", id)
			}
			if w.stream == "" {
				w.stream = string(id[:i])
				stream := w.stream
				w.set.stream.CompareAndSwap(nil, &stream)
			}
			seq, haveID = n, true
		case bytes.HasPrefix(line, eventField):
			lost = bytes.Equal(line[len(eventField):], lostType)
		case bytes.HasPrefix(line, dataField):
			if haveID && !lost {
				at = w.set.times.at(seq, line)
			}
		case bytes.HasPrefix(line, retryField):
			if ms, ok := parseUint(line[len(retryField):]); ok {
				w.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
}

// take counts event seq (a lost event if lost; at its server time),
// read now.
func (w *watcher) take(seq int64, lost bool, at int64) {
	if lost {
		w.stats.lostSignals++
		if seq > w.lastSeq {
			w.stats.lostEvents += seq - w.lastSeq
			w.setLast(seq)
		}
		return
	}
	if seq <= w.lastSeq {
		w.stats.dups++
		return
	}
	if seq > w.lastSeq+1 {
		w.stats.silent += seq - w.lastSeq - 1
	}
	w.setLast(seq)
	w.stats.delivered++
	if at == 0 {
		w.stats.noTime++
		return
	}
	d := time.Duration(time.Now().UnixNano() - at)
	w.delays = append(w.delays, d)
	if len(w.delays) == cap(w.delays) {
		w.flush()
	}
	if w.timeline != nil {
		i := min(max(0, int((at-w.set.start.Load())/int64(time.Second))), len(w.timeline)-1)
		s := &w.timeline[i]
		s.n++
		s.sum += d
		s.max = max(s.max, d)
	}
}

func (w *watcher) setLast(seq int64) {
	w.lastSeq = seq
	w.last.Store(seq)
}

// flush adds the delays kept to the watcher's shard of the histogram.
func (w *watcher) flush() {
	sh := &w.set.shards[w.id%histShards]
	sh.mu.Lock()
	for _, d := range w.delays {
		sh.h.Record(d)
	}
	sh.mu.Unlock()
	w.delays = w.delays[:0]
}

// setConn makes c the watcher's connection, unless the set has stopped.
func (w *watcher) setConn(c net.Conn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.set.stopped.Load() {
		return false
	}
	w.conn = c
	return true
}

// closeConn closes the watcher's connection, if open.
func (w *watcher) closeConn() {
	w.mu.Lock()
	c := w.conn
	w.conn = nil
	w.mu.Unlock()
	if c != nil {
		abort(c)
	}
}

// abort closes c with a reset, leaving no TIME_WAIT behind: thousands of
// watchers closed in each measurement would otherwise hold ephemeral ports.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// parseUint parses b, decimal digits, without allocating.
func parseUint(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// sleep waits d, or less if ctx ends first; it reports whether ctx is
// still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
