package zookeeper_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/guard/zookeeper"
)

// newGuard returns a guard on the shared connection whose fences live under a
// fresh root, and a fresh data znode (created) for the test's own znodes.
func newGuard(tb testing.TB) (g *zookeeper.Guard, data string) {
	tb.Helper()
	root := newRoot(tb)
	g = zookeeper.NewGuard(conn)
	g.Root = root + "/fences"
	data = root + "/data"
	mkdirs(tb, data)
	return g, data
}

// mkdirs creates path and its missing parents.
func mkdirs(tb testing.TB, path string) {
	tb.Helper()
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		if _, err := conn.Create(path[:i], nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			tb.Fatalf("create %s: %v", path[:i], err)
		}
	}
}

// guarded adapts a Guard to fencetest.Guarded: resource r's key k is the
// znode data/EscapeName(r)/EscapeName(k). A write is made of the ops that
// take each key from the state read just before to the one wanted: a
// version-checked set or delete of a znode that exists, a create of one that
// does not, and a create-and-delete (which asserts absence) to delete one
// that does not; if one of those ops fails because another writer changed
// the key meanwhile, it reads again and retries.
type guarded struct {
	g    *zookeeper.Guard
	data string
	mu   sync.Mutex
	made map[string]bool // resource directories created
}

func (a *guarded) dir(t testing.TB, resource string) string {
	d := a.data + "/" + zookeeper.EscapeName(resource)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.made == nil {
		a.made = map[string]bool{}
	}
	if !a.made[d] {
		mkdirs(t, d)
		a.made[d] = true
	}
	return d
}

func (a *guarded) key(t testing.TB, resource, key string) string {
	return a.dir(t, resource) + "/" + zookeeper.EscapeName(key)
}

func (a *guarded) Write(t *testing.T, resource string, token fence.Token, writes map[string][]byte) error {
	for {
		var ops []zookeeper.Op
		for _, k := range slices.Sorted(mapKeys(writes)) {
			p := a.key(t, resource, k)
			ok, stat, err := conn.Exists(p)
			if err != nil {
				t.Fatalf("Exists(%s): %v", p, err)
			}
			switch v := writes[k]; {
			case v == nil && ok:
				ops = append(ops, &zk.DeleteRequest{Path: p, Version: stat.Version})
			case v == nil:
				ops = append(ops, zookeeper.Create(p, nil), zookeeper.Delete(p))
			case ok:
				ops = append(ops, &zk.SetDataRequest{Path: p, Data: v, Version: stat.Version})
			default:
				ops = append(ops, zookeeper.Create(p, v))
			}
		}
		_, err := a.g.Apply(t.Context(), resource, token, ops...)
		if errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion) {
			continue // another writer changed a key since Exists
		}
		return err
	}
}

func (a *guarded) Read(t *testing.T, resource, key string) ([]byte, bool) {
	return read(t, a.key(t, resource, key))
}

func (a *guarded) Fence(t *testing.T, resource string) fence.Token {
	f, err := a.g.Fence(t.Context(), resource)
	if err != nil {
		t.Fatalf("Fence(%q): %v", resource, err)
	}
	return f
}

// read returns the data of the znode path, and whether it exists.
func read(tb testing.TB, path string) ([]byte, bool) {
	tb.Helper()
	data, _, err := conn.Get(path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, false
	}
	if err != nil {
		tb.Fatalf("Get(%s): %v", path, err)
	}
	return data, true
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
		return &guarded{g: g, data: data}
	})
}

func TestGuard_Sequencer(t *testing.T) {
	g, data := newGuard(t)
	a := &guarded{g: g, data: data}
	write := func(ctx context.Context, resource string, token fence.Token, claim bool) error {
		if claim {
			return g.Claim(ctx, resource, token)
		}
		_, err := g.Apply(ctx, resource, token, zookeeper.Create(a.key(t, resource, "k"), []byte("v")))
		return err
	}
	read := func(resource string) bool { _, ok := a.Read(t, resource, "k"); return ok }
	fenceOf := func(resource string) fence.Token { return a.Fence(t, resource) }
	fencetest.TestGuardSequencers(t, func(ks fence.KeySet) { g.Keys = ks }, write, read, fenceOf)
}

