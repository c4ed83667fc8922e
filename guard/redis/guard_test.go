package redis

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/guard/reject"
	goredis "github.com/redis/go-redis/v9"
)

// guarded adapts a Guard to fencetest.Guarded: a write is one Apply of Set
// and Del ops on Key(resource, name).
type guarded struct {
	g *Guard
	c goredis.UniversalClient
}

func (a guarded) Write(t *testing.T, resource string, token fence.Token, writes map[string][]byte) error {
	ops := make([]Op, 0, len(writes))
	for name, v := range writes {
		if v == nil {
			ops = append(ops, Del(Key(resource, name)))
		} else {
			ops = append(ops, Set(Key(resource, name), v, 0))
		}
	}
	return a.g.Apply(t.Context(), resource, token, ops...)
}

func (a guarded) Read(t *testing.T, resource, name string) ([]byte, bool) {
	t.Helper()
	v, err := a.c.Get(t.Context(), Key(resource, name)).Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("GET %s: %v", Key(resource, name), err)
	}
	return v, true
}

func (a guarded) Fence(t *testing.T, resource string) fence.Token {
	t.Helper()
	f, err := a.g.Fence(t.Context(), resource)
	if err != nil {
		t.Fatalf("Fence(%q): %v", resource, err)
	}
	return f
}

func TestGuard(t *testing.T) {
	fencetest.TestGuard(t, func(t *testing.T) fencetest.Guarded {
		c := newClient(t)
		return guarded{NewGuard(c), c}
	})
}

// TestGuard_Cluster runs the suite through a cluster client, on a Redis
// Cluster: the script's keys must all be in one slot there.
func TestGuard_Cluster(t *testing.T) {
	fencetest.TestGuard(t, func(t *testing.T) fencetest.Guarded {
		c := newClusterClient(t)
		return guarded{NewGuard(c), c}
	})
}

func mustApply(t *testing.T, g *Guard, resource string, token fence.Token, ops ...Op) {
	t.Helper()
	if err := g.Apply(t.Context(), resource, token, ops...); err != nil {
		t.Fatalf("Apply(%q, %d): %v", resource, token, err)
	}
}

func wantFence(t *testing.T, g *Guard, resource string, want fence.Token) {
	t.Helper()
	got, err := g.Fence(t.Context(), resource)
	if err != nil {
		t.Fatalf("Fence(%q): %v", resource, err)
	}
	if got != want {
		t.Fatalf("Fence(%q)=%d, want %d", resource, got, want)
	}
}

func wantString(t *testing.T, c goredis.UniversalClient, key, want string) {
	t.Helper()
	got, err := c.Get(t.Context(), key).Result()
	if err != nil || got != want {
		t.Fatalf("GET %s = %q, %v; want %q", key, got, err, want)
	}
}

func wantMissing(t *testing.T, c goredis.UniversalClient, key string) {
	t.Helper()
	if n, err := c.Exists(t.Context(), key).Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS %s = %d, %v; want 0", key, n, err)
	}
}

// snapshot returns every key of the client's database with its type, value
// (DUMP) and TTL, to check that a refused write changed nothing.
func snapshot(t *testing.T, c *goredis.Client) map[string]string {
	t.Helper()
	ctx := t.Context()
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		dump, err := c.Dump(ctx, k).Result()
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		// A TTL goes down while the test runs; whether there is one is what counts.
		m[k] = dump + "/ttl:" + strconv.FormatBool(ttl > 0)
	}
	return m
}

func wantUnchanged(t *testing.T, c *goredis.Client, before map[string]string) {
	t.Helper()
	after := snapshot(t, c)
	if len(after) != len(before) {
		t.Fatalf("%d keys after a refused write, want %d: %v", len(after), len(before), after)
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("key %s changed by a refused write", k)
		}
	}
}

