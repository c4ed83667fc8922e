package lock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/memory"
	"github.com/fence-lock/fence/lock"
)

// as returns a context of the test on behalf of principal owner.
func as(t *testing.T, owner string) context.Context {
	return fence.WithOwner(t.Context(), owner)
}

// wantForbidden fails the test unless err wraps fence.ErrForbidden and, if
// token is not 0, does not name token: a refused acquire must not leak it.
func wantForbidden(t *testing.T, what string, err error, token fence.Token) {
	t.Helper()
	if !errors.Is(err, fence.ErrForbidden) {
		t.Fatalf("%s: err=%v, want ErrForbidden", what, err)
	}
	if token != 0 && strings.Contains(err.Error(), strconv.FormatUint(uint64(token), 10)) {
		t.Fatalf("%s: err=%q names token %d", what, err, token)
	}
}

// wantHeld fails the test unless resource is held with token until expires.
func wantHeld(t *testing.T, s *lock.Service, resource string, token fence.Token, expires time.Time) {
	t.Helper()
	st, err := s.Status(t.Context(), resource)
	if err != nil || !st.Held || st.Token != token || !st.Expires.Equal(expires) {
		t.Fatalf("Status=%+v, %v; want held with token %d until %v", st, err, token, expires)
	}
}

// waiting returns the acquires waiting for resource, which must be held.
func waiting(t *testing.T, s *lock.Service, resource string) int {
	t.Helper()
	locks, _, err := s.List(t.Context(), resource, "", fence.MaxListLimit)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range locks {
		if l.Resource == resource {
			return l.Waiters
		}
	}
	t.Fatalf("List: %q is not held", resource)
	return 0
}