func TestGuard_Apply(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		g, data := newGuard(t)
		ctx := t.Context()
		if _, err := conn.Create(data+"/old", []byte("1"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Create(data+"/gone", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		resp, err := g.Apply(ctx, "orders", 5,
			zookeeper.Set(data+"/old", []byte("2")),
			zookeeper.Delete(data+"/gone"),
			zookeeper.Create(data+"/new", []byte("3")),
			zookeeper.Check(data+"/new", 0))
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
		if len(resp) != 4 || resp[0].Stat == nil || resp[0].Stat.Version != 1 || resp[2].String != data+"/new" {
			t.Fatalf("responses %+v; want 4: a set's stat at version 1, ..., the created path", resp)
		}
		for path, want := range map[string]string{data + "/old": "2", data + "/new": "3", g.FencePath("orders"): "5"} {
			if got, ok := read(t, path); !ok || string(got) != want {
				t.Fatalf("%s = %q (exists %v), want %q", path, got, ok, want)
			}
		}
		if _, ok := read(t, data+"/gone"); ok {
			t.Fatal("the delete did not apply")
		}
		// The fence znode and the data changed in one transaction.
		_, fs, _ := conn.Get(g.FencePath("orders"))
		_, ds, _ := conn.Get(data + "/new")
		if fs.Mzxid != ds.Mzxid {
			t.Fatalf("fence znode mzxid %d, data znode %d: want one multi", fs.Mzxid, ds.Mzxid)
		}
	})

	t.Run("FenceZnode", func(t *testing.T) {
		g, _ := newGuard(t)
		if err := g.Claim(t.Context(), "a/b", 42); err != nil {
			t.Fatal(err)
		}
		if got, want := g.FencePath("a/b"), g.Root+"/a%2Fb"; got != want {
			t.Fatalf("FencePath=%q, want %q", got, want)
		}
		if got, ok := read(t, g.FencePath("a/b")); !ok || string(got) != "42" {
			t.Fatalf("fence znode data %q (exists %v), want 42", got, ok)
		}
	})

	t.Run("ErrFenced", func(t *testing.T) {
		g, data := newGuard(t)
		ctx := t.Context()
		if _, err := g.Apply(ctx, "r", 100, zookeeper.Create(data+"/k", []byte("B"))); err != nil {
			t.Fatal(err)
		}
		_, before, _ := conn.Get(data)
		for _, stale := range []fence.Token{99, 9, 1} { // "9" > "100" as strings: compared as numbers
			resp, err := g.Apply(ctx, "r", stale, zookeeper.Set(data+"/k", []byte("A")), zookeeper.Create(data+"/other", []byte("A")))
			var fe *fence.FencedError
			if resp != nil || !errors.As(err, &fe) || *fe != (fence.FencedError{Resource: "r", Presented: stale, LastFence: 100}) {
				t.Fatalf("stale Apply(%d)=%v, %v; want *FencedError{r, %d, 100}", stale, resp, err, stale)
			}
		}
		if got, _ := read(t, data+"/k"); string(got) != "B" {
			t.Fatalf("k=%q after rejections, want B", got)
		}
		if _, after, _ := conn.Get(data); after.Cversion != before.Cversion || after.NumChildren != 1 {
			t.Fatalf("children of data changed by rejected writes: %+v -> %+v", before, after)
		}
	})

	t.Run("UserOpFails", func(t *testing.T) {
		// An op of the user's fails the multi: nothing applies, the fence
		// is not raised, and the error is ZooKeeper's, not a verdict.
		g, data := newGuard(t)
		ctx := t.Context()
		if err := g.Claim(ctx, "r", 3); err != nil {
			t.Fatal(err)
		}
		_, err := g.Apply(ctx, "r", 4, zookeeper.Create(data+"/a", []byte("1")), zookeeper.Set(data+"/missing", []byte("x")))
		if !errors.Is(err, zk.ErrNoNode) || errors.Is(err, fence.ErrFenced) || !strings.Contains(err.Error(), "op 1 (set "+data+"/missing)") {
			t.Fatalf("Apply: %v, want zk.ErrNoNode naming op 1", err)
		}
		if _, ok := read(t, data+"/a"); ok {
			t.Fatal("op 0 applied though op 1 failed")
		}
		if f, err := g.Fence(ctx, "r"); err != nil || f != 3 {
			t.Fatalf("Fence=%d, %v; want 3 (not raised)", f, err)
		}
		_, err = g.Apply(ctx, "r", 4, zookeeper.Check(data, 99))
		if !errors.Is(err, zk.ErrBadVersion) {
			t.Fatalf("Apply(a failing check): %v, want zk.ErrBadVersion", err)
		}
	})

	t.Run("RootCreated", func(t *testing.T) {
		g, _ := newGuard(t)
		g.Root += "/deep/er"
		if err := g.Claim(t.Context(), "r", 1); err != nil {
			t.Fatalf("Claim under a missing root: %v", err)
		}
		if got, ok := read(t, g.Root+"/r"); !ok || string(got) != "1" {
			t.Fatalf("fence znode %q (exists %v)", got, ok)
		}
	})

	t.Run("ErrBadRequest", func(t *testing.T) {
		g, data := newGuard(t)
		ctx := t.Context()
		if err := g.Claim(ctx, "r", 10); err != nil {
			t.Fatal(err)
		}
		for name, op := range map[string]zookeeper.Op{
			"NotAnOp":        "set /x",
			"Nil":            nil,
			"NilRequest":     (*zk.SetDataRequest)(nil),
			"Value":          zk.SetDataRequest{Path: data + "/k"},
			"SetFence":       zookeeper.Set(g.FencePath("r"), []byte("99")),
			"DeleteFence":    zookeeper.Delete(g.FencePath("r")),
			"CreateOther":    zookeeper.Create(g.FencePath("other"), []byte("1")),
			"DeleteRoot":     zookeeper.Delete(g.Root),
			"Relative":       zookeeper.Create("k", nil),
			"Empty":          zookeeper.Set("", nil),
			"TrailingSlash":  zookeeper.Create(data+"/k/", nil),
			"DoubleSlash":    zookeeper.Create(data+"//k", nil),
			"Dot":            zookeeper.Create(data+"/./k", nil),
			"DotDot":         zookeeper.Create(g.Root+"/../fences/r", nil),
			"Control":        zookeeper.Create(data+"/a\x01", nil),
			"NUL":            zookeeper.Create(data+"/a\x00", nil),
			"InvalidUTF8":    zookeeper.Create(data+"/\xff", nil),
			"PrivateUseChar": zookeeper.Create(data+"/\ue000", nil),
		} {
			resp, err := g.Apply(ctx, "r", 11, zookeeper.Create(data+"/k", nil), op)
			if resp != nil || !errors.Is(err, fence.ErrBadRequest) || errors.Is(err, fence.ErrFenced) {
				t.Errorf("%s: Apply=%v, %v; want ErrBadRequest", name, resp, err)
			}
		}
		if _, ok := read(t, data+"/k"); ok {
			t.Fatal("a refused write applied")
		}
		if f, err := g.Fence(ctx, "r"); err != nil || f != 10 {
			t.Fatalf("Fence=%d, %v; want 10", f, err)
		}
		// A sequential create may end with '/': the server adds the suffix.
		resp, err := g.Apply(ctx, "r", 11, &zk.CreateRequest{Path: data + "/", Flags: zk.FlagSequence, Acl: zk.WorldACL(zk.PermAll)})
		if err != nil || len(resp) != 1 || !strings.HasPrefix(resp[0].String, data+"/0") {
			t.Fatalf("sequential create: %+v, %v", resp, err)
		}
		for _, root := range []string{"/", "/zookeeper", "/zookeeper/x", "fences", "/a//b", "/a/"} {
			bad := zookeeper.NewGuard(conn)
			bad.Root = root
			if err := bad.Claim(ctx, "r", 1); err == nil {
				t.Errorf("Root %q: Claim succeeded", root)
			}
			if _, err := bad.Fence(ctx, "r"); err == nil {
				t.Errorf("Root %q: Fence succeeded", root)
			}
		}
	})

	t.Run("ErrInvalidToken", func(t *testing.T) {
		g, data := newGuard(t)
		for _, tok := range []fence.Token{0, fence.MaxToken + 1, 1<<64 - 1} {
			if _, err := g.Apply(t.Context(), "r", tok, zookeeper.Create(data+"/k", nil)); !errors.Is(err, fence.ErrInvalidToken) {
				t.Errorf("Apply(token %d): %v, want ErrInvalidToken", tok, err)
			}
			if err := g.Claim(t.Context(), "r", tok); !errors.Is(err, fence.ErrInvalidToken) {
				t.Errorf("Claim(token %d): %v, want ErrInvalidToken", tok, err)
			}
		}
		if _, ok := read(t, data+"/k"); ok {
			t.Fatal("an invalid token wrote")
		}
	})

	t.Run("ErrBadResource", func(t *testing.T) {
		g, _ := newGuard(t)
		for _, r := range []string{"", "a\nb", strings.Repeat("x", fence.MaxNameLen+1), "\xff"} {
			if _, err := g.Apply(t.Context(), r, 1); !errors.Is(err, fence.ErrBadRequest) {
				t.Errorf("Apply(%q): %v, want ErrBadRequest", r, err)
			}
			if err := g.Claim(t.Context(), r, 1); !errors.Is(err, fence.ErrBadRequest) {
				t.Errorf("Claim(%q): %v, want ErrBadRequest", r, err)
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
		for _, tok := range []fence.Token{9, 10, 11} {
			_, err := g.Apply(ctx, "r", tok, zookeeper.Create(data+"/k", nil))
			if !errors.Is(err, context.Canceled) || errors.Is(err, fence.ErrFenced) {
				t.Fatalf("Apply(token %d) with a cancelled context: %v, want context.Canceled, not ErrFenced", tok, err)
			}
		}
		if f, err := g.Fence(t.Context(), "r"); err != nil || f != 10 {
			t.Fatalf("Fence=%d, %v; want 10", f, err)
		}
	})

	t.Run("AmbiguousAfterSend", func(t *testing.T) {
		// The multi lands, then the reply is lost: the error is not a verdict.
		g, data := newGuard(t)
		lost := zookeeper.NewGuard(lostReply{conn})
		lost.Root = g.Root
		_, err := lost.Apply(t.Context(), "r", 3, zookeeper.Create(data+"/k", []byte("v")))
		if !errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, fence.ErrFenced) {
			t.Fatalf("Apply: %v, want zk.ErrConnectionClosed, not ErrFenced", err)
		}
		if f, err := g.Fence(t.Context(), "r"); err != nil || f != 3 {
			t.Fatalf("Fence=%d, %v; want 3: the write landed", f, err)
		}
	})

	t.Run("TwoRoundTrips", func(t *testing.T) {
		g, data := newGuard(t)
		if err := g.Claim(t.Context(), "other", 1); err != nil { // creates Root
			t.Fatal(err)
		}
		c := &counting{Conn: conn}
		cg := zookeeper.NewGuard(c)
		cg.Root = g.Root
		for _, tc := range []struct {
			name  string
			token fence.Token
			err   error
		}{{"Absent", 5, nil}, {"Higher", 6, nil}, {"Equal", 6, nil}, {"Stale", 5, fence.ErrFenced}} {
			c.reset()
			_, err := cg.Apply(t.Context(), "r", tc.token, zookeeper.Set(data, []byte(tc.name)))
			if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
				t.Fatalf("%s: Apply(%d): %v, want %v", tc.name, tc.token, err, tc.err)
			}
			want := []string{"get", "multi"}
			if tc.err != nil {
				want = want[:1] // refused on the read
			}
			if got := c.get(); !slices.Equal(got, want) {
				t.Fatalf("%s: calls %q, want %q", tc.name, got, want)
			}
		}
	})

	t.Run("RaceRetried", func(t *testing.T) {
		// Another writer raises the fence between the guard's read and its
		// multi: the multi fails on the fence's version, and the guard reads
		// again; above the token, that is a verdict.
		g, data := newGuard(t)
		ctx := t.Context()
		if err := g.Claim(ctx, "r", 5); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			interloper fence.Token
			token      fence.Token
			fenced     bool
		}{{6, 7, false}, {7, 7, false}, {9, 8, true}} {
			racing := zookeeper.NewGuard(&interloper{Conn: conn, before: func() {
				if err := g.Claim(ctx, "r", tc.interloper); err != nil {
					t.Errorf("interloper's Claim(%d): %v", tc.interloper, err)
				}
			}})
			racing.Root = g.Root
			_, err := racing.Apply(ctx, "r", tc.token, zookeeper.Set(data, []byte("x")))
			var fe *fence.FencedError
			if tc.fenced {
				if !errors.As(err, &fe) || fe.LastFence != tc.interloper {
					t.Fatalf("Apply(%d) after a raise to %d: %v, want fenced by %d", tc.token, tc.interloper, err, tc.interloper)
				}
			} else if err != nil {
				t.Fatalf("Apply(%d) after a raise to %d: %v", tc.token, tc.interloper, err)
			}
		}
		if f, err := g.Fence(ctx, "r"); err != nil || f != 9 {
			t.Fatalf("Fence=%d, %v; want 9", f, err)
		}
	})

	t.Run("ErrContended", func(t *testing.T) {
		g, data := newGuard(t)
		ctx := t.Context()
		n := fence.Token(1)
		racing := zookeeper.NewGuard(&interloper{Conn: conn, every: true, before: func() {
			n++ // always just below the token presented
			if err := g.Claim(ctx, "r", n); err != nil {
				t.Errorf("Claim(%d): %v", n, err)
			}
		}})
		racing.Root, racing.MaxAttempts = g.Root, 3
		_, err := racing.Apply(ctx, "r", 1000, zookeeper.Set(data, []byte("x")))
		if !errors.Is(err, zookeeper.ErrContended) || errors.Is(err, fence.ErrFenced) {
			t.Fatalf("Apply: %v, want ErrContended", err)
		}
		if f, _ := g.Fence(ctx, "r"); f != n || n != 4 {
			t.Fatalf("Fence=%d after %d raises, want 4 (3 attempts, none applied)", f, n-1)
		}
	})
}