func TestGuard_Ops(t *testing.T) {
	const r = "ops"
	k := func(name string) string { return Key(r, name) }

	t.Run("Set", func(t *testing.T) {
		c := newClient(t)
		g := NewGuard(c)
		mustApply(t, g, r, 5, Set(k("a"), []byte("1"), 0), Set(k("bin"), []byte{0, 255, '\n'}, 0))
		wantString(t, c, k("a"), "1")
		wantString(t, c, k("bin"), "\x00\xff\n")
		if ttl := c.PTTL(t.Context(), k("a")).Val(); ttl != -1 {
			t.Fatalf("PTTL=%v after Set with no ttl, want -1 (no expiry)", ttl)
		}
		wantFence(t, g, r, 5)
	})

	t.Run("SetTTL", func(t *testing.T) {
		c := newClient(t)
		g := NewGuard(c)
		mustApply(t, g, r, 1, Set(k("a"), []byte("v"), time.Minute), Set(k("tiny"), []byte("v"), time.Microsecond))
		if ttl := c.PTTL(t.Context(), k("a")).Val(); ttl <= 59*time.Second || ttl > time.Minute {
			t.Fatalf("PTTL=%v, want about 1m", ttl)
		}
		if ttl := c.PTTL(t.Context(), FenceKey(r)).Val(); ttl != -1 {
			t.Fatalf("fence key PTTL=%v, want -1 (no expiry)", ttl)
		}
		// A ttl under a millisecond is rounded up to one: the key expires.
		deadline := time.Now().Add(2 * time.Second)
		for c.Exists(t.Context(), k("tiny")).Val() == 1 {
			if time.Now().After(deadline) {
				t.Fatal("a key set with a 1µs ttl has not expired after 2s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		// Set with no ttl removes the expiry, as SET does.
		mustApply(t, g, r, 1, Set(k("a"), []byte("w"), 0))
		if ttl := c.PTTL(t.Context(), k("a")).Val(); ttl != -1 {
			t.Fatalf("PTTL=%v after Set with no ttl, want -1", ttl)
		}
	})

	t.Run("Del", func(t *testing.T) {
		c := newClient(t)
		g := NewGuard(c)
		mustApply(t, g, r, 1, Set(k("a"), []byte("1"), 0), HSet(k("h"), "f", []byte("v")))
		mustApply(t, g, r, 2, Del(k("a")), Del(k("h")), Del(k("never")))
		wantMissing(t, c, k("a"))
		wantMissing(t, c, k("h"))
		wantFence(t, g, r, 2)
	})

	t.Run("HSet", func(t *testing.T) {
		c := newClient(t)
		g := NewGuard(c)
		mustApply(t, g, r, 1, HSet(k("h"), "f1", []byte("1")), HSet(k("h"), "f2", []byte("2")))
		mustApply(t, g, r, 1, HSet(k("h"), "f1", []byte("one")))
		got := c.HGetAll(t.Context(), k("h")).Val()
		if len(got) != 2 || got["f1"] != "one" || got["f2"] != "2" {
			t.Fatalf("HGETALL=%v, want f1=one f2=2", got)
		}
	})

	t.Run("IncrBy", func(t *testing.T) {
		c := newClient(t)
		g := NewGuard(c)
		mustApply(t, g, r, 1, IncrBy(k("n"), 5))
		mustApply(t, g, r, 1, IncrBy(k("n"), -7), IncrBy(k("n"), 1))
		wantString(t, c, k("n"), "-1")
		// Near the ends of int64, where Lua's doubles are not exact.
		mustApply(t, g, r, 1, Set(k("big"), []byte("9223372036854775800"), 0), IncrBy(k("big"), 7))
		wantString(t, c, k("big"), strconv.FormatInt(math.MaxInt64, 10))
		mustApply(t, g, r, 1, Set(k("small"), []byte("-9223372036854775800"), 0), IncrBy(k("small"), -8))
		wantString(t, c, k("small"), strconv.FormatInt(math.MinInt64, 10))
		mustApply(t, g, r, 1, IncrBy(k("small"), math.MaxInt64), IncrBy(k("small"), 1))
		wantString(t, c, k("small"), "0")
	})

	t.Run("CompareAndSet", func(t *testing.T) {
		c := newClient(t)
		g := NewGuard(c)
		mustApply(t, g, r, 1, CompareAndSet(k("a"), nil, []byte("v1"))) // absent
		wantString(t, c, k("a"), "v1")
		mustApply(t, g, r, 2, CompareAndSet(k("a"), []byte("v1"), []byte("v2")))
		wantString(t, c, k("a"), "v2")
		mustApply(t, g, r, 2, Set(k("e"), nil, 0), CompareAndSet(k("e"), []byte{}, []byte("x")))
		wantString(t, c, k("e"), "x")
		wantFence(t, g, r, 2)
	})

	t.Run("LaterOpsSeeEarlierOnes", func(t *testing.T) {
		// Checks run against the keys as the ops before leave them.
		c := newClient(t)
		g := NewGuard(c)
		mustApply(t, g, r, 1,
			Set(k("a"), []byte("10"), 0), IncrBy(k("a"), 5), CompareAndSet(k("a"), []byte("15"), []byte("x")),
			Set(k("h"), []byte("s"), 0), Del(k("h")), HSet(k("h"), "f", []byte("v")),
			Del(k("gone")), CompareAndSet(k("gone"), nil, []byte("back")),
		)
		wantString(t, c, k("a"), "x")
		wantString(t, c, k("gone"), "back")
		if v := c.HGet(t.Context(), k("h"), "f").Val(); v != "v" {
			t.Fatalf("HGET=%q, want v", v)
		}
	})
}

// TestGuard_Refused checks that every refused Apply changes nothing: not
// its earlier ops, not the fence, not a TTL.
func TestGuard_Refused(t *testing.T) {
	const r = "refused"
	k := func(name string) string { return Key(r, name) }
	setup := func(t *testing.T) (*goredis.Client, *Guard, map[string]string) {
		c := newClient(t)
		g := NewGuard(c)
		mustApply(t, g, r, 10,
			Set(k("s"), []byte("old"), time.Hour), Set(k("n"), []byte("1"), 0),
			HSet(k("h"), "f", []byte("v")), Set(k("text"), []byte("abc"), 0),
			Set(k("max"), []byte(strconv.FormatInt(math.MaxInt64, 10)), 0))
		return c, g, snapshot(t, c)
	}
	allOps := func(last ...Op) []Op {
		return append([]Op{
			Set(k("s"), []byte("new"), 0), Set(k("new"), []byte("x"), time.Minute), Del(k("n")),
			HSet(k("h"), "f", []byte("w")), IncrBy(k("n2"), 3), CompareAndSet(k("cas"), nil, []byte("x")),
		}, last...)
	}

	t.Run("ErrFenced", func(t *testing.T) {
		c, g, before := setup(t)
		err := g.Apply(t.Context(), r, 9, allOps()...)
		var fe *fence.FencedError
		if !errors.As(err, &fe) || !errors.Is(err, fence.ErrFenced) || *fe != (fence.FencedError{Resource: r, Presented: 9, LastFence: 10}) {
			t.Fatalf("err=%v, want *fence.FencedError{%s, 9, 10}", err, r)
		}
		wantUnchanged(t, c, before)
	})

	t.Run("ErrFencedBeforePrecondition", func(t *testing.T) {
		c, g, before := setup(t)
		err := g.Apply(t.Context(), r, 9, CompareAndSet(k("s"), []byte("wrong"), []byte("x")))
		if !errors.Is(err, fence.ErrFenced) || errors.Is(err, fence.ErrPreconditionFailed) {
			t.Fatalf("err=%v, want ErrFenced only", err)
		}
		wantUnchanged(t, c, before)
	})

	for _, tc := range []struct {
		name string
		last Op
		want error
	}{
		{"ErrPreconditionFailed/Value", CompareAndSet(k("s"), []byte("other"), []byte("x")), fence.ErrPreconditionFailed},
		{"ErrPreconditionFailed/Prefix", CompareAndSet(k("s"), []byte("ol"), []byte("x")), fence.ErrPreconditionFailed},
		{"ErrPreconditionFailed/Exists", CompareAndSet(k("s"), nil, []byte("x")), fence.ErrPreconditionFailed},
		{"ErrPreconditionFailed/Missing", CompareAndSet(k("missing"), []byte("old"), []byte("x")), fence.ErrPreconditionFailed},
		{"ErrPreconditionFailed/EmptyIsNotMissing", CompareAndSet(k("missing"), []byte{}, []byte("x")), fence.ErrPreconditionFailed},
		{"ErrWrongType/HSetOnString", HSet(k("s"), "f", []byte("x")), ErrWrongType},
		{"ErrWrongType/IncrByOnHash", IncrBy(k("h"), 1), ErrWrongType},
		{"ErrWrongType/CompareAndSetOnHash", CompareAndSet(k("h"), []byte("v"), []byte("x")), ErrWrongType},
		{"ErrNotInteger/Text", IncrBy(k("text"), 1), ErrNotInteger},
		{"ErrNotInteger/Overflow", IncrBy(k("max"), 1), ErrNotInteger},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, g, before := setup(t)
			// A higher token: the fence would be raised if anything were written.
			err := g.Apply(t.Context(), r, 11, allOps(tc.last)...)
			if !errors.Is(err, tc.want) || errors.Is(err, fence.ErrFenced) {
				t.Fatalf("err=%v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), strconv.Quote(tc.last.key)) {
				t.Fatalf("err=%q does not name the key %q", err, tc.last.key)
			}
			wantUnchanged(t, c, before)
			wantFence(t, g, r, 10)
		})
	}

	t.Run("CheckedAfterEarlierOps", func(t *testing.T) {
		// The overflow comes from an earlier op of the same Apply.
		c, g, before := setup(t)
		err := g.Apply(t.Context(), r, 11, Set(k("n"), []byte("9223372036854775806"), 0), IncrBy(k("n"), 1), IncrBy(k("n"), 1))
		if !errors.Is(err, ErrNotInteger) {
			t.Fatalf("err=%v, want ErrNotInteger", err)
		}
		wantUnchanged(t, c, before)
	})
}

func TestGuard_Claim(t *testing.T) {
	c := newClient(t)
	g := NewGuard(c)
	if err := g.Claim(t.Context(), "c", 3); err != nil {
		t.Fatal(err)
	}
	wantFence(t, g, "c", 3)
	if err := g.Claim(t.Context(), "c", 3); err != nil {
		t.Fatalf("equal token: %v", err)
	}
	err := g.Claim(t.Context(), "c", 2)
	var fe *fence.FencedError
	if !errors.As(err, &fe) || fe.LastFence != 3 || fe.Presented != 2 {
		t.Fatalf("err=%v, want *fence.FencedError{c, 2, 3}", err)
	}
	// A claim fences writes: the zombie with token 2 is refused.
	if err := g.Apply(t.Context(), "c", 2, Set(Key("c", "k"), []byte("zombie"), 0)); !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("err=%v, want ErrFenced", err)
	}
	wantMissing(t, c, Key("c", "k"))
}

// TestGuard_BigTokens checks that tokens are compared exactly up to
// fence.MaxToken, where Lua's doubles are not: 2^53+1 and 2^53 are the same
// double, and so are MaxToken and MaxToken-1.
func TestGuard_BigTokens(t *testing.T) {
	c := newClient(t)
	g := NewGuard(c)
	for _, tc := range []struct {
		name        string
		high, lower fence.Token
	}{
		{"2^53", 1<<53 + 1, 1 << 53},
		{"MaxToken", fence.MaxToken, fence.MaxToken - 1},
		{"NearMax", fence.MaxToken - 1, fence.MaxToken - 2},
		{"MoreDigits", 1000, 999},
		{"MaxTokenOver1e18", fence.MaxToken, 999_999_999_999_999_999},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := "big-" + tc.name
			mustApply(t, g, r, tc.lower, Set(Key(r, "k"), []byte("lower"), 0))
			mustApply(t, g, r, tc.high, Set(Key(r, "k"), []byte("high"), 0))
			wantFence(t, g, r, tc.high)
			err := g.Apply(t.Context(), r, tc.lower, Set(Key(r, "k"), []byte("stale"), 0))
			var fe *fence.FencedError
			if !errors.As(err, &fe) || fe.Presented != tc.lower || fe.LastFence != tc.high {
				t.Fatalf("err=%v, want *fence.FencedError{%s, %d, %d}", err, r, tc.lower, tc.high)
			}
			mustApply(t, g, r, tc.high, Set(Key(r, "k"), []byte("retry"), 0))
			wantString(t, c, Key(r, "k"), "retry")
			wantString(t, c, FenceKey(r), tc.high.String())
		})
	}
}

