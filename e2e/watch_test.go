package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/watch"
)

// writeAuthFile writes an auth file in dir with one token per name,
// "<name>-secret", granted perms, and returns its path.
func writeAuthFile(t *testing.T, dir string, perms map[string]string) string {
	t.Helper()
	var b strings.Builder
	for name, p := range perms {
		sum := sha256.Sum256([]byte(name + "-secret"))
		b.WriteString(name + " " + hex.EncodeToString(sum[:]) + " " + p + "\n")
	}
	path := filepath.Join(dir, "auth")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// nextEvent returns the watcher's next event, failing t after 10 s.
func nextEvent(t *testing.T, w *client.Watcher) watch.Event {
	t.Helper()
	type res struct {
		e   watch.Event
		err error
	}
	c := make(chan res, 1)
	go func() { e, err := w.Next(); c <- res{e, err} }()
	select {
	case r := <-c:
		if r.err != nil {
			t.Fatalf("watch: %v", r.err)
		}
		return r.e
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s")
	}
	return watch.Event{}
}

// wantEvents reads len(want) events and checks their type, resource,
// holder, token and last fence (zero members of want are not checked).
func wantEvents(t *testing.T, w *client.Watcher, want ...watch.Event) {
	t.Helper()
	for i, x := range want {
		e := nextEvent(t, w)
		if e.Type != x.Type || e.Resource != x.Resource || x.Holder != "" && e.Holder != x.Holder ||
			x.Token != 0 && e.Token != x.Token || x.LastFence != 0 && e.LastFence != x.LastFence ||
			x.Key != "" && e.Key != x.Key || x.Op != "" && e.Op != x.Op {
			t.Fatalf("event %d: got %+v, want %+v", i, e, x)
		}
		if e.Time.IsZero() || e.ID == "" {
			t.Fatalf("event %d has no time or ID: %+v", i, e)
		}
	}
}

// TestWatch checks the watch stream on every engine: each change to a lock
// and each fenced write as an event in order, the prefix, and resuming
// after a disconnect without losing what happened meanwhile.
func TestWatch(t *testing.T) {
	for _, eng := range engines {
		t.Run(eng.name, func(t *testing.T) {
			url, _ := eng.newService(t)
			api, err := client.NewAPI(url)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			w := api.Watch(ctx, "jobs/", "")
			defer w.Close()
			// The stream is open once a first event arrives: wait for a
			// grant made after it.
			go func() {
				time.Sleep(200 * time.Millisecond)
				api.Acquire(ctx, "other", "x", time.Minute, 0) // not under jobs/
				api.Acquire(ctx, "jobs/a", "worker-1", 50*time.Millisecond, 0)
			}()
			wantEvents(t, w,
				watch.Event{Type: watch.Granted, Resource: "jobs/a", Holder: "worker-1", Token: 1, LastFence: 1},
				watch.Event{Type: watch.FenceRaised, Resource: "jobs/a", Token: 1, LastFence: 1},
				watch.Event{Type: watch.Expired, Resource: "jobs/a", Holder: "worker-1", Token: 1, LastFence: 1},
			)
			l, err := api.Acquire(ctx, "jobs/a", "worker-2", time.Minute, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := api.Renew(ctx, "jobs/a", l.Token, time.Minute); err != nil {
				t.Fatal(err)
			}
			if _, err := api.Put(ctx, "jobs/a", "k", []byte("stale"), 1, fence.Cond{}); !errors.Is(err, fence.ErrFenced) {
				t.Fatalf("stale put: %v, want fenced", err)
			}
			wantEvents(t, w,
				watch.Event{Type: watch.Granted, Resource: "jobs/a", Holder: "worker-2", Token: 2, LastFence: 2},
				watch.Event{Type: watch.FenceRaised, Resource: "jobs/a", Token: 2, LastFence: 2},
				watch.Event{Type: watch.Renewed, Resource: "jobs/a", Holder: "worker-2", Token: 2, LastFence: 2},
				watch.Event{Type: watch.WriteRejected, Resource: "jobs/a", Token: 1, LastFence: 2, Key: "k", Op: "put"},
			)

			// Disconnect, change things, resume from the last ID.
			last := w.LastID()
			w.Close()
			if err := api.Release(ctx, "jobs/a", l.Token); err != nil {
				t.Fatal(err)
			}
			if _, err := api.Acquire(ctx, "jobs/b", "worker-3", time.Minute, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := api.Revoke(ctx, "jobs/b"); err != nil {
				t.Fatal(err)
			}
			w2 := api.Watch(ctx, "jobs/", last)
			defer w2.Close()
			wantEvents(t, w2,
				watch.Event{Type: watch.Released, Resource: "jobs/a", Holder: "worker-2", Token: 2, LastFence: 2},
				watch.Event{Type: watch.Granted, Resource: "jobs/b", Holder: "worker-3", Token: 1},
				watch.Event{Type: watch.FenceRaised, Resource: "jobs/b", Token: 1},
				watch.Event{Type: watch.Revoked, Resource: "jobs/b", Holder: "worker-3", Token: 1, LastFence: 2},
				watch.Event{Type: watch.FenceRaised, Resource: "jobs/b", Token: 2, LastFence: 2},
			)

			// An ID of another stream cannot resume: the first event says so.
			w3 := api.Watch(ctx, "", "0123456789abcdef-5")
			defer w3.Close()
			if e := nextEvent(t, w3); e.Type != watch.Lost || e.Detail == "" {
				t.Fatalf("resume from another stream: %+v, want lost", e)
			}

			// A malformed ID is a bad request, returned at once.
			w4 := api.Watch(ctx, "", "not an id")
			if _, err := w4.Next(); !errors.Is(err, fence.ErrBadRequest) {
				t.Fatalf("malformed Last-Event-ID: %v, want bad_request", err)
			}
			resp, err := http.Get(url + "/v1/watch?bogus=1")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("unknown parameter: status %d, want 400", resp.StatusCode)
			}
		})
	}
}

// TestWatch_Auth checks that a watcher sees only the events of resources
// its token may read, and that a watch without a token is 401.
func TestWatch_Auth(t *testing.T) {
	dir := t.TempDir()
	authFile := writeAuthFile(t, dir, map[string]string{
		"admin":  "lock:* write:* read:* admin:*",
		"orders": "read:orders/",
	})
	srv := startQuiet(t, t.TempDir(), "--auth-file", authFile)
	admin, _ := client.NewAPI(srv.URL)
	admin.AuthToken = "admin-secret"
	reader, _ := client.NewAPI(srv.URL)
	reader.AuthToken = "orders-secret"
	anon, _ := client.NewAPI(srv.URL)

	if _, err := anon.Watch(t.Context(), "", "").Next(); !errors.Is(err, fence.ErrUnauthorized) {
		t.Fatalf("watch without a token: %v, want unauthorized", err)
	}
	w := reader.Watch(t.Context(), "", "")
	defer w.Close()
	go func() {
		time.Sleep(200 * time.Millisecond)
		admin.Acquire(t.Context(), "stock/1", "a", time.Minute, 0)
		admin.Acquire(t.Context(), "orders/1", "a", time.Minute, 0)
	}()
	if e := nextEvent(t, w); e.Resource != "orders/1" {
		t.Fatalf("first event seen by an orders/ reader: %+v", e)
	}

	// The reader's token is revoked (the auth file reloaded without it):
	// its stream ends at the next event, and the watcher says why.
	writeAuthFile(t, dir, map[string]string{"admin": "lock:* write:* read:* admin:*"})
	srv.cmd.Process.Signal(syscall.SIGHUP)
	time.Sleep(300 * time.Millisecond)
	admin.Acquire(t.Context(), "orders/2", "a", time.Minute, 0)
	errC := make(chan error, 1)
	go func() {
		for {
			if _, err := w.Next(); err != nil {
				errC <- err
				return
			}
		}
	}()
	select {
	case err := <-errC:
		if !errors.Is(err, fence.ErrUnauthorized) {
			t.Fatalf("watch after the token was revoked: %v, want unauthorized", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream of a revoked token is still open")
	}
}

// TestWatch_Failover checks a watch through a standby across the leader's
// death: the stream ends with the leader, the watcher reconnects, is told
// that it lost events (a new leader, a new stream), and then sees the new
// leader's events.
func TestWatch_Failover(t *testing.T) {
	_, store := etcdStore(t)
	c := startCluster(t, store, 3)
	leader := c.waitLeader(30 * time.Second)
	standby := (leader + 1) % 3
	api, err := client.NewAPI(c.url(standby) + "," + c.url((leader+2)%3))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.addrs(leader))
	if err != nil {
		t.Fatal(err)
	}
	w := api.Watch(t.Context(), "", "")
	defer w.Close()
	go func() {
		time.Sleep(200 * time.Millisecond)
		api.Acquire(t.Context(), "before", "a", time.Minute, 0)
	}()
	if e := nextEvent(t, w); e.Type != watch.Granted || e.Resource != "before" {
		t.Fatalf("event before the failover: %+v", e)
	}
	nextEvent(t, w) // its fence_raised
	c.kill(leader)
	if e := nextEvent(t, w); e.Type != watch.Lost || !strings.Contains(e.Detail, "list the locks") {
		t.Fatalf("first event after the failover: %+v, want lost", e)
	}
	// The new leader's events follow.
	done := make(chan error, 1)
	go func() {
		l, err := cl.Acquire(t.Context(), "after", fence.WithHolder("b"), fence.WithTTL(time.Minute))
		if err == nil {
			err = l.Release(context.Background())
		}
		done <- err
	}()
	if e := nextEvent(t, w); e.Type != watch.Granted || e.Resource != "after" {
		t.Fatalf("event after the failover: %+v", e)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
