package fake

import (
	"errors"
	"testing"
	"time"

	"github.com/fence-lock/fence"
)

// TestService_Owner checks that the fake keeps lock.Service's owner rule, so
// that tests of the HTTP API over it see the same answers: another owner's
// same-holder acquire, renew and release are forbidden and change nothing;
// the owner's own, and calls on a lease without an owner, are not.
func TestService_Owner(t *testing.T) {
	f := New()
	alice, bob := fence.WithOwner(t.Context(), "alice"), fence.WithOwner(t.Context(), "bob")
	a, err := f.Acquire(alice, "r", "h", time.Minute, 0)
	if err != nil || a.Owner != "alice" {
		t.Fatalf("Acquire as alice=%+v, %v; want owner alice", a, err)
	}
	if l, err := f.Acquire(bob, "r", "h", time.Hour, 0); !errors.Is(err, fence.ErrForbidden) || l.Token != 0 {
		t.Fatalf("Acquire as bob=%+v, %v; want ErrForbidden and no token", l, err)
	}
	if _, err := f.Renew(bob, "r", a.Token, time.Hour); !errors.Is(err, fence.ErrForbidden) {
		t.Fatalf("Renew as bob: err=%v, want ErrForbidden", err)
	}
	if err := f.Release(t.Context(), "r", a.Token); !errors.Is(err, fence.ErrForbidden) {
		t.Fatalf("Release without an owner: err=%v, want ErrForbidden", err)
	}
	if st, _ := f.Status(t.Context(), "r"); !st.Held || st.Token != a.Token || !st.Expires.Equal(a.Expires) {
		t.Fatalf("Status=%+v, want alice's lease unchanged", st)
	}
	if l, err := f.Acquire(alice, "r", "h", time.Hour, 0); err != nil || l.Token != a.Token {
		t.Fatalf("retry as alice=%+v, %v; want token %d", l, err, a.Token)
	}
	if err := f.Release(alice, "r", a.Token); err != nil {
		t.Fatalf("Release as alice: %v", err)
	}
	// Without an owner, anyone renews and releases.
	n, err := f.Acquire(t.Context(), "n", "h", time.Minute, 0)
	if err != nil || n.Owner != "" {
		t.Fatalf("Acquire without an owner=%+v, %v", n, err)
	}
	if _, err := f.Renew(bob, "n", n.Token, 0); err != nil {
		t.Fatalf("Renew as bob of a lease without an owner: %v", err)
	}
	if err := f.Release(alice, "n", n.Token); err != nil {
		t.Fatalf("Release as alice of a lease without an owner: %v", err)
	}
}

// TestService_PromotesWhatItDoesNotCount checks that an operation the fake
// does not wrap reaches the real lock service uncounted (List here), so that
// a new operation works through the fake without an edit of it, while the
// wrapped ones count and fail as told.
func TestService_PromotesWhatItDoesNotCount(t *testing.T) {
	f := New()
	var _ fence.Lister = f
	l, err := f.Acquire(t.Context(), "r", "h", time.Minute, 0)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	locks, more, err := f.List(t.Context(), "", "", 10)
	if err != nil || more || len(locks) != 1 || locks[0].Token != l.Token {
		t.Fatalf("List=%+v, %v, %v; want the one lease of token %d", locks, more, err, l.Token)
	}
	boom := errors.New("boom")
	f.SetErr(boom)
	if _, err := f.Status(t.Context(), "r"); !errors.Is(err, boom) {
		t.Fatalf("Status with Err set: %v, want boom", err)
	}
	if _, err := f.PutUnfenced(t.Context(), "r", "k", []byte("v"), fence.Cond{}); !errors.Is(err, boom) {
		t.Fatalf("PutUnfenced with Err set: %v, want boom", err)
	}
	if n := f.Mutations(); n != 2 {
		t.Fatalf("Mutations=%d, want 2 (the acquire and the unfenced put)", n)
	}
	if f.Calls("Acquire") != 1 || f.Calls("Status") != 1 || f.Calls("List") != 0 {
		t.Fatalf("calls: Acquire %d, Status %d, List %d; want 1, 1, 0", f.Calls("Acquire"), f.Calls("Status"), f.Calls("List"))
	}
}