// TestGuard_CrossSlot checks that a key outside the resource's slot is
// refused before anything is sent.
func TestGuard_CrossSlot(t *testing.T) {
	c := newClient(t)
	var sent atomic.Int32
	c.AddHook(countHook{&sent})
	g := NewGuard(c)
	for _, key := range []string{"plain", "{other}:k", "res:k"} {
		if Slot(key) == Slot(FenceKey("res")) {
			t.Fatalf("test key %q is in the resource's slot", key)
		}
		err := g.Apply(t.Context(), "res", 1, Set(Key("res", "ok"), []byte("v"), 0), Set(key, []byte("v"), 0))
		var cse *CrossSlotError
		if !errors.Is(err, ErrCrossSlot) || !errors.As(err, &cse) || cse.Key != key || cse.Resource != "res" ||
			cse.Slot != Slot(key) || cse.FenceSlot != Slot(FenceKey("res")) {
			t.Fatalf("err=%v, want *CrossSlotError for %q", err, key)
		}
		if !strings.Contains(err.Error(), strconv.Quote(key)) {
			t.Fatalf("err=%q does not name the key", err)
		}
	}
	if n := sent.Load(); n != 0 {
		t.Fatalf("%d commands sent, want 0", n)
	}
	// Any key whose hash tag is in the slot is accepted, not only Key's.
	mustApply(t, g, "res", 1, Set("cache:{res}", []byte("v"), 0), Set("x{res}y", []byte("v"), 0))

	// On a cluster, the server would refuse the script anyway.
	cc := newClusterClient(t)
	err := cc.Eval(t.Context(), scriptSource, []string{FenceKey("res"), "plain"}, "1", "D", "", "", "").Err()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("cluster EVAL across slots: err=%v, want CROSSSLOT", err)
	}
	if err := NewGuard(cc).Apply(t.Context(), "res", 1, Del("plain")); !errors.Is(err, ErrCrossSlot) {
		t.Fatalf("err=%v, want ErrCrossSlot", err)
	}
}