// TestService_Owner checks that a lease belongs to the principal that took
// it (fence.OwnerOf the acquire's ctx): another principal can neither take
// its token by acquiring as its holder, nor renew nor release it.
func TestService_Owner(t *testing.T) {
	// The attack: acquire as another principal's holder to get its token
	// and refresh its TTL. Refused at once: no token, no refresh, no wait.
	t.Run("CrossPrincipalRetry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := open(t, memory.New())
			a, err := s.Acquire(as(t, "alice"), "r", "h", 10*time.Second, 0)
			if err != nil || a.Owner != "alice" {
				t.Fatalf("Acquire as alice=%+v, %v; want owner alice", a, err)
			}
			time.Sleep(5 * time.Second)
			for _, c := range []struct {
				name string
				ctx  context.Context
				wait time.Duration
				ttl  time.Duration
			}{
				{"bob", as(t, "bob"), 0, time.Hour},
				{"bobWaiting", as(t, "bob"), time.Minute, time.Hour},
				{"noOwner", t.Context(), 0, 10 * time.Millisecond},
			} {
				start := time.Now()
				l, err := s.Acquire(c.ctx, "r", "h", c.ttl, c.wait)
				wantForbidden(t, c.name, err, a.Token)
				if l != (fence.Lease{}) {
					t.Fatalf("%s: Lease=%+v, want none", c.name, l)
				}
				if waited := time.Since(start); waited != 0 {
					t.Fatalf("%s: waited %v, want an answer at once", c.name, waited)
				}
				wantHeld(t, s, "r", a.Token, a.Expires) // TTL not refreshed
				if n := waiting(t, s, "r"); n != 0 {
					t.Fatalf("%s: %d waiters, want none (not queued)", c.name, n)
				}
			}
			if st, _ := s.Status(t.Context(), "r"); st.LastToken != a.Token {
				t.Fatalf("LastToken=%d, want %d (nothing granted)", st.LastToken, a.Token)
			}
			// Alice's lease runs out when she said, not when bob asked.
			time.Sleep(5 * time.Second)
			if st, _ := s.Status(t.Context(), "r"); st.Held {
				t.Fatalf("Status=%+v after alice's TTL, want free", st)
			}
		})
	})

	t.Run("SamePrincipalRetry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := open(t, memory.New())
			first, err := s.Acquire(as(t, "alice"), "r", "h", 10*time.Second, 0)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Second)
			again, err := s.Acquire(as(t, "alice"), "r", "h", 20*time.Second, 0)
			if err != nil || again.Token != first.Token || again.Owner != "alice" {
				t.Fatalf("retry=%+v, %v; want token %d owned by alice", again, err, first.Token)
			}
			wantHeld(t, s, "r", first.Token, time.Now().Add(20*time.Second))
		})
	})

	// Renew and release by another principal (or by a call without one)
	// change nothing: the owner still renews and releases its lease.
	t.Run("CrossPrincipalRenewRelease", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			db := memory.New()
			s := open(t, db)
			a, err := s.Acquire(as(t, "alice"), "r", "h", 10*time.Second, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, ctx := range []context.Context{as(t, "bob"), t.Context()} {
				l, err := s.Renew(ctx, "r", a.Token, 10*time.Millisecond)
				wantForbidden(t, "Renew", err, 0)
				if l != (fence.Lease{}) {
					t.Fatalf("Renew: Lease=%+v, want none", l)
				}
				wantForbidden(t, "Release", s.Release(ctx, "r", a.Token), 0)
				wantHeld(t, s, "r", a.Token, a.Expires)
			}
			leases, _, err := db.Leases(t.Context())
			if err != nil || len(leases) != 1 || leases[0].TTL != 10*time.Second || leases[0].Owner != "alice" {
				t.Fatalf("Leases=%+v, %v; want alice's lease as granted", leases, err)
			}
			// A stale token is lost, whoever presents it.
			if _, err := s.Renew(as(t, "bob"), "r", a.Token+1, 0); !errors.Is(err, fence.ErrLeaseLost) {
				t.Fatalf("Renew with a wrong token: err=%v, want ErrLeaseLost", err)
			}
			time.Sleep(time.Second)
			if _, err := s.Renew(as(t, "alice"), "r", a.Token, time.Minute); err != nil {
				t.Fatalf("alice renews: %v", err)
			}
			wantHeld(t, s, "r", a.Token, time.Now().Add(time.Minute))
			if err := s.Release(as(t, "alice"), "r", a.Token); err != nil {
				t.Fatalf("alice releases: %v", err)
			}
			if st, _ := s.Status(t.Context(), "r"); st.Held {
				t.Fatalf("Status=%+v after alice's release, want free", st)
			}
		})
	})

	// Without owners, as without auth, anyone renews and releases, and an
	// acquire by the same holder is a retry.
	t.Run("NoOwner", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			db := memory.New()
			s := open(t, db)
			a := acquire(t, s, "r", "h", 10*time.Second)
			if a.Owner != "" {
				t.Fatalf("Owner=%q, want none", a.Owner)
			}
			again := acquire(t, s, "r", "h", 20*time.Second)
			if again.Token != a.Token {
				t.Fatalf("retry: Token=%d, want %d", again.Token, a.Token)
			}
			if _, err := s.Renew(context.Background(), "r", a.Token, time.Minute); err != nil {
				t.Fatalf("Renew: %v", err)
			}
			if err := s.Release(context.Background(), "r", a.Token); err != nil {
				t.Fatalf("Release: %v", err)
			}
		})
	})

	// The upgrade rule: a lease without an owner (taken without auth, or
	// recorded before owners were) may be renewed and released by any
	// principal, and keeps no owner.
	t.Run("LeaseWithoutOwner", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := open(t, memory.New())
			a := acquire(t, s, "r", "h", 10*time.Second)
			again, err := s.Acquire(as(t, "bob"), "r", "h", 10*time.Second, 0)
			if err != nil || again.Token != a.Token || again.Owner != "" {
				t.Fatalf("retry as bob=%+v, %v; want token %d, no owner", again, err, a.Token)
			}
			if l, err := s.Renew(as(t, "alice"), "r", a.Token, time.Minute); err != nil || l.Owner != "" {
				t.Fatalf("Renew as alice=%+v, %v; want renewed, no owner", l, err)
			}
			if err := s.Release(as(t, "bob"), "r", a.Token); err != nil {
				t.Fatalf("Release as bob: %v", err)
			}
		})
	})

	// A lease handed to a waiter is the waiter's, whether the release (in
	// the releaser's ctx, one Ledger.Handoff), the expiry (in the service's
	// ctx, one Ledger.Handoff) or a revoke (in the service's ctx, a
	// Ledger.Grant after the revoke) hands it off.
	t.Run("Handoff", func(t *testing.T) {
		for _, by := range []string{"Release", "Expiry", "Revoke"} {
			t.Run(by, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					db := memory.New()
					s := open(t, db)
					a, err := s.Acquire(as(t, "alice"), "r", "a", time.Second, 0)
					if err != nil {
						t.Fatal(err)
					}
					bC := make(chan fence.Lease, 1)
					go func() {
						l, err := s.Acquire(as(t, "bob"), "r", "b", time.Minute, time.Minute)
						if err != nil {
							t.Errorf("bob: %v", err)
						}
						bC <- l
					}()
					synctest.Wait()
					want := a.Token + 1
					switch by {
					case "Release":
						if err := s.Release(as(t, "alice"), "r", a.Token); err != nil {
							t.Fatal(err)
						}
					case "Revoke":
						if _, err := s.Revoke(as(t, "admin"), "r"); err != nil {
							t.Fatal(err)
						}
						want++ // the revoke issued one to nobody
					}
					b := <-bC
					if b.Holder != "b" || b.Owner != "bob" || b.Token != want {
						t.Fatalf("bob's Lease=%+v, want b's, owned by bob, token %d", b, want)
					}
					leases, _, err := db.Leases(t.Context())
					if err != nil || len(leases) != 1 || leases[0].Owner != "bob" {
						t.Fatalf("Leases=%+v, %v; want bob's recorded", leases, err)
					}
					_, err = s.Renew(as(t, "alice"), "r", b.Token, 0)
					wantForbidden(t, "alice renews bob's lease", err, 0)
					if _, err := s.Acquire(as(t, "alice"), "r", "b", time.Minute, 0); !errors.Is(err, fence.ErrForbidden) {
						t.Fatalf("alice acquires as b: err=%v, want ErrForbidden", err)
					}
					if _, err := s.Renew(as(t, "bob"), "r", b.Token, 0); err != nil {
						t.Fatalf("bob renews: %v", err)
					}
				})
			})
		}
	})

	// Waiters of one holder share the grant only if they are of one
	// principal: a waiter of another, queued under the same holder name,
	// gets ErrForbidden, not the token, when the lease is handed off.
	t.Run("WaitersOfOneHolder", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := open(t, memory.New())
			x, err := s.Acquire(as(t, "xavier"), "r", "x", time.Minute, 0)
			if err != nil {
				t.Fatal(err)
			}
			type answer struct {
				l   fence.Lease
				err error
			}
			wait := func(owner string) chan answer {
				c := make(chan answer, 1)
				go func() {
					l, err := s.Acquire(as(t, owner), "r", "h", time.Minute, time.Minute)
					c <- answer{l, err}
				}()
				synctest.Wait()
				return c
			}
			bob, mallory, bobRetry := wait("bob"), wait("mallory"), wait("bob")
			if err := s.Release(as(t, "xavier"), "r", x.Token); err != nil {
				t.Fatal(err)
			}
			b, r := <-bob, <-bobRetry
			if b.err != nil || b.l.Owner != "bob" || r.err != nil || r.l.Token != b.l.Token {
				t.Fatalf("bob=%+v, bob's retry=%+v; want one lease owned by bob", b, r)
			}
			m := <-mallory
			wantForbidden(t, "mallory", m.err, b.l.Token)
			if m.l != (fence.Lease{}) {
				t.Fatalf("mallory: Lease=%+v, want none", m.l)
			}
			if n := waiting(t, s, "r"); n != 0 {
				t.Fatalf("%d waiters, want none", n)
			}
		})
	})
}

