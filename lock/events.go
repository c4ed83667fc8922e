package lock

import (
	"context"
	"log/slog"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/support/logline"
	"github.com/fence-lock/fence/watch"
)

// change is a kind of change to a lease: the line it is logged as, and the
// event it is published as ("" for none).
type change struct {
	msg   string
	event watch.Type
}

// The changes to a lease.
var (
	changeNone     = change{}
	changeRestored = change{"lease restored", ""}
	changeGranted  = change{"lock acquired", watch.Granted}
	changeRetried  = change{"lock acquire retried", watch.Renewed}
	changeRenewed  = change{"lock renewed", watch.Renewed}
	changeReleased = change{"lock released", watch.Released}
	// A transfer's end of the old lease; the successor's grant follows.
	changeTransferred = change{"lock transferred", watch.Released}
	changeAbandoned   = change{"abandoned grant released", watch.Released}
	changeExpired     = change{"lock expired", watch.Expired}
)

// record logs the change c to lease l, with its owner if it has one, and
// publishes it to s.Events; a grant raises the resource's fence too, and is
// followed by a FenceRaised event.
func (s *Service) record(c change, l fence.Lease, lastFence fence.Token) {
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs, slog.String("resource", l.Resource), slog.String("holder", l.Holder),
		slog.Uint64("token", uint64(l.Token)), slog.Uint64("last_fence", uint64(lastFence)),
		slog.Int64("ttl_ms", l.TTL.Milliseconds()), slog.String("expires_at", l.Expires.UTC().Format(time.RFC3339Nano)))
	if l.Owner != "" {
		attrs = append(attrs, slog.String("owner", l.Owner))
	}
	if !l.Session.IsZero() {
		attrs = append(attrs, slog.String("session", l.Session.Resource))
	}
	logline.Log(context.Background(), s.Logger, slog.LevelInfo, c.msg, attrs...)
	if c.event == "" || s.Events == nil {
		return
	}
	e := watch.Event{Type: c.event, Resource: l.Resource, Holder: l.Holder, Token: l.Token, LastFence: lastFence, Shared: l.Shared}
	if c.event == watch.Granted || c.event == watch.Renewed {
		e.ExpiresAt = l.Expires
	}
	s.Events.Publish(e)
	if c.event == watch.Granted {
		s.Events.Publish(watch.Event{Type: watch.FenceRaised, Resource: l.Resource, Token: l.Token, LastFence: lastFence})
	}
}
