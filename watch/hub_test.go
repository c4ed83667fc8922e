package watch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fence-lock/fence"
)

func next(t *testing.T, s *Sub) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return e
}

func publish(h *Hub, n int, resource string) {
	for i := range n {
		h.Publish(Event{Type: Granted, Resource: resource, Token: fence.Token(i + 1)})
	}
}

func TestLiveInOrderAndByPrefix(t *testing.T) {
	h := NewHub()
	s, err := h.Subscribe("orders/", "")
	if err != nil {
		t.Fatal(err)
	}
	h.Publish(Event{Type: Granted, Resource: "orders/1", Token: 1})
	h.Publish(Event{Type: Granted, Resource: "stock/1", Token: 1})
	h.Publish(Event{Type: Released, Resource: "orders/1", Token: 1})
	e1, e2 := next(t, s), next(t, s)
	if e1.Type != Granted || e2.Type != Released || e1.Resource != "orders/1" {
		t.Fatalf("events %+v, %+v", e1, e2)
	}
	if e1.ID != h.Stream()+"-1" || e2.ID != h.Stream()+"-3" {
		t.Errorf("IDs %q, %q; want seq 1 and 3 of stream %s", e1.ID, e2.ID, h.Stream())
	}
	if e1.Time.IsZero() {
		t.Error("Publish did not set Time")
	}
	if n := s.Pending(); n != 0 {
		t.Errorf("Pending = %d, want 0: the other resource's event leaked in", n)
	}
}

func TestResume(t *testing.T) {
	h := NewHub()
	publish(h, 10, "r")
	s, err := h.Subscribe("", h.Stream()+"-4")
	if err != nil {
		t.Fatal(err)
	}
	for want := 5; want <= 10; want++ {
		if e := next(t, s); e.ID != fmt.Sprintf("%s-%d", h.Stream(), want) || e.Type != Granted {
			t.Fatalf("resumed event %+v, want seq %d", e, want)
		}
	}
	publish(h, 1, "r")
	if e := next(t, s); e.ID != h.Stream()+"-11" {
		t.Fatalf("live event after the replay: %+v", e)
	}
	// Resuming at the latest event replays nothing.
	s2, _ := h.Subscribe("", h.Stream()+"-11")
	if s2.Pending() != 0 {
		t.Errorf("Pending = %d after resuming at the head", s2.Pending())
	}
}

// TestReplay checks SubscribeReplay: the last n events (at most those kept)
// of the prefix come first, then the new ones; Head names the last event
// from before.
func TestReplay(t *testing.T) {
	h := NewHub()
	if s, _ := h.SubscribeReplay("", 5); s.Pending() != 0 || s.Head() != "" {
		t.Fatalf("replay of an empty hub: Pending %d, Head %q; want 0 and none", s.Pending(), s.Head())
	}
	publish(h, 6, "r")
	publish(h, 4, "other")
	s, err := h.SubscribeReplay("r", 7) // events 4..10: r's 4, 5 and 6
	if err != nil {
		t.Fatal(err)
	}
	if want := h.Stream() + "-10"; s.Head() != want {
		t.Fatalf("Head = %q, want %q", s.Head(), want)
	}
	for want := 4; want <= 6; want++ {
		if e := next(t, s); e.ID != fmt.Sprintf("%s-%d", h.Stream(), want) {
			t.Fatalf("replayed event %+v, want seq %d", e, want)
		}
	}
	publish(h, 1, "r")
	if e := next(t, s); e.ID != h.Stream()+"-11" {
		t.Fatalf("live event after the replay: %+v", e)
	}
	// More than the ring keeps: all of the ring, and no Lost event.
	publish(h, RingSize, "r")
	all, _ := h.SubscribeReplay("", RingSize*2)
	if e := next(t, all); e.ID != fmt.Sprintf("%s-%d", h.Stream(), 12) || e.Type != Granted {
		t.Fatalf("first event of a replay of more than the ring: %+v, want the oldest kept (12)", e)
	}
	if got := all.Pending(); got != RingSize-1 {
		t.Fatalf("Pending after the first = %d, want %d", got, RingSize-1)
	}
	if none, _ := h.SubscribeReplay("", 0); none.Pending() != 0 {
		t.Fatalf("replay of 0: Pending %d", none.Pending())
	}
	h.Close()

	// The longest replay the API allows still has Buffer of room: events
	// published before it reads any do not cut it off.
	h = NewHub()
	defer h.Close()
	publish(h, RingSize, "r")
	longest, _ := h.SubscribeReplay("", MaxReplay)
	publish(h, Buffer, "r")
	for i := range MaxReplay + Buffer {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := longest.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("event %d of a replay of MaxReplay with Buffer published since: %v", i, err)
		}
	}
}

func TestLost(t *testing.T) {
	h := NewHub()
	publish(h, RingSize+10, "r")
	for name, after := range map[string]string{
		"other stream": "0123456789abcdef-3",
		"too old":      h.Stream() + "-9", // events 1..10 are gone
		"future":       fmt.Sprintf("%s-%d", h.Stream(), RingSize+11),
	} {
		t.Run(name, func(t *testing.T) {
			s, err := h.Subscribe("", after)
			if err != nil {
				t.Fatal(err)
			}
			e := next(t, s)
			if e.Type != Lost || e.Detail == "" {
				t.Fatalf("first event %+v, want Lost with a detail", e)
			}
			if want := fmt.Sprintf("%s-%d", h.Stream(), RingSize+10); e.ID != want {
				t.Errorf("Lost ID %q, want the head %q so that a reconnect resumes from here", e.ID, want)
			}
			if s.Pending() != 0 {
				t.Errorf("Pending = %d after Lost, want 0", s.Pending())
			}
		})
	}
	// The oldest event kept still resumes.
	s, _ := h.Subscribe("", h.Stream()+"-10")
	if e := next(t, s); e.ID != h.Stream()+"-11" {
		t.Fatalf("resume at the edge of the ring: %+v", e)
	}
}