type countHook struct{ n *atomic.Int32 }

func (h countHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h countHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h countHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.n.Add(int32(len(cmds)))
		return next(ctx, cmds)
	}
}

func TestGuard_Invalid(t *testing.T) {
	c := newClient(t)
	var sent atomic.Int32
	c.AddHook(countHook{&sent})
	g := NewGuard(c)
	ctx := t.Context()
	ok := Set(Key("r", "k"), []byte("v"), 0)
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"TokenZero", g.Apply(ctx, "r", 0, ok), fence.ErrInvalidToken},
		{"TokenOverMax", g.Apply(ctx, "r", fence.MaxToken+1, ok), fence.ErrInvalidToken},
		{"ClaimTokenZero", g.Claim(ctx, "r", 0), fence.ErrInvalidToken},
		{"EmptyResource", g.Apply(ctx, "", 1), fence.ErrBadRequest},
		{"ControlInResource", g.Claim(ctx, "a\nb", 1), fence.ErrBadRequest},
		{"ResourceBeginsWithBrace", g.Apply(ctx, "}x", 1), fence.ErrBadRequest},
		{"ZeroOp", g.Apply(ctx, "r", 1, Op{}), fence.ErrBadRequest},
		{"EmptyKey", g.Apply(ctx, "r", 1, Del("")), fence.ErrBadRequest},
		{"NegativeTTL", g.Apply(ctx, "r", 1, Set(Key("r", "k"), nil, -time.Second)), fence.ErrBadRequest},
		{"FenceKey", g.Apply(ctx, "r", 1, Set(FenceKey("r"), []byte("1"), 0)), fence.ErrBadRequest},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: err=%v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if _, err := g.Fence(ctx, ""); !errors.Is(err, fence.ErrBadRequest) {
		t.Errorf("Fence(\"\"): err=%v, want ErrBadRequest", err)
	}
	if n := sent.Load(); n != 0 {
		t.Fatalf("%d commands sent, want 0", n)
	}
}