// lostReply applies multis and then loses the reply.
type lostReply struct{ zookeeper.Conn }

func (c lostReply) Multi(ops ...any) ([]zk.MultiResponse, error) {
	if resp, err := c.Conn.Multi(ops...); err != nil {
		return resp, err
	}
	return nil, zk.ErrConnectionClosed
}

// counting records the calls made through it.
type counting struct {
	zookeeper.Conn
	mu    sync.Mutex
	calls []string
}

func (c *counting) reset()        { c.mu.Lock(); c.calls = nil; c.mu.Unlock() }
func (c *counting) get() []string { c.mu.Lock(); defer c.mu.Unlock(); return slices.Clone(c.calls) }
func (c *counting) add(s string)  { c.mu.Lock(); c.calls = append(c.calls, s); c.mu.Unlock() }

func (c *counting) Get(path string) ([]byte, *zk.Stat, error) {
	c.add("get")
	return c.Conn.Get(path)
}

func (c *counting) Multi(ops ...any) ([]zk.MultiResponse, error) {
	c.add("multi")
	return c.Conn.Multi(ops...)
}

// interloper runs before between the guard's read and its multi: once, or
// every time.
type interloper struct {
	zookeeper.Conn
	before func()
	every  bool
	done   bool
}

func (c *interloper) Multi(ops ...any) ([]zk.MultiResponse, error) {
	if !c.done || c.every {
		c.done = true
		c.before()
	}
	return c.Conn.Multi(ops...)
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
		if err := g.Claim(t.Context(), "r", 1); err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"", "0", "042", "-1", "+1", " 1", "9223372036854775808", "x"} {
			if _, err := conn.Set(g.FencePath("r"), []byte(v), -1); err != nil {
				t.Fatal(err)
			}
			f, err := g.Fence(t.Context(), "r")
			if err == nil || errors.Is(err, fence.ErrFenced) || errors.Is(err, fence.ErrInvalidToken) {
				t.Fatalf("Fence with data %q: %d, %v; want an error that is no verdict", v, f, err)
			}
			if err := g.Claim(t.Context(), "r", 5); err == nil || errors.Is(err, fence.ErrFenced) || errors.Is(err, fence.ErrInvalidToken) {
				t.Fatalf("Claim with fence data %q: %v; want an error that is no verdict", v, err)
			}
		}
	})
}

