package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/fencetest"
)

// TestRevoke_Client revokes through client.API against the real lock
// service and bolt storage, and checks that the old holder is fenced at once.
func TestRevoke_Client(t *testing.T) {
	ctx := t.Context()
	c, err := client.NewAPI(fencetest.NewServer(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	var locker fence.Locker = c
	rv, ok := locker.(fence.Revoker)
	if !ok {
		t.Fatal("client.API is not a fence.Revoker")
	}
	a, err := c.Acquire(ctx, "orders", "a", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "orders", "total", []byte("1"), a.Token, fence.Cond{}); err != nil {
		t.Fatal(err)
	}
	res, err := rv.Revoke(ctx, "orders")
	if err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if res.Resource != "orders" || res.Revoked != a.Token || res.LastFence != a.Token+1 {
		t.Fatalf("RevokeResult=%+v, want {orders %d %d}", res, a.Token, a.Token+1)
	}
	_, err = c.Put(ctx, "orders", "total", []byte("2"), a.Token, fence.Cond{})
	var fenced *fence.FencedError
	if !errors.As(err, &fenced) || fenced.Presented != a.Token || fenced.LastFence != res.Revoked+1 {
		t.Fatalf("Put by the revoked holder: err=%v, want FencedError{Presented: %d, LastFence: %d}", err, a.Token, res.Revoked+1)
	}
	_, err = c.Renew(ctx, "orders", a.Token, 0)
	var lost *fence.LeaseLostError
	if !errors.As(err, &lost) || lost.Current != 0 {
		t.Fatalf("Renew by the revoked holder: err=%v, want LeaseLostError{Current: 0}", err)
	}
	b, err := c.Acquire(ctx, "orders", "b", time.Minute, 0)
	if err != nil || b.Token <= res.LastFence {
		t.Fatalf("Acquire after revoke=%+v, %v; want a token > %d", b, err, res.LastFence)
	}
	if _, err := rv.Revoke(ctx, "bad\x00name"); !errors.Is(err, fence.ErrBadRequest) {
		t.Fatalf("Revoke of a bad name: err=%v, want ErrBadRequest", err)
	}
}

func TestRevokeCmd(t *testing.T) {
	addr := fencetest.NewServer(t, nil)
	var out, errOut bytes.Buffer
	err := revokeCmd(t.Context(), []string{"free", "--addr", addr, "-o", "json"}, stdio{strings.NewReader(""), &out, &errOut})
	if err != nil {
		t.Fatalf("revoke: %v; stderr %s", err, errOut.String())
	}
	var got revokeJSON
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	if got != (revokeJSON{Resource: "free", RevokedToken: 0, LastFence: 1}) {
		t.Fatalf("output=%+v, want {free 0 1}", got)
	}
	if code := run(t.Context(), []string{"revoke"}, stdio{strings.NewReader(""), io.Discard, io.Discard}); code != exitUsage {
		t.Fatalf("fence revoke without RESOURCE: exit %d, want %d", code, exitUsage)
	}
}