// TestService_OwnerSurvivesRestart checks that the owner is recorded with the
// lease: after the service and its ledger are closed and reopened, the
// restored lease still refuses another principal.
func TestService_OwnerSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	db, s := openBolt(t, dir)
	a, err := s.Acquire(as(t, "alice"), "r", "h", time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, s = openBolt(t, dir)
	defer db.Close()
	defer s.Close()
	leases, _, err := db.Leases(t.Context())
	if err != nil || len(leases) != 1 || leases[0].Owner != "alice" || leases[0].Token != a.Token {
		t.Fatalf("Leases after reopen=%+v, %v; want alice's lease", leases, err)
	}
	_, err = s.Renew(as(t, "bob"), "r", a.Token, 10*time.Millisecond)
	wantForbidden(t, "bob renews after restart", err, 0)
	wantForbidden(t, "bob releases after restart", s.Release(as(t, "bob"), "r", a.Token), 0)
	_, err = s.Acquire(as(t, "bob"), "r", "h", time.Hour, 0)
	wantForbidden(t, "bob acquires as h after restart", err, a.Token)
	l, err := s.Renew(as(t, "alice"), "r", a.Token, 0)
	if err != nil || l.Owner != "alice" {
		t.Fatalf("alice renews after restart=%+v, %v; want her lease", l, err)
	}
	if err := s.Release(as(t, "alice"), "r", a.Token); err != nil {
		t.Fatalf("alice releases after restart: %v", err)
	}
}
