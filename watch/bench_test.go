package watch

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkPublish measures what publishing costs the lock service, which
// publishes under the resource's lock: with no watcher (the baseline), and
// with watchers that keep up, all of them subscribed to every event.
func BenchmarkPublish(b *testing.B) {
	for _, watchers := range []int{0, 1, 10, 100} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			h := NewHub()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for range watchers {
				s, _ := h.Subscribe("", "")
				go func() {
					for {
						if _, err := s.Next(ctx); err != nil {
							return
						}
					}
				}()
			}
			e := Event{Type: Granted, Resource: "orders/17", Holder: "worker-a", Token: 42, LastFence: 42}
			b.ReportAllocs()
			for b.Loop() {
				h.Publish(e)
			}
			b.StopTimer()
			h.Close()
		})
	}
}
