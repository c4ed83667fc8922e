package redis

import (
	"context"
	"github.com/fence-lock/fence/fencetest"
	"testing"

	"github.com/fence-lock/fence"
)

func TestGuard_Sequencer(t *testing.T) {
	c := newClient(t)
	a := guarded{g: NewGuard(c), c: c}
	write := func(ctx context.Context, resource string, token fence.Token, claim bool) error {
		if claim {
			return a.g.Claim(ctx, resource, token)
		}
		return a.g.Apply(ctx, resource, token, Set(Key(resource, "k"), []byte("v"), 0))
	}
	read := func(resource string) bool { _, ok := a.Read(t, resource, "k"); return ok }
	fenceOf := func(resource string) fence.Token { return a.Fence(t, resource) }
	fencetest.TestGuardSequencers(t, func(ks fence.KeySet) { a.g.Keys = ks }, write, read, fenceOf)
}
