package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/guard/etcd"
	"github.com/fence-lock/fence/guard/reject"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
	"google.golang.org/grpc"
)

// seq makes every test's keys distinct on the shared server.
var seq atomic.Int64

// newGuard returns a guard on cli whose fence keys, and the returned data
// prefix, are fresh: no other test uses them.
func newGuard(t testing.TB) (g *etcd.Guard, data string) {
	root := fmt.Sprintf("/fence-test/%d/%s/", seq.Add(1), url.PathEscape(t.Name()))
	g = etcd.NewGuard(cli)
	g.Prefix = root + "fences/"
	return g, root + "data/"
}

// guarded adapts a Guard to fencetest.Guarded: resource r's key k is the
// etcd key data + PathEscape(r) + "/" + k.
type guarded struct {
	g    *etcd.Guard
	data string
}

func (a *guarded) key(resource, key string) string {
	return a.data + url.PathEscape(resource) + "/" + key
}

func (a *guarded) Write(t *testing.T, resource string, token fence.Token, writes map[string][]byte) error {
	var ops []clientv3.Op
	for _, k := range slices.Sorted(mapKeys(writes)) {
		if v := writes[k]; v == nil {
			ops = append(ops, clientv3.OpDelete(a.key(resource, k)))
		} else {
			ops = append(ops, clientv3.OpPut(a.key(resource, k), string(v)))
		}
	}
	_, err := a.g.Apply(t.Context(), resource, token, ops...)
	return err
}

func (a *guarded) Read(t *testing.T, resource, key string) ([]byte, bool) {
	resp, err := cli.Get(t.Context(), a.key(resource, key))
	if err != nil {
		t.Fatalf("Get(%q): %v", a.key(resource, key), err)
	}
	if len(resp.Kvs) == 0 {
		return nil, false
	}
	return resp.Kvs[0].Value, true
}

func (a *guarded) Fence(t *testing.T, resource string) fence.Token {
	f, err := a.g.Fence(t.Context(), resource)
	if err != nil {
		t.Fatalf("Fence(%q): %v", resource, err)
	}
	return f
}

func mapKeys(m map[string][]byte) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestGuard(t *testing.T) {
	fencetest.TestGuard(t, func(t *testing.T) fencetest.Guarded {
		g, data := newGuard(t)
		return &guarded{g, data}
	})
}

