package lock_test

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/memory"
)

func names(locks []fence.LockStatus) string {
	var n []string
	for _, l := range locks {
		n = append(n, l.Resource)
	}
	return strings.Join(n, ",")
}

// TestService_List checks that List returns the held locks only, in byte
// order, with waiters, filtered by prefix and paged by after and limit, and
// that a lease expired by the clock is not listed before the service ends it.
func TestService_List(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, memory.New())
		ctx := t.Context()
		for _, res := range []string{"b/2", "a", "b/1", "c"} {
			acquire(t, s, res, "h-"+res, time.Minute)
		}
		acquire(t, s, "b/short", "x", time.Second)
		gone := acquire(t, s, "b/gone", "y", time.Minute)
		if err := s.Release(ctx, "b/gone", gone.Token); err != nil {
			t.Fatal(err)
		}
		go s.Acquire(ctx, "b/1", "waiter", time.Second, time.Minute)
		synctest.Wait()

		all, more, err := s.List(ctx, "", "", 100)
		if err != nil || more || names(all) != "a,b/1,b/2,b/short,c" {
			t.Fatalf("List=%s, %v, %v", names(all), more, err)
		}
		if all[1].Waiters != 1 || all[1].Holder != "h-b/1" || !all[1].Held || all[0].Waiters != 0 {
			t.Fatalf("b/1: %+v; want h-b/1 with one waiter", all[1])
		}
		if got, _, _ := s.List(ctx, "b/", "", 100); names(got) != "b/1,b/2,b/short" {
			t.Fatalf("prefix b/: %s", names(got))
		}
		page, more, _ := s.List(ctx, "", "", 2)
		if names(page) != "a,b/1" || !more {
			t.Fatalf("limit 2: %s, more %v", names(page), more)
		}
		page, more, _ = s.List(ctx, "", "b/1", 2)
		if names(page) != "b/2,b/short" || !more {
			t.Fatalf("after b/1: %s, more %v", names(page), more)
		}
		if _, _, err := s.List(ctx, "", "", 0); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("limit 0: err=%v", err)
		}
		time.Sleep(2 * time.Second) // b/short expired
		if got, _, _ := s.List(ctx, "b/", "", 100); names(got) != "b/1,b/2" {
			t.Fatalf("after b/short's expiry: %s", names(got))
		}
	})
}
