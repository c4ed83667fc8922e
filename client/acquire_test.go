package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/fencetest"
)

// TestClient_AcquireAll takes two locks at once through a real server: each
// lease renews itself; a multi-acquire that overlaps them is refused and
// holds nothing; after the release it gets them all, with greater tokens.
func TestClient_AcquireAll(t *testing.T) {
	c, err := client.New(fencetest.NewServer(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	ls, err := c.AcquireAll(t.Context(), []string{"orders", "stock"}, fence.WithTTL(2*time.Second))
	if err != nil {
		t.Fatalf("AcquireAll: %v", err)
	}
	if ls[0].Resource() != "orders" || ls[1].Resource() != "stock" || ls[0].Holder() != ls[1].Holder() {
		t.Fatalf("leases on %s and %s", ls[0].Resource(), ls[1].Resource())
	}
	time.Sleep(2500 * time.Millisecond) // past the TTL: the leases renew themselves
	var held *fence.LockHeldError
	if _, err := c.AcquireAll(t.Context(), []string{"audit", "stock"}, fence.WithHolder("other")); !errors.As(err, &held) || held.Resource != "stock" {
		t.Fatalf("an overlapping multi-acquire: %v, want *LockHeldError on stock", err)
	}
	if st, err := c.API().Status(t.Context(), "audit"); err != nil || st.Held {
		t.Fatalf("audit after the refused multi-acquire: %+v, %v", st, err)
	}
	for _, l := range ls {
		if err := l.Err(); err != nil {
			t.Fatalf("%s lost: %v", l.Resource(), err)
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	again, err := c.AcquireAll(t.Context(), []string{"stock", "audit"}, fence.WithHolder("other"))
	if err != nil || again[0].Resource() != "stock" || again[0].Token() <= ls[1].Token() {
		t.Fatalf("after the release: %v, %v", again, err)
	}
}
