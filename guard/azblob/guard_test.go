package azblob_test

import (
	"errors"
	"testing"

	"github.com/fence-lock/fence/fencetest"
	azguard "github.com/fence-lock/fence/guard/azblob"
	"github.com/fence-lock/fence/guard/object"
)

// newGuard returns a guard under a prefix of its own in the tests'
// container, trusting the store (the suite checks it).
func newGuard(tb testing.TB) *object.Guard {
	tb.Helper()
	sasURL, prefix := newContainer(tb)
	g := azguard.NewGuard(newClient(tb, sasURL))
	g.Prefix, g.TrustEndpoint = prefix, true
	return g
}

// TestGuard runs the object guards' conformance suite on Azurite.
func TestGuard(t *testing.T) {
	fencetest.TestObjectGuard(t, "azblob", newGuard)
}

// TestCheck_HeadersDropped: through a proxy that drops the conditional
// headers (the negative control) the check fails, and the guard writes
// nothing.
func TestCheck_HeadersDropped(t *testing.T) {
	sasURL, prefix := newContainer(t)
	g := azguard.NewGuard(newClient(t, headerDropper(t, sasURL)))
	g.Prefix = prefix
	rep, err := g.Check(t.Context())
	if !errors.Is(err, object.ErrEndpoint) {
		t.Fatalf("Check through a proxy that drops If-Match and If-None-Match: %v, want ErrEndpoint", err)
	}
	if len(rep.Failed()) < 5 {
		t.Fatalf("only %d cases failed: %+v", len(rep.Failed()), rep.Failed())
	}
	t.Logf("refused: %v", err)
	if err := g.PutObject(t.Context(), "k", []byte("v"), 1); !errors.Is(err, object.ErrEndpoint) {
		t.Fatalf("PutObject through it: %v, want ErrEndpoint", err)
	}
}