func TestBadID(t *testing.T) {
	h := NewHub()
	for _, id := range []string{"x", "-1", "abc-", "abc-x", "abc--1", "a b-1", "abc-+1", strings.Repeat("a", 65) + "-1"} {
		if _, err := h.Subscribe("", id); !errors.Is(err, ErrBadID) {
			t.Errorf("Subscribe(%q) = %v, want ErrBadID", id, err)
		}
	}
	if h.Subscribers() != 0 {
		t.Errorf("a rejected subscription was kept")
	}
}

func TestSlowSubscriberIsCutOff(t *testing.T) {
	h := NewHub()
	slow, _ := h.Subscribe("", "")
	fast, _ := h.Subscribe("", "")
	var got []Event
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for len(got) < Buffer+1 {
			got = append(got, next(t, fast))
		}
	}()
	for i := range Buffer + 1 {
		h.Publish(Event{Type: Granted, Resource: "r", Token: fence.Token(i + 1)})
		if i%64 == 0 {
			time.Sleep(time.Millisecond) // let the fast one keep up
		}
	}
	wg.Wait()
	if _, err := slow.Next(context.Background()); !errors.Is(err, ErrSlow) {
		t.Fatalf("slow subscriber: Next = %v, want ErrSlow", err)
	}
	if h.Subscribers() != 1 {
		t.Errorf("Subscribers = %d, want 1 (the slow one is gone)", h.Subscribers())
	}
	// Cut off, it resumes from the ring without loss.
	s, _ := h.Subscribe("", h.Stream()+"-0")
	if e := next(t, s); e.Type != Granted || e.Token != 1 {
		t.Fatalf("resume after cut-off: %+v", e)
	}
}

func TestClose(t *testing.T) {
	h := NewHub()
	s, _ := h.Subscribe("", "")
	done := make(chan error)
	go func() { _, err := s.Next(context.Background()); done <- err }()
	h.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close = %v, want ErrClosed", err)
	}
	h.Publish(Event{Type: Granted, Resource: "r"}) // dropped, no panic
	if _, err := h.Subscribe("", ""); !errors.Is(err, ErrClosed) {
		t.Fatalf("Subscribe after Close = %v, want ErrClosed", err)
	}
	var nilHub *Hub
	nilHub.Publish(Event{}) // does nothing
	nilHub.Close()
}

func TestNextHonoursContext(t *testing.T) {
	h := NewHub()
	s, _ := h.Subscribe("", "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next = %v, want DeadlineExceeded", err)
	}
	s.Close()
	if h.Subscribers() != 0 {
		t.Error("Close left the subscription in the hub")
	}
}

func FuzzParseID(f *testing.F) {
	f.Add("0123456789abcdef-17")
	f.Add("a-b-1")
	f.Fuzz(func(t *testing.T, id string) {
		stream, seq, err := ParseID(id)
		if err != nil {
			return
		}
		if again := fmt.Sprintf("%s-%d", stream, seq); again != id && !strings.HasPrefix(id, stream+"-0") {
			t.Fatalf("ParseID(%q) = %q, %d: prints as %q", id, stream, seq, again)
		}
	})
}

// TestWakeAfterIdle checks that a subscriber waiting for an event is woken
// by one published after the hub's waking goroutine stopped for want of
// events, and that closing the hub stops that goroutine.
func TestWakeAfterIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHub()
		defer h.Close()
		s, _ := h.Subscribe("", "")
		h.Publish(Event{Type: Granted, Resource: "r", Token: 1})
		if e := next(t, s); e.Token != 1 {
			t.Fatalf("first event %+v", e)
		}
		got := make(chan Event)
		go func() {
			e, err := s.Next(context.Background())
			if err != nil {
				t.Error(err)
			}
			got <- e
		}()
		time.Sleep(3 * wakeIdle) // the waking goroutine stops
		synctest.Wait()
		h.Publish(Event{Type: Released, Resource: "r", Token: 1})
		if e := <-got; e.Type != Released {
			t.Fatalf("event after the idle time %+v", e)
		}
	})
}

// TestEncodedOnce checks that a published event is encoded once, however
// many subscribers take it, and that an event of one subscriber (Lost) is
// encoded when asked.
func TestEncodedOnce(t *testing.T) {
	h := NewHub()
	defer h.Close()
	var subs []*Sub
	for range 3 {
		s, err := h.Subscribe("", "")
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	h.Publish(Event{Type: Granted, Resource: "r", Token: 7})
	calls := 0
	encode := func(e Event) ([]byte, error) { calls++; return []byte(e.ID), nil }
	for _, s := range subs {
		e := next(t, s)
		if b, err := e.Encoded(encode); err != nil || string(b) != e.ID {
			t.Fatalf("Encoded = %q, %v; want the event's encoding", b, err)
		}
	}
	if calls != 1 {
		t.Fatalf("encode ran %d times for one event taken by 3 subscribers, want 1", calls)
	}
	lost, _ := h.Subscribe("", "0123456789abcdef-1")
	e := next(t, lost)
	e.Encoded(encode)
	e.Encoded(encode)
	if e.Type != Lost || calls != 3 {
		t.Fatalf("a Lost event (%s) encoded %d times in all, want 3: an event not published is encoded at every call", e.Type, calls)
	}
}
