// Package fencetest is a conformance suite for fence's state backends: every
// implementation of fence.Store and fence.Ledger runs it from its own tests,
// as file systems run testing/fstest.TestFS:
//
//	func TestStore(t *testing.T)  { fencetest.TestStore(t, open) }
//	func TestLedger(t *testing.T) { fencetest.TestLedger(t, open) }
//
// Replicated engines (etcd, PostgreSQL) run TestReplicated, which adds the
// takeover by another server to those suites; durable embedded engines run
// TestKill9; guards run TestGuard.
//
// The suites check the rules of API.md ("Fenced storage") and the invariants of
// DESIGN.md through the Go interfaces only. Tokens come only from
// Ledger.Grant, as they do in a running service, so every accepted write
// carries a token the ledger issued.
//
// It is not a mock or a fake: it holds no implementation of its own.
package fencetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fence-lock/fence"
)

// Backend is the state a lock service and fenced storage share: grants raise
// the fence that writes are checked against.
type Backend interface {
	fence.Store
	fence.Ledger
}

// testTTL is the TTL of the leases the suites grant. Nothing waits for it.
const testTTL = 10 * time.Second

// grant issues a token for resource to holder and fails the test on error.
func grant(t *testing.T, b Backend, resource, holder string) fence.Token {
	t.Helper()
	tok, err := b.Grant(t.Context(), resource, holder, testTTL, time.Now().Add(testTTL))
	if err != nil {
		t.Fatalf("Grant(%q, %q): %v", resource, holder, err)
	}
	return tok
}

// grantN grants resource n times and returns the last token.
func grantN(t *testing.T, b Backend, resource, holder string, n int) fence.Token {
	t.Helper()
	var tok fence.Token
	for range n {
		tok = grant(t, b, resource, holder)
	}
	return tok
}

func put(t *testing.T, b Backend, resource, key, value string, token fence.Token, c fence.Cond) fence.WriteResult {
	t.Helper()
	res, err := b.Put(t.Context(), resource, key, []byte(value), token, c)
	if err != nil {
		t.Fatalf("Put(%q, %q, token %d, %+v): %v", resource, key, token, c, err)
	}
	return res
}

func del(t *testing.T, b Backend, resource, key string, token fence.Token, c fence.Cond) fence.WriteResult {
	t.Helper()
	res, err := b.Delete(t.Context(), resource, key, token, c)
	if err != nil {
		t.Fatalf("Delete(%q, %q, token %d, %+v): %v", resource, key, token, c, err)
	}
	return res
}

func get(t *testing.T, b Backend, resource, key string) fence.Item {
	t.Helper()
	item, err := b.Get(t.Context(), resource, key)
	if err != nil {
		t.Fatalf("Get(%q, %q): %v", resource, key, err)
	}
	return item
}

func txn(t *testing.T, b Backend, tx *fence.Txn) fence.Rev {
	t.Helper()
	rev, err := b.Txn(t.Context(), tx)
	if err != nil {
		t.Fatalf("Txn(%+v): %v", tx, err)
	}
	return rev
}

func fenceOf(t *testing.T, b Backend, resource string) fence.Token {
	t.Helper()
	f, err := b.Fence(t.Context(), resource)
	if err != nil {
		t.Fatalf("Fence(%q): %v", resource, err)
	}
	return f
}

func lastToken(t *testing.T, b Backend, resource string) fence.Token {
	t.Helper()
	tok, err := b.LastToken(t.Context(), resource)
	if err != nil {
		t.Fatalf("LastToken(%q): %v", resource, err)
	}
	return tok
}

// wantItem checks that resource/key holds value, written at rev with token.
func wantItem(t *testing.T, b Backend, resource, key, value string, rev fence.Rev, token fence.Token) {
	t.Helper()
	item := get(t, b, resource, key)
	if item.Resource != resource || item.Key != key {
		t.Fatalf("Get(%q, %q): Resource, Key=%q, %q, want %q, %q", resource, key, item.Resource, item.Key, resource, key)
	}
	if string(item.Value) != value {
		t.Fatalf("Get(%q, %q): Value=%q, want %q", resource, key, item.Value, value)
	}
	if item.Rev != rev {
		t.Fatalf("Get(%q, %q): Rev=%d, want %d", resource, key, item.Rev, rev)
	}
	if item.Token != token {
		t.Fatalf("Get(%q, %q): Token=%d, want %d", resource, key, item.Token, token)
	}
}

// wantAbsent checks that resource/key does not exist.
func wantAbsent(t *testing.T, b Backend, resource, key string) {
	t.Helper()
	item, err := b.Get(t.Context(), resource, key)
	if !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get(%q, %q)=%+v, %v; want ErrNotFound", resource, key, item, err)
	}
}

func wantFence(t *testing.T, b Backend, resource string, want fence.Token) {
	t.Helper()
	if got := fenceOf(t, b, resource); got != want {
		t.Fatalf("Fence(%q)=%d, want %d", resource, got, want)
	}
}

func wantResult(t *testing.T, what string, got fence.WriteResult, rev fence.Rev, lastFence fence.Token, holder string) {
	t.Helper()
	if got.Rev != rev {
		t.Fatalf("%s: Rev=%d, want %d", what, got.Rev, rev)
	}
	if got.LastFence != lastFence {
		t.Fatalf("%s: LastFence=%d, want %d", what, got.LastFence, lastFence)
	}
	if got.Holder != holder {
		t.Fatalf("%s: Holder=%q, want %q", what, got.Holder, holder)
	}
}