func TestEscapeName(t *testing.T) {
	for r, want := range map[string]string{
		"orders": "orders", "a/b": "a%2Fb", "a%2Fb": "a%252Fb", "a b": "a%20b", "é": "%C3%A9",
		".": "%2E", "..": "%2E.", "...": "...", "zookeeper": "%7Aookeeper", "zookeeper2": "zookeeper2",
		"v1.2_x-y~z": "v1.2_x-y~z", "\ue000": "%EE%80%80",
	} {
		if got := zookeeper.EscapeName(r); got != want {
			t.Errorf("EscapeName(%q)=%q, want %q", r, got, want)
		}
	}
	seen := map[string]string{}
	for _, r := range []string{"a/b", "a%2Fb", "a", "a/", "a%2F", "a b", "é", ".", "..", "%2E", "zookeeper", "%7Aookeeper", "z", "\ufff5"} {
		name := zookeeper.EscapeName(r)
		if other, ok := seen[name]; ok {
			t.Fatalf("resources %q and %q share the fence znode name %q", r, other, name)
		}
		seen[name] = r
		if back, err := zookeeper.UnescapeName(name); err != nil || back != r {
			t.Fatalf("UnescapeName(%q)=%q, %v; want %q", name, back, err, r)
		}
	}
	for _, bad := range []string{"a/b", "%", "%2", "%zz", "%2f", "%61", ".", "..", "zookeeper", "a b"} {
		if r, err := zookeeper.UnescapeName(bad); err == nil {
			t.Errorf("UnescapeName(%q)=%q, want an error", bad, r)
		}
	}
	if got, want := zookeeper.NewGuard(nil).FencePath("a/b"), "/fence/fences/a%2Fb"; got != want {
		t.Fatalf("FencePath=%q, want %q", got, want)
	}
	if got, want := (&zookeeper.Guard{}).FencePath("x"), zookeeper.DefaultRoot+"/x"; got != want {
		t.Fatalf("FencePath with an empty Root=%q, want %q", got, want)
	}
}

// FuzzEscapeName checks that every valid resource name escapes to a valid
// znode name that unescapes to it.
func FuzzEscapeName(f *testing.F) {
	for _, s := range []string{"orders", "a/b", ".", "..", "zookeeper", "é", "\ue000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, r string) {
		if fence.ValidateResource(r) != nil {
			return
		}
		name := zookeeper.EscapeName(r)
		if back, err := zookeeper.UnescapeName(name); err != nil || back != r {
			t.Fatalf("UnescapeName(EscapeName(%q)) = %q, %v", r, back, err)
		}
		if name == "." || name == ".." || name == "zookeeper" || strings.ContainsAny(name, "/\x00") {
			t.Fatalf("EscapeName(%q)=%q is not a valid znode name", r, name)
		}
	})
}

func TestGuard_Unfenced(t *testing.T) {
	fencetest.TestGuardUnfenced(t, func(t *testing.T, u fence.Unfenced) fencetest.Guarded {
		g, data := newGuard(t)
		g.Unfenced = u
		return &guarded{g: g, data: data}
	})
}