// TestGuard_BadFenceKey checks that a fence key that does not hold a token
// is an error, never a rejection or an accepted write.
func TestGuard_BadFenceKey(t *testing.T) {
	c := newClient(t)
	g := NewGuard(c)
	for _, v := range []string{"abc", "042", "-1", "99999999999999999999"} {
		c.Set(t.Context(), FenceKey("bad"), v, 0)
		err := g.Apply(t.Context(), "bad", 5, Set(Key("bad", "k"), []byte("v"), 0))
		if err == nil || errors.Is(err, fence.ErrFenced) || !strings.Contains(err.Error(), strconv.Quote(v)) {
			t.Fatalf("fence key %q: err=%v, want an error naming the value", v, err)
		}
		if _, err := g.Fence(t.Context(), "bad"); err == nil {
			t.Fatalf("Fence with fence key %q: no error", v)
		}
		wantMissing(t, c, Key("bad", "k"))
	}
}

// commandCalls returns how many times the server has run name (INFO
// commandstats): server-wide, so tests that use it must not run in parallel.
func commandCalls(t *testing.T, c *goredis.Client, name string) int {
	t.Helper()
	info, err := c.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+name+":calls="); ok {
			n, _, _ := strings.Cut(rest, ",")
			calls, err := strconv.Atoi(n)
			if err != nil {
				t.Fatalf("commandstats line %q: %v", line, err)
			}
			return calls
		}
	}
	return 0
}

