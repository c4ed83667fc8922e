package auth

import (
	"errors"
	"strings"
	"testing"

	"github.com/fence-lock/fence"
)

func TestTablePrincipalAndCheckName(t *testing.T) {
	tab, err := Parse(strings.NewReader("alice " + HashToken("a") + " lock:orders/\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := tab.Principal("alice"); !ok || p.Name != "alice" {
		t.Errorf("Principal(alice) = %v, %v", p, ok)
	}
	if _, ok := tab.Principal("bob"); ok {
		t.Error("Principal(bob) found")
	}
	if _, ok := (*Table)(nil).Principal("alice"); ok {
		t.Error("nil table found a principal")
	}
	var r Reloader
	if _, err := r.CheckName("alice", "lock", "orders/1"); !errors.Is(err, fence.ErrUnauthorized) {
		t.Errorf("CheckName before Load: %v", err)
	}
	r.cur.Store(tab)
	if _, err := r.CheckName("alice", "lock", "orders/1"); err != nil {
		t.Errorf("CheckName(alice, lock, orders/1): %v", err)
	}
	if _, err := r.CheckName("alice", "write", "orders/1"); !errors.Is(err, fence.ErrForbidden) {
		t.Errorf("CheckName(alice, write): %v, want forbidden", err)
	}
	if _, err := r.CheckName("bob", "lock", "orders/1"); !errors.Is(err, fence.ErrUnauthorized) {
		t.Errorf("CheckName(bob): %v, want unauthorized", err)
	}
}
