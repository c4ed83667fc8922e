package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/watch"
)

// Watch returns a watcher of the lock and fence events of the resources
// that start with prefix (see API.Watch): it reconnects by
// itself and resumes without loss while the server still has the events.
func (c *Client) Watch(ctx context.Context, prefix string) *Watcher {
	return c.api.Watch(ctx, prefix, "")
}

// Election is a leader election among the candidates that campaign on one
// resource, in the manner of etcd's concurrency.Election and Curator's
// LeaderLatch: the leader is the holder of the resource's lock, and each
// leadership has its own fencing token, so that what a deposed leader
// still writes is rejected. Candidates name themselves with their holder
// id (an address, say), which observers see as the leader.
type Election struct {
	c        *Client
	resource string
}

// Election returns the election on resource.
func (c *Client) Election(resource string) *Election {
	return &Election{c: c, resource: resource}
}

// Leader is who leads an election, as observers see it.
type Leader struct {
	Holder  string      // the leader's holder id; "" when nobody leads
	Token   fence.Token // the leadership's token; 0 when nobody leads
	Expires time.Time   // when its lease runs out unless renewed
}

// ErrNoLeader means that nobody leads the election.
var ErrNoLeader = errors.New("client: election: nobody leads")

// Campaign waits until candidate leads, then returns its leadership: a
// lease that renews itself, whose Done channel closes when the leadership
// ends, and whose writes carry its token. It waits until ctx ends; then it
// returns ctx's error. Opts are those of Acquire (TTL, safety margin); the
// holder is candidate.
func (e *Election) Campaign(ctx context.Context, candidate string, opts ...fence.SessionOption) (*Lease, error) {
	opts = append(opts, fence.WithHolder(candidate), fence.WithWait(fence.MaxWait))
	for {
		l, err := e.c.Acquire(ctx, e.resource, opts...)
		var held *fence.LockHeldError
		switch {
		case err == nil:
			return l, nil
		case ctx.Err() != nil:
			return nil, fmt.Errorf("client: campaign on %q: %w", e.resource, ctx.Err())
		case errors.As(err, &held):
			continue // waited fence.MaxWait: wait again
		default:
			return nil, fmt.Errorf("client: campaign on %q: %w", e.resource, err)
		}
	}
}

// Resign ends the leadership l, that Campaign returned, at once, so that
// the next candidate leads without waiting for its TTL.
func (e *Election) Resign(ctx context.Context, l *Lease) error {
	return l.Release(ctx)
}

// Transfer hands the leadership l, that Campaign returned, to candidate
// to, which must be campaigning ("": the candidate that has waited
// longest), in one change: to leads at once with a greater token, so there
// is no instant without a leader, and what l still writes is fenced. l ends
// (its Done channel closes). It wraps fence.ErrNotFound if to does not
// campaign: then nothing changed and l still leads. See
// fence.Session.Transfer for the other failures.
func (e *Election) Transfer(ctx context.Context, l *Lease, to string) error {
	if _, err := l.Transfer(ctx, to); err != nil {
		return fmt.Errorf("client: election on %q: transfer to %q: %w", e.resource, to, err)
	}
	return nil
}

// Leader returns who leads now, or ErrNoLeader.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	st, err := e.c.Status(ctx, e.resource)
	if err != nil {
		return Leader{}, fmt.Errorf("client: election on %q: %w", e.resource, err)
	}
	if !st.Held {
		return Leader{}, ErrNoLeader
	}
	return Leader{Holder: st.Holder, Token: st.Token, Expires: st.Expires}, nil
}

// Observe sends who leads now, and then every change of leader (a zero
// Leader when nobody leads), until ctx ends; then it closes the channel.
// It follows the lock's events, and reads the status again when the stream
// lost events, so that it never misses a change for good. A change of
// leader may be sent only once its events arrive; a slow reader gets the
// latest leader, not every one in between.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader, 1)
	go e.observe(ctx, out)
	return out
}

func (e *Election) observe(ctx context.Context, out chan Leader) {
	defer close(out)
	var last *Leader // as last sent
	send := func(l Leader) {
		if last != nil && last.Holder == l.Holder && last.Token == l.Token {
			return // a renewal, not a change
		}
		last = &l
		select { // keep only the latest in the buffer
		case <-out:
		default:
		}
		out <- l
	}
	// sync reads who leads, until it succeeds or ctx ends.
	sync := func() bool {
		for ctx.Err() == nil {
			l, err := e.Leader(ctx)
			if err == nil || errors.Is(err, ErrNoLeader) {
				send(l)
				return true
			}
			sleepCtx(ctx, time.Second)
		}
		return false
	}
	for ctx.Err() == nil {
		// Connect the watch first, then read the status: a change between
		// the two comes as an event after it.
		w := e.c.api.Watch(ctx, e.resource, "")
		if err := w.Start(); err != nil {
			sleepCtx(ctx, time.Second)
			continue
		}
		if sync() {
			e.follow(w, func() fence.Token { return last.Token }, send, sync)
		}
		w.Close()
	}
}

// follow sends the leader changes that w's events tell, until w fails;
// leader returns the token of the leader last sent.
func (e *Election) follow(w *Watcher, leader func() fence.Token, send func(Leader), sync func() bool) {
	for {
		ev, err := w.Next()
		if err != nil {
			return
		}
		if ev.Type == watch.Lost {
			if !sync() {
				return
			}
			continue
		}
		if ev.Resource != e.resource {
			continue // a resource whose name starts with this one
		}
		switch ev.Type {
		case watch.Granted, watch.Renewed:
			send(Leader{Holder: ev.Holder, Token: ev.Token, Expires: ev.ExpiresAt})
		case watch.Released, watch.Expired, watch.Revoked:
			if ev.Token == leader() {
				send(Leader{}) // not an older lease's end, reported late
			}
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