// TestGuard_RoundTrips checks that an Apply is one EVALSHA, and that after
// SCRIPT FLUSH one EVAL loads the script again.
func TestGuard_RoundTrips(t *testing.T) {
	c := newClient(t)
	var sent atomic.Int32
	c.AddHook(countHook{&sent})
	g := NewGuard(c)
	mustApply(t, g, "rt", 1, Set(Key("rt", "k"), []byte("v"), 0)) // loads the script if needed

	calls := func() (evalsha, eval int) {
		return commandCalls(t, c, "evalsha"), commandCalls(t, c, "eval")
	}
	sha0, eval0 := calls()
	sent.Store(0)
	for i := range 5 {
		mustApply(t, g, "rt", fence.Token(2+i), Set(Key("rt", "k"), []byte("v"), 0), IncrBy(Key("rt", "n"), 1))
	}
	if n := sent.Load(); n != 5 {
		t.Fatalf("5 Applies sent %d commands, want 5", n)
	}
	sha1, eval1 := calls()
	if sha1-sha0 != 5 || eval1 != eval0 {
		t.Fatalf("5 Applies ran EVALSHA %d times and EVAL %d times, want 5 and 0", sha1-sha0, eval1-eval0)
	}

	if err := c.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	mustApply(t, g, "rt", 10, Set(Key("rt", "k"), []byte("after flush"), 0)) // NOSCRIPT, then EVAL
	mustApply(t, g, "rt", 10, IncrBy(Key("rt", "n"), 1))                     // EVALSHA again
	sha2, eval2 := calls()
	if sha2-sha1 != 2 || eval2-eval1 != 1 {
		t.Fatalf("after SCRIPT FLUSH, 2 Applies ran EVALSHA %d times and EVAL %d times, want 2 and 1", sha2-sha1, eval2-eval1)
	}
	wantString(t, c, Key("rt", "k"), "after flush")
	wantString(t, c, Key("rt", "n"), "6")
}

