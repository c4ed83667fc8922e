package lock_test

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/memory"
	"github.com/fence-lock/fence/lock"
)

func openSigned(t *testing.T, db *memory.DB, k *fence.SigningKey) *lock.Service {
	t.Helper()
	s := lock.NewService(db)
	s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s.Signer = k
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newKey(t *testing.T) (*fence.SigningKey, fence.KeySet) {
	t.Helper()
	k, err := fence.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := k.Public()
	return &k, fence.KeySet{pub.ID: pub.Key}
}

// verify checks that l carries a sequencer that ks accepts for l's resource
// and token, with l's holder and expiry.
func verify(t *testing.T, ks fence.KeySet, l fence.Lease, expires time.Time) {
	t.Helper()
	if l.Sequencer == "" {
		t.Fatalf("Lease %+v has no sequencer", l)
	}
	seq, err := ks.Verify(l.Sequencer, l.Resource, l.Token)
	if err != nil {
		t.Fatalf("Verify(%q): %v", l.Sequencer, err)
	}
	if seq.Holder != l.Holder || !seq.Expires.Equal(expires.Truncate(time.Millisecond)) {
		t.Fatalf("sequencer %+v, want holder %s, expires %v", seq, l.Holder, expires)
	}
}

func TestService_Sequencer(t *testing.T) {
	t.Run("Grant", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			k, ks := newKey(t)
			s := openSigned(t, memory.New(), k)
			l := acquire(t, s, "orders", "a", 10*time.Second)
			verify(t, ks, l, l.Expires)
			if _, err := ks.Verify(l.Sequencer, "stock", l.Token); !errors.Is(err, fence.ErrInvalidSequencer) {
				t.Fatalf("Verify for another resource: err=%v, want ErrInvalidSequencer", err)
			}
			if _, err := ks.Verify(l.Sequencer, "orders", l.Token+1); !errors.Is(err, fence.ErrInvalidSequencer) {
				t.Fatalf("Verify for another token: err=%v, want ErrInvalidSequencer", err)
			}
		})
	})

	t.Run("RetryAndRenewKeepIt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			k, ks := newKey(t)
			s := openSigned(t, memory.New(), k)
			first := acquire(t, s, "orders", "a", 10*time.Second)
			time.Sleep(2 * time.Second)
			again := acquire(t, s, "orders", "a", 10*time.Second)
			if again.Sequencer != first.Sequencer {
				t.Fatalf("retry: Sequencer=%q, want the grant's %q", again.Sequencer, first.Sequencer)
			}
			time.Sleep(2 * time.Second)
			renewed, err := s.Renew(t.Context(), "orders", first.Token, 0)
			if err != nil {
				t.Fatal(err)
			}
			if renewed.Sequencer != first.Sequencer {
				t.Fatalf("renew: Sequencer=%q, want the grant's %q", renewed.Sequencer, first.Sequencer)
			}
			verify(t, ks, renewed, first.Expires) // the expiry of the grant
		})
	})

	t.Run("Waiter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			k, ks := newKey(t)
			s := openSigned(t, memory.New(), k)
			a := acquire(t, s, "orders", "a", time.Second)
			l, err := s.Acquire(t.Context(), "orders", "b", 10*time.Second, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if l.Token != a.Token+1 {
				t.Fatalf("Token=%d, want %d", l.Token, a.Token+1)
			}
			verify(t, ks, l, l.Expires)
		})
	})

	t.Run("Restart", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			k, ks := newKey(t)
			db := memory.New()
			s1 := openSigned(t, db, k)
			a := acquire(t, s1, "orders", "a", 10*time.Second)
			s1.Close()
			time.Sleep(time.Second)
			s2 := openSigned(t, db, k)
			again := acquire(t, s2, "orders", "a", 10*time.Second)
			if again.Token != a.Token {
				t.Fatalf("Token=%d, want %d", again.Token, a.Token)
			}
			verify(t, ks, again, again.Expires) // signed at the restore, with its new expiry
		})
	})

	t.Run("NoSigner", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := open(t, memory.New())
			l := acquire(t, s, "orders", "a", 10*time.Second)
			if l.Sequencer != "" {
				t.Fatalf("Sequencer=%q, want none without a Signer", l.Sequencer)
			}
			r, err := s.Renew(t.Context(), "orders", l.Token, 0)
			if err != nil || r.Sequencer != "" {
				t.Fatalf("Renew: %+v, %v; want no sequencer", r, err)
			}
		})
	})

	t.Run("BadSigner", func(t *testing.T) {
		s := lock.NewService(memory.New())
		s.Signer = &fence.SigningKey{ID: "k"}
		if err := s.Open(t.Context()); err == nil {
			s.Close()
			t.Fatal("Open with a key without a private key: err=nil")
		}
	})
}