func TestGuard_Apply(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		g, data := newGuard(t)
		ctx := t.Context()
		if _, err := cli.Put(ctx, data+"old", "1"); err != nil {
			t.Fatal(err)
		}
		resp, err := g.Apply(ctx, "orders", 5,
			clientv3.OpPut(data+"old", "2", clientv3.WithPrevKV()),
			clientv3.OpDelete(data+"gone"),
			clientv3.OpPut(data+"new", "3"))
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
		if !resp.Succeeded || len(resp.Responses) != 3 {
			t.Fatalf("Succeeded=%v, %d responses; want true, 3", resp.Succeeded, len(resp.Responses))
		}
		if prev := resp.Responses[0].GetResponsePut().GetPrevKv(); prev == nil || string(prev.Value) != "1" {
			t.Fatalf("PrevKv=%v, want the value 1", prev)
		}
		if resp.Responses[1].GetResponseDeleteRange() == nil {
			t.Fatalf("Responses[1]=%v, want a delete's response", resp.Responses[1])
		}
		got, err := cli.Get(ctx, data+"new")
		if err != nil || len(got.Kvs) != 1 || got.Kvs[0].ModRevision != resp.Header.Revision {
			t.Fatalf("Get(new)=%v, %v; want mod revision %d", got, err, resp.Header.Revision)
		}
		fk, err := cli.Get(ctx, g.FenceKey("orders"))
		if err != nil || len(fk.Kvs) != 1 || fk.Kvs[0].ModRevision != resp.Header.Revision {
			t.Fatalf("fence key %v, %v; want mod revision %d (the same revision as the write)", fk, err, resp.Header.Revision)
		}
	})

	t.Run("FenceKeyValue", func(t *testing.T) {
		g, _ := newGuard(t)
		if err := g.Claim(t.Context(), "orders", 42); err != nil {
			t.Fatal(err)
		}
		resp, err := cli.Get(t.Context(), g.FenceKey("orders"))
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "00000000000000000042" {
			t.Fatalf("fence key value %v, %v; want 00000000000000000042", resp, err)
		}
	})

	t.Run("ErrFenced", func(t *testing.T) {
		g, data := newGuard(t)
		ctx := t.Context()
		if _, err := g.Apply(ctx, "r", 100, clientv3.OpPut(data+"k", "B")); err != nil {
			t.Fatal(err)
		}
		before, err := cli.Get(ctx, data+"k")
		if err != nil {
			t.Fatal(err)
		}
		// 99 < 100, and 9 < 100 though "9" > "100" as strings: the encoding
		// must compare numerically.
		for _, stale := range []fence.Token{99, 9, 1} {
			resp, err := g.Apply(ctx, "r", stale, clientv3.OpPut(data+"k", "A"), clientv3.OpPut(data+"other", "A"))
			var fe *fence.FencedError
			if resp != nil || !errors.As(err, &fe) || *fe != (fence.FencedError{Resource: "r", Presented: stale, LastFence: 100}) {
				t.Fatalf("stale Apply(%d)=%v, %v; want *FencedError{r, %d, 100}", stale, resp, err, stale)
			}
		}
		after, err := cli.Get(ctx, data, clientv3.WithPrefix())
		if err != nil || len(after.Kvs) != 1 || string(after.Kvs[0].Value) != "B" || after.Header.Revision != before.Header.Revision {
			t.Fatalf("after rejections: %v, %v; want only k=B and revision %d unchanged", after.Kvs, err, before.Header.Revision)
		}
	})

	t.Run("OneRoundTrip", func(t *testing.T) {
		var mu sync.Mutex
		var calls []string
		count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			mu.Lock()
			calls = append(calls, method)
			mu.Unlock()
			return invoke(ctx, method, req, reply, cc, opts...)
		}
		c := newClient(t, clientv3.Config{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)}})
		fresh, data := newGuard(t)
		g := etcd.NewGuard(c)
		g.Prefix = fresh.Prefix
		for _, tc := range []struct {
			name  string
			token fence.Token
			err   error
		}{{"Absent", 5, nil}, {"Higher", 6, nil}, {"Equal", 6, nil}, {"Stale", 5, fence.ErrFenced}} {
			mu.Lock()
			calls = nil
			mu.Unlock()
			_, err := g.Apply(t.Context(), "r", tc.token, clientv3.OpPut(data+"k", tc.name))
			mu.Lock()
			n := slices.Clone(calls)
			mu.Unlock()
			if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
				t.Fatalf("%s: Apply(%d): %v, want %v", tc.name, tc.token, err, tc.err)
			}
			if len(n) != 1 || n[0] != "/etcdserverpb.KV/Txn" {
				t.Fatalf("%s: calls %q, want one Txn", tc.name, n)
			}
		}
	})

	t.Run("ErrBadRequest", func(t *testing.T) {
		g, data := newGuard(t)
		ctx := t.Context()
		if err := g.Claim(ctx, "r", 10); err != nil {
			t.Fatal(err)
		}
		before, err := cli.Get(ctx, "/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		put := clientv3.OpPut(data+"k", "v")
		for name, op := range map[string]clientv3.Op{
			"Get":                   clientv3.OpGet(data + "k"),
			"Txn":                   clientv3.OpTxn(nil, []clientv3.Op{put}, nil),
			"ZeroOp":                {},
			"PutFenceKey":           clientv3.OpPut(g.FenceKey("r"), "99999999999999999999"),
			"PutOtherFenceKey":      clientv3.OpPut(g.FenceKey("other"), "1"),
			"DeleteFenceKey":        clientv3.OpDelete(g.FenceKey("r")),
			"DeletePrefix":          clientv3.OpDelete(g.Prefix, clientv3.WithPrefix()),
			"DeleteEverything":      clientv3.OpDelete("", clientv3.WithPrefix()),
			"DeleteFromKey":         clientv3.OpDelete("/", clientv3.WithFromKey()),
			"DeleteRangeOverPrefix": clientv3.OpDelete("/", clientv3.WithRange(g.Prefix+"zzz")),
		} {
			resp, err := g.Apply(ctx, "r", 11, put, op)
			if resp != nil || !errors.Is(err, fence.ErrBadRequest) || errors.Is(err, fence.ErrFenced) {
				t.Errorf("%s: Apply=%v, %v; want ErrBadRequest", name, resp, err)
			}
		}
		after, err := cli.Get(ctx, "/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || after.Header.Revision != before.Header.Revision {
			t.Fatalf("revision %d after refused ops, want %d (%v)", after.Header.Revision, before.Header.Revision, err)
		}
		if f, err := g.Fence(ctx, "r"); err != nil || f != 10 {
			t.Fatalf("Fence=%d, %v; want 10", f, err)
		}
		// Deletes next to the prefix, not in it, are fine.
		if _, err := g.Apply(ctx, "r", 11, clientv3.OpDelete(data, clientv3.WithPrefix()),
			clientv3.OpDelete(strings.TrimSuffix(g.Prefix, "/"))); err != nil {
			t.Fatalf("Apply(deletes beside the prefix): %v", err)
		}
	})

	t.Run("DuplicateKey", func(t *testing.T) {
		// etcd refuses a txn that puts one key twice: an error, not a verdict.
		g, data := newGuard(t)
		_, err := g.Apply(t.Context(), "r", 5, clientv3.OpPut(data+"k", "1"), clientv3.OpPut(data+"k", "2"))
		if !errors.Is(err, rpctypes.ErrDuplicateKey) || errors.Is(err, fence.ErrFenced) {
			t.Fatalf("Apply: %v, want etcd's duplicate key error", err)
		}
		if f, err := g.Fence(t.Context(), "r"); err != nil || f != 0 {
			t.Fatalf("Fence=%d, %v; want 0: the refused txn changed nothing", f, err)
		}
	})

	t.Run("Namespaced", func(t *testing.T) {
		_, data := newGuard(t)
		g := etcd.NewGuard(namespace.NewKV(cli, data))
		if _, err := g.Apply(t.Context(), "r", 8, clientv3.OpPut("k", "v")); err != nil {
			t.Fatal(err)
		}
		if err := g.Claim(t.Context(), "r", 7); !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("Claim(7): %v, want ErrFenced", err)
		}
		for _, key := range []string{data + "k", data + etcd.DefaultPrefix + "r"} {
			if resp, err := cli.Get(t.Context(), key); err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("Get(%q)=%v, %v; want the key, in the namespace", key, resp, err)
			}
		}
	})

	t.Run("ErrInvalidToken", func(t *testing.T) {
		g, data := newGuard(t)
		for _, tok := range []fence.Token{0, fence.MaxToken + 1, 1<<64 - 1} {
			if _, err := g.Apply(t.Context(), "r", tok, clientv3.OpPut(data+"k", "v")); !errors.Is(err, fence.ErrInvalidToken) {
				t.Errorf("Apply(token %d): %v, want ErrInvalidToken", tok, err)
			}
			if err := g.Claim(t.Context(), "r", tok); !errors.Is(err, fence.ErrInvalidToken) {
				t.Errorf("Claim(token %d): %v, want ErrInvalidToken", tok, err)
			}
		}
		if resp, err := cli.Get(t.Context(), data+"k"); err != nil || len(resp.Kvs) != 0 {
			t.Fatalf("an invalid token wrote: %v, %v", resp, err)
		}
	})

	t.Run("ErrBadResource", func(t *testing.T) {
		g, _ := newGuard(t)
		for _, r := range []string{"", "a\nb", strings.Repeat("x", fence.MaxNameLen+1), "\xff"} {
			if _, err := g.Apply(t.Context(), r, 1); !errors.Is(err, fence.ErrBadRequest) {
				t.Errorf("Apply(%q): %v, want ErrBadRequest", r, err)
			}
			if _, err := g.Fence(t.Context(), r); !errors.Is(err, fence.ErrBadRequest) {
				t.Errorf("Fence(%q): %v, want ErrBadRequest", r, err)
			}
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		g, data := newGuard(t)
		if err := g.Claim(t.Context(), "r", 10); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		for _, tok := range []fence.Token{9, 10, 11} { // stale, equal, higher: all unknown
			_, err := g.Apply(ctx, "r", tok, clientv3.OpPut(data+"k", "v"))
			if err == nil || errors.Is(err, fence.ErrFenced) || !errors.Is(err, context.Canceled) {
				t.Fatalf("Apply(token %d) with a cancelled context: %v, want context.Canceled, not ErrFenced", tok, err)
			}
		}
		ctx, cancel = context.WithTimeout(t.Context(), 1)
		defer cancel()
		<-ctx.Done()
		if err := g.Claim(ctx, "r", 9); err == nil || errors.Is(err, fence.ErrFenced) {
			t.Fatalf("Claim past its deadline: %v, want an error that is not ErrFenced", err)
		}
	})

	t.Run("AmbiguousAfterSend", func(t *testing.T) {
		// The transaction lands, then the caller's deadline passes before
		// the answer: the error is the deadline, not a verdict.
		g, data := newGuard(t)
		lost := etcd.NewGuard(lostReplyKV{cli})
		lost.Prefix = g.Prefix
		_, err := lost.Apply(t.Context(), "r", 3, clientv3.OpPut(data+"k", "v"))
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, fence.ErrFenced) {
			t.Fatalf("Apply: %v, want context.DeadlineExceeded, not ErrFenced", err)
		}
		if err := lost.Claim(t.Context(), "r", 2); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, fence.ErrFenced) {
			t.Fatalf("stale Claim: %v, want context.DeadlineExceeded, not ErrFenced", err)
		}
		if f, err := g.Fence(t.Context(), "r"); err != nil || f != 3 {
			t.Fatalf("Fence=%d, %v; want 3: the write landed", f, err)
		}
	})
}

