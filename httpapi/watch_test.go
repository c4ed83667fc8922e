package httpapi

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/fence-lock/fence/watch"
	"github.com/fence-lock/fence/wire"
)

// openWatch opens GET path on e and returns the answer; the stream ends
// with the test.
func openWatch(t *testing.T, e *env, path string, headers ...string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+path, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return resp
}

// eventIDs reads the IDs of the next n events of a stream.
func eventIDs(t *testing.T, resp *http.Response, n int) []string {
	t.Helper()
	var ids []string
	sc := bufio.NewScanner(resp.Body)
	for len(ids) < n && sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			ids = append(ids, id)
		}
	}
	if len(ids) < n {
		t.Fatalf("stream ended after %d events (%v), want %d", len(ids), sc.Err(), n)
	}
	return ids
}

// TestHandler_WatchReplay checks GET /v1/watch?replay=N: the last N events
// first, then the new ones; Fence-Event-Head names the last from before;
// a Last-Event-ID resumes instead; a bad replay is 400.
func TestHandler_WatchReplay(t *testing.T) {
	e := newEnv(t)
	hub := watch.NewHub()
	t.Cleanup(hub.Close)
	e.srv.Events = hub
	id := func(seq string) string { return hub.Stream() + "-" + seq }

	if resp := openWatch(t, e, "/v1/watch?replay=10"); resp.StatusCode != 200 || resp.Header.Get(wire.EventHeadHeader) != "" {
		t.Fatalf("replay on an empty hub: %d, head %q", resp.StatusCode, resp.Header.Get(wire.EventHeadHeader))
	}
	for _, r := range []string{"a", "b", "a", "b", "a"} {
		hub.Publish(watch.Event{Type: watch.Granted, Resource: r, Token: 1})
	}
	resp := openWatch(t, e, "/v1/watch?replay=4&prefix=a")
	if got := resp.Header.Get(wire.EventHeadHeader); got != id("5") {
		t.Fatalf("%s = %q, want %q", wire.EventHeadHeader, got, id("5"))
	}
	hub.Publish(watch.Event{Type: watch.Released, Resource: "a", Token: 1})
	if got := strings.Join(eventIDs(t, resp, 3), " "); got != id("3")+" "+id("5")+" "+id("6") {
		t.Fatalf("replay=4 of a: events %s, want seq 3, 5 (replayed) and 6 (new)", got)
	}
	// A Last-Event-ID wins over replay: a reconnect resumes where it was.
	resp = openWatch(t, e, "/v1/watch?replay=4", wire.LastEventIDHeader, id("5"))
	if got := eventIDs(t, resp, 1)[0]; got != id("6") {
		t.Fatalf("replay=4 with Last-Event-ID seq 5: first event %s, want seq 6", got)
	}
	for _, q := range []string{"-1", "x", "3073"} {
		e.do("GET", "/v1/watch?replay="+q, "").problem(t, 400, "bad_request")
	}
}