// TestGuard_Ambiguous checks that an error after the script reached the
// server is returned as it is (never ErrFenced or ErrPreconditionFailed),
// and that the guard does not resend the script: go-redis would, three
// times by default, and a resent write could be refused after it had been
// applied, or applied twice.
func TestGuard_Ambiguous(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode int32
	}{{"ConnectionDropped", drop}, {"ReadTimeout", stall}} {
		t.Run(tc.name, func(t *testing.T) {
			direct := newClient(t)
			p := startProxy(t, serverAddr)
			c := goredis.NewClient(&goredis.Options{
				Addr: p.addr(), DB: direct.Options().DB, PoolSize: 1, MaxRetries: 3,
				ReadTimeout: 200 * time.Millisecond, MinRetryBackoff: time.Millisecond, MaxRetryBackoff: time.Millisecond,
			})
			t.Cleanup(func() { c.Close() })
			g := NewGuard(c)
			const r = "amb"
			mustApply(t, g, r, 1, Set(Key(r, "n"), []byte("0"), 0)) // connects, loads the script

			p.mode.Store(tc.mode)
			err := g.Apply(t.Context(), r, 1, IncrBy(Key(r, "n"), 1), CompareAndSet(Key(r, "c"), nil, []byte("x")))
			if err == nil || errors.Is(err, fence.ErrFenced) || errors.Is(err, fence.ErrPreconditionFailed) {
				t.Fatalf("err=%v, want the connection's error", err)
			}
			// The server ran the script once.
			wantString(t, direct, Key(r, "n"), "1")
			wantString(t, direct, Key(r, "c"), "x")

			// A later Apply, on a new connection, works.
			mustApply(t, g, r, 1, IncrBy(Key(r, "n"), 1))
			wantString(t, direct, Key(r, "n"), "2")
		})
	}
}

func TestKey(t *testing.T) {
	for _, r := range []string{"orders", "a}b", "a{b", "{x}", "x{}y", "with space", "ünï", strings.Repeat("r", fence.MaxNameLen)} {
		if err := checkResource(r); err != nil {
			t.Fatalf("%q: %v", r, err)
		}
		fs := Slot(FenceKey(r))
		for _, name := range []string{"k", "", "}{", "a:b"} {
			if s := Slot(Key(r, name)); s != fs {
				t.Errorf("Slot(Key(%q, %q))=%d, Slot(FenceKey)=%d", r, name, s, fs)
			}
		}
	}
	if got := FenceKey("orders"); got != "fence:{orders}" {
		t.Fatalf("FenceKey=%q", got)
	}
	if got := Key("orders", "total"); got != "{orders}:total" {
		t.Fatalf("Key=%q", got)
	}
}