// lostReplyKV commits transactions and then loses the reply.
type lostReplyKV struct{ clientv3.KV }

func (kv lostReplyKV) Txn(ctx context.Context) clientv3.Txn { return lostReplyTxn{kv.KV.Txn(ctx)} }

type lostReplyTxn struct{ clientv3.Txn }

func (t lostReplyTxn) If(cs ...clientv3.Cmp) clientv3.Txn { return lostReplyTxn{t.Txn.If(cs...)} }
func (t lostReplyTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	return lostReplyTxn{t.Txn.Then(ops...)}
}
func (t lostReplyTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	return lostReplyTxn{t.Txn.Else(ops...)}
}
func (t lostReplyTxn) Commit() (*clientv3.TxnResponse, error) {
	if _, err := t.Txn.Commit(); err != nil {
		return nil, err
	}
	return nil, context.DeadlineExceeded
}

func TestGuard_Claim(t *testing.T) {
	g, _ := newGuard(t)
	fencetest.TestGuardClaims(t, g.Claim, g.Fence)
}

func TestGuard_Fence(t *testing.T) {
	t.Run("NeverFenced", func(t *testing.T) {
		g, _ := newGuard(t)
		if f, err := g.Fence(t.Context(), "fresh"); err != nil || f != 0 {
			t.Fatalf("Fence=%d, %v; want 0, nil", f, err)
		}
	})
	t.Run("NotAToken", func(t *testing.T) {
		g, _ := newGuard(t)
		for _, v := range []string{"42", "", "00000000000000000000", "99999999999999999999"} {
			if _, err := cli.Put(t.Context(), g.FenceKey("r"), v); err != nil {
				t.Fatal(err)
			}
			if f, err := g.Fence(t.Context(), "r"); err == nil || errors.Is(err, fence.ErrFenced) {
				t.Fatalf("Fence with value %q: %d, %v; want an error", v, f, err)
			}
		}
	})
}