// wantFenced checks that err is a *fence.FencedError with these details.
func wantFenced(t *testing.T, err error, resource string, presented, lastFence fence.Token) {
	t.Helper()
	var fe *fence.FencedError
	if !errors.As(err, &fe) {
		t.Fatalf("err=%v, want *fence.FencedError", err)
	}
	if !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("errors.Is(%v, ErrFenced)=false, want true", err)
	}
	if fe.Resource != resource {
		t.Fatalf("FencedError.Resource=%q, want %q", fe.Resource, resource)
	}
	if fe.Presented != presented {
		t.Fatalf("FencedError.Presented=%d, want %d", fe.Presented, presented)
	}
	if fe.LastFence != lastFence {
		t.Fatalf("FencedError.LastFence=%d, want %d", fe.LastFence, lastFence)
	}
}

// wantNotIssued checks that err is a *fence.TokenNotIssuedError with these details.
func wantNotIssued(t *testing.T, err error, resource string, presented, last fence.Token) {
	t.Helper()
	var ne *fence.TokenNotIssuedError
	if !errors.As(err, &ne) {
		t.Fatalf("err=%v, want *fence.TokenNotIssuedError", err)
	}
	if !errors.Is(err, fence.ErrTokenNotIssued) {
		t.Fatalf("errors.Is(%v, ErrTokenNotIssued)=false, want true", err)
	}
	if ne.Resource != resource {
		t.Fatalf("TokenNotIssuedError.Resource=%q, want %q", ne.Resource, resource)
	}
	if ne.Presented != presented {
		t.Fatalf("TokenNotIssuedError.Presented=%d, want %d", ne.Presented, presented)
	}
	if ne.LastToken != last {
		t.Fatalf("TokenNotIssuedError.LastToken=%d, want %d", ne.LastToken, last)
	}
}

// wantLeaseLost checks that err is a *fence.LeaseLostError with these details.
func wantLeaseLost(t *testing.T, err error, resource string, presented, current fence.Token) {
	t.Helper()
	var le *fence.LeaseLostError
	if !errors.As(err, &le) {
		t.Fatalf("err=%v, want *fence.LeaseLostError", err)
	}
	if !errors.Is(err, fence.ErrLeaseLost) {
		t.Fatalf("errors.Is(%v, ErrLeaseLost)=false, want true", err)
	}
	if le.Resource != resource || le.Presented != presented || le.Current != current {
		t.Fatalf("LeaseLostError=%+v, want {Resource:%s Presented:%d Current:%d}", *le, resource, presented, current)
	}
}

// wantIs checks that err matches target, and no other error of the API
// (a precondition failure must not also claim to be fenced).
func wantIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err=%v, want %v", err, target)
	}
	for _, other := range apiErrors {
		if other != target && errors.Is(err, other) {
			t.Fatalf("err=%v matches %v too, want only %v", err, other, target)
		}
	}
}

var apiErrors = []error{
	fence.ErrFenced, fence.ErrTokenNotIssued, fence.ErrLeaseLost, fence.ErrFenceRequired,
	fence.ErrInvalidToken, fence.ErrPreconditionFailed, fence.ErrNotFound, fence.ErrBadRequest,
	fence.ErrTooLarge,
}

// observed is what a test can observe of a backend through the interfaces.
type observed struct {
	fences     map[string]fence.Token
	lastTokens map[string]fence.Token
	items      map[string]string // "resource/key" -> description; absent keys are missing
}

// observe reads the fences and last tokens of resources and the items of
// keys, given as "resource/key" pairs.
func observe(t *testing.T, b Backend, resources []string, keys [][2]string) observed {
	t.Helper()
	s := observed{fences: map[string]fence.Token{}, lastTokens: map[string]fence.Token{}, items: map[string]string{}}
	for _, r := range resources {
		s.fences[r] = fenceOf(t, b, r)
		s.lastTokens[r] = lastToken(t, b, r)
	}
	for _, k := range keys {
		item, err := b.Get(t.Context(), k[0], k[1])
		switch {
		case errors.Is(err, fence.ErrNotFound):
		case err != nil:
			t.Fatalf("Get(%q, %q): %v", k[0], k[1], err)
		default:
			s.items[k[0]+"/"+k[1]] = fmt.Sprintf("value %q rev %d token %d", item.Value, item.Rev, item.Token)
		}
	}
	return s
}

// same fails the test where now differs from before.
func (before observed) same(t *testing.T, now observed) {
	t.Helper()
	for r, f := range before.fences {
		if now.fences[r] != f {
			t.Fatalf("Fence(%q)=%d, want %d (unchanged)", r, now.fences[r], f)
		}
		if now.lastTokens[r] != before.lastTokens[r] {
			t.Fatalf("LastToken(%q)=%d, want %d (unchanged)", r, now.lastTokens[r], before.lastTokens[r])
		}
	}
	for k, v := range before.items {
		if now.items[k] != v {
			t.Fatalf("Get(%s)=%q, want %q (unchanged)", k, now.items[k], v)
		}
	}
	for k, v := range now.items {
		if _, ok := before.items[k]; !ok {
			t.Fatalf("Get(%s)=%q, want not found (unchanged)", k, v)
		}
	}
}