func TestSlot(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16(123456789)=%#x, want 0x31c3", got)
	}
	keys := []string{
		"", "foo", "bar", "123456789", "{user1000}.following", "{user1000}.followers",
		"foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{", "}", "{}", "a{b", "a}b{c}", "\x00\xff",
		FenceKey("orders"), Key("orders", "total"), strings.Repeat("long key ", 100),
	}
	if Slot("foo") != 12182 || Slot("bar") != 5061 {
		t.Fatalf("Slot(foo)=%d, Slot(bar)=%d; want 12182, 5061", Slot("foo"), Slot("bar"))
	}
	if Slot("{user1000}.following") != Slot("{user1000}.followers") || Slot("foo{bar}{zap}") != Slot("bar") ||
		Slot("foo{{bar}}zap") != Slot("{bar") || Slot("foo{}{bar}") != int(crc16("foo{}{bar}")%Slots) {
		t.Fatal("hash tags are not read as Redis reads them")
	}
	// Against the server's own CLUSTER KEYSLOT.
	cc := newClusterClient(t)
	for i := range 200 {
		keys = append(keys, strconv.Itoa(i*7919), "{"+strconv.Itoa(i)+"}x", "p{"+strconv.Itoa(i))
	}
	for _, k := range keys {
		want, err := cc.ClusterKeySlot(t.Context(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := Slot(k); int64(got) != want {
			t.Fatalf("Slot(%q)=%d, CLUSTER KEYSLOT says %d", k, got, want)
		}
	}
}

func TestTTLMillis(t *testing.T) {
	for _, tc := range []struct {
		ttl  time.Duration
		want string
	}{{0, "0"}, {time.Nanosecond, "1"}, {time.Millisecond, "1"}, {time.Millisecond + 1, "2"}, {time.Hour, "3600000"}} {
		if got := ttlMillis(tc.ttl); got != tc.want {
			t.Errorf("ttlMillis(%v)=%s, want %s", tc.ttl, got, tc.want)
		}
	}
}

func TestDecodeReply(t *testing.T) {
	for _, bad := range []any{nil, "OK", []any{}, []any{int64(0)}, []any{"0", "1"}, []any{int64(0), "1", "x"}} {
		if _, _, ok := decodeReply(bad); ok {
			t.Errorf("decodeReply(%#v) ok", bad)
		}
	}
	if code, arg, ok := decodeReply([]any{int64(1), "42"}); !ok || code != 1 || arg != "42" {
		t.Fatalf("decodeReply: %d %v %v", code, arg, ok)
	}
}

// TestGuard_IncrByExact checks the script's decimal arithmetic against Go's
// int64 on random values, many near the ends of the range, and its reading
// of integers against the server's own INCRBY.
func TestGuard_IncrByExact(t *testing.T) {
	c := newClient(t)
	g := NewGuard(c)
	const r = "exact"
	k := Key(r, "n")
	rng := rand.New(rand.NewPCG(1, 2))
	edge := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return math.MaxInt64 - rng.Int64N(1000)
		case 1:
			return math.MinInt64 + rng.Int64N(1000)
		case 2:
			return rng.Int64N(2000) - 1000
		}
		return int64(rng.Uint64())
	}
	for range 300 {
		a, n := edge(), edge()
		sum := a + n
		overflow := (n > 0 && sum < a) || (n < 0 && sum > a)
		err := g.Apply(t.Context(), r, 1, Set(k, []byte(strconv.FormatInt(a, 10)), 0), IncrBy(k, n))
		switch {
		case overflow && !errors.Is(err, ErrNotInteger):
			t.Fatalf("%d + %d overflows: err=%v, want ErrNotInteger", a, n, err)
		case !overflow && err != nil:
			t.Fatalf("%d + %d: %v", a, n, err)
		case !overflow:
			wantString(t, c, k, strconv.FormatInt(sum, 10))
		}
	}

	// The script reads a value as an integer iff the server's INCRBY does.
	for _, v := range []string{"0", "-0", "00", "01", "+1", " 1", "1 ", "1.5", "", "-", "1e3", "-9223372036854775808",
		"-9223372036854775809", "9223372036854775807", "9223372036854775808", "18446744073709551616", "12345678901234567890123"} {
		c.Set(t.Context(), Key(r, "probe"), v, 0)
		serverErr := c.IncrBy(t.Context(), Key(r, "probe"), 0).Err()
		err := g.Apply(t.Context(), r, 1, Set(k, []byte(v), 0), IncrBy(k, 0))
		if (serverErr == nil) != (err == nil) || (err != nil && !errors.Is(err, ErrNotInteger)) {
			t.Errorf("value %q: INCRBY err=%v, guard err=%v", v, serverErr, err)
		}
	}
}

func TestGuard_Rejections(t *testing.T) {
	g := NewGuard(newClient(t))
	fencetest.TestGuardRejections(t, "redis", func(r *reject.Recorder) { g.Rejections = r }, g.Claim)
}

func TestGuard_Unfenced(t *testing.T) {
	fencetest.TestGuardUnfenced(t, func(t *testing.T, u fence.Unfenced) fencetest.Guarded {
		c := newClient(t)
		g := NewGuard(c)
		g.Unfenced = u
		return guarded{g, c}
	})
}