func TestGuard_FenceKey(t *testing.T) {
	g := etcd.NewGuard(cli)
	if got, want := g.FenceKey("orders"), "/fence/fences/orders"; got != want {
		t.Fatalf("FenceKey=%q, want %q", got, want)
	}
	// '/' and '%' are escaped, so no two resources share a key.
	keys := map[string]string{}
	for _, r := range []string{"a/b", "a%2Fb", "a", "a/", "a%2F", "a b", "é"} {
		k := g.FenceKey(r)
		if other, ok := keys[k]; ok {
			t.Fatalf("resources %q and %q share the fence key %q", r, other, k)
		}
		if unesc, err := url.PathUnescape(strings.TrimPrefix(k, etcd.DefaultPrefix)); err != nil || unesc != r {
			t.Fatalf("FenceKey(%q)=%q does not unescape to the resource", r, k)
		}
		keys[k] = r
	}
	g.Prefix = "/app/fences/"
	if got, want := g.FenceKey("a/b"), "/app/fences/a%2Fb"; got != want {
		t.Fatalf("FenceKey=%q, want %q", got, want)
	}
	if got, want := (&etcd.Guard{}).FenceKey("x"), etcd.DefaultPrefix+"x"; got != want {
		t.Fatalf("FenceKey with an empty Prefix=%q, want %q", got, want)
	}
}

// BenchmarkGuard_Apply measures one fenced put: a transaction that compares
// and raises the fence and puts one key.
func BenchmarkGuard_Apply(b *testing.B) {
	g, data := newGuard(b)
	ctx := b.Context()
	for b.Loop() {
		if _, err := g.Apply(ctx, "bench", 7, clientv3.OpPut(data+"k", "value")); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnfenced measures a plain put of one key, on the same server.
func BenchmarkUnfenced(b *testing.B) {
	_, data := newGuard(b)
	ctx := b.Context()
	for b.Loop() {
		if _, err := cli.Put(ctx, data+"k", "value"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestGuard_Rejections(t *testing.T) {
	g, _ := newGuard(t)
	fencetest.TestGuardRejections(t, "etcd", func(r *reject.Recorder) { g.Rejections = r }, g.Claim)
}

func TestGuard_Unfenced(t *testing.T) {
	fencetest.TestGuardUnfenced(t, func(t *testing.T, u fence.Unfenced) fencetest.Guarded {
		g, data := newGuard(t)
		g.Unfenced = u
		return &guarded{g, data}
	})
}
