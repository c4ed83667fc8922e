package etcd_test

import (
	"context"
	"github.com/fence-lock/fence/fencetest"
	"testing"

	"github.com/fence-lock/fence"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestGuard_Sequencer(t *testing.T) {
	g, data := newGuard(t)
	a := &guarded{g: g, data: data}
	write := func(ctx context.Context, resource string, token fence.Token, claim bool) error {
		if claim {
			return g.Claim(ctx, resource, token)
		}
		_, err := g.Apply(ctx, resource, token, clientv3.OpPut(a.key(resource, "k"), "v"))
		return err
	}
	read := func(resource string) bool { _, ok := a.Read(t, resource, "k"); return ok }
	fenceOf := func(resource string) fence.Token { return a.Fence(t, resource) }
	fencetest.TestGuardSequencers(t, func(ks fence.KeySet) { g.Keys = ks }, write, read, fenceOf)
}
