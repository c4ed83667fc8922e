package dynamodb_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/fencetest"
	ddbguard "github.com/fence-lock/fence/guard/dynamodb"
	"github.com/fence-lock/fence/guard/reject"
)

// newGuard returns a guard with its fence items in a new table, where the
// test's data items go too.
func newGuard(tb testing.TB) *ddbguard.Guard {
	tb.Helper()
	return ddbguard.NewGuard(testClient(tb), newTable(tb, false))
}

// dataKey is the key of resource's data item k, beside the fence items.
func dataKey(resource, k string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "data#" + resource + "#" + k}}
}

func put(table, resource, k string, v []byte) types.TransactWriteItem {
	item := dataKey(resource, k)
	item["v"] = &types.AttributeValueMemberB{Value: v}
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: item}}
}

func del(table, resource, k string) types.TransactWriteItem {
	return types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(table), Key: dataKey(resource, k)}}
}

func read(tb testing.TB, table, resource, k string) ([]byte, bool) {
	tb.Helper()
	out, err := testClient(tb).GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(table), Key: dataKey(resource, k), ConsistentRead: aws.Bool(true)})
	if err != nil {
		tb.Fatalf("GetItem(%s/%s): %v", resource, k, err)
	}
	if out.Item == nil {
		return nil, false
	}
	b, ok := out.Item["v"].(*types.AttributeValueMemberB)
	if !ok {
		tb.Fatalf("item %s/%s has v=%T", resource, k, out.Item["v"])
	}
	return b.Value, true
}

// guarded adapts a Guard to fencetest.Guarded.
type guarded struct{ g *ddbguard.Guard }

func (a guarded) Write(t *testing.T, resource string, token fence.Token, writes map[string][]byte) error {
	var items []types.TransactWriteItem
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range writes {
			if !yield(k) {
				return
			}
		}
	}) {
		if v := writes[k]; v == nil {
			items = append(items, del(a.g.Table, resource, k))
		} else {
			items = append(items, put(a.g.Table, resource, k, v))
		}
	}
	return a.g.Write(t.Context(), resource, token, items...)
}

func (a guarded) Read(t *testing.T, resource, key string) ([]byte, bool) {
	return read(t, a.g.Table, resource, key)
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
	fencetest.TestGuard(t, func(t *testing.T) fencetest.Guarded { return guarded{newGuard(t)} })
}

func TestGuard_Sequencer(t *testing.T) {
	g := newGuard(t)
	write := func(ctx context.Context, resource string, token fence.Token, claim bool) error {
		if claim {
			return g.Claim(ctx, resource, token)
		}
		return g.Write(ctx, resource, token, put(g.Table, resource, "k", []byte("v")))
	}
	has := func(resource string) bool { _, ok := read(t, g.Table, resource, "k"); return ok }
	fenceOf := func(resource string) fence.Token { return guarded{g}.Fence(t, resource) }
	fencetest.TestGuardSequencers(t, func(ks fence.KeySet) { g.Keys = ks }, write, has, fenceOf)
}

// fenceItem reads resource's fence item as DynamoDB stores it.
func fenceItem(tb testing.TB, g *ddbguard.Guard, resource string) map[string]types.AttributeValue {
	tb.Helper()
	out, err := testClient(tb).GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(g.Table), Key: g.FenceKey(resource), ConsistentRead: aws.Bool(true)})
	if err != nil {
		tb.Fatal(err)
	}
	return out.Item
}

func TestGuard_FenceItem(t *testing.T) {
	g := newGuard(t)
	if err := g.Claim(t.Context(), "orders", 42); err != nil {
		t.Fatal(err)
	}
	item := fenceItem(t, g, "orders")
	pk, _ := item["pk"].(*types.AttributeValueMemberS)
	n, _ := item["fence"].(*types.AttributeValueMemberN)
	if pk == nil || pk.Value != "fence#orders" || n == nil || n.Value != "42" || len(item) != 2 {
		t.Fatalf("fence item %#v, want pk=fence#orders fence=42", item)
	}

	t.Run("Configured", func(t *testing.T) {
		g := ddbguard.NewGuard(testClient(t), newTable(t, true))
		g.KeyAttribute, g.SortKeyAttribute, g.KeyPrefix, g.FenceAttribute = "pk", "sk", "F/", "last"
		if err := g.Write(t.Context(), "r", 9, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(g.Table),
			Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "d"}, "sk": &types.AttributeValueMemberS{Value: "1"}}}}); err != nil {
			t.Fatal(err)
		}
		item := fenceItem(t, g, "r")
		if pk, _ := item["pk"].(*types.AttributeValueMemberS); pk == nil || pk.Value != "F/r" {
			t.Fatalf("fence item %#v", item)
		}
		if sk, _ := item["sk"].(*types.AttributeValueMemberS); sk == nil || sk.Value != ddbguard.DefaultSortKeyValue {
			t.Fatalf("fence item %#v", item)
		}
		if n, _ := item["last"].(*types.AttributeValueMemberN); n == nil || n.Value != "9" {
			t.Fatalf("fence item %#v", item)
		}
		var fe *fence.FencedError
		if err := g.Claim(t.Context(), "r", 8); !errors.As(err, &fe) || fe.LastFence != 9 {
			t.Fatalf("Claim(8): %v, want FencedError with LastFence 9", err)
		}
	})
}

func TestGuard_Claim(t *testing.T) {
	g := newGuard(t)
	fencetest.TestGuardClaims(t, g.Claim, g.Fence)
}

// TestGuard_MaxToken checks that tokens up to 2^63-1 round-trip exactly
// through DynamoDB's decimal numbers, and that the comparison is numeric at
// the top of the range, where a float64 could not tell them apart.
func TestGuard_MaxToken(t *testing.T) {
	g := newGuard(t)
	ctx := t.Context()
	for _, tok := range []fence.Token{fence.MaxToken - 2, fence.MaxToken - 1, fence.MaxToken} {
		if err := g.Write(ctx, "r", tok, put(g.Table, "r", "k", []byte(fmt.Sprint(tok)))); err != nil {
			t.Fatalf("Write(%d): %v", tok, err)
		}
		if f, err := g.Fence(ctx, "r"); err != nil || f != tok {
			t.Fatalf("Fence=%d, %v; want %d", f, err, tok)
		}
		if n := fenceItem(t, g, "r")["fence"].(*types.AttributeValueMemberN); n.Value != fmt.Sprint(uint64(tok)) {
			t.Fatalf("stored %q, want %d", n.Value, tok)
		}
	}
	var fe *fence.FencedError
	err := g.Write(ctx, "r", fence.MaxToken-1, put(g.Table, "r", "k", []byte("stale")))
	if !errors.As(err, &fe) || fe.LastFence != fence.MaxToken || fe.Presented != fence.MaxToken-1 {
		t.Fatalf("Write(2^63-2) after 2^63-1: %v, want FencedError{LastFence: 2^63-1}", err)
	}
	if v, _ := read(t, g.Table, "r", "k"); string(v) != fmt.Sprint(fence.MaxToken) {
		t.Fatalf("k=%q after the refused write", v)
	}
}

// TestGuard_UserCondition: a user item's own failed condition cancels the
// transaction but is the user's error, not a fence refusal; the fence is
// not raised.
func TestGuard_UserCondition(t *testing.T) {
	g := newGuard(t)
	ctx := t.Context()
	if err := g.Claim(ctx, "r", 5); err != nil {
		t.Fatal(err)
	}
	cond := put(g.Table, "r", "k", []byte("v"))
	cond.Put.ConditionExpression = aws.String("attribute_exists(pk)") // k does not exist
	for _, tok := range []fence.Token{5, 6} {
		err := g.Write(ctx, "r", tok, put(g.Table, "r", "other", []byte("x")), cond)
		var tce *types.TransactionCanceledException
		if err == nil || errors.Is(err, fence.ErrFenced) || !errors.As(err, &tce) {
			t.Fatalf("Write(%d) with a failing user condition: %v, want a TransactionCanceledException, not ErrFenced", tok, err)
		}
		if len(tce.CancellationReasons) != 3 || aws.ToString(tce.CancellationReasons[1].Code) != "ConditionalCheckFailed" ||
			aws.ToString(tce.CancellationReasons[2].Code) == "ConditionalCheckFailed" {
			t.Fatalf("reasons %s, want the user item's (index 1) alone ConditionalCheckFailed", codes(tce))
		}
		if !strings.HasPrefix(err.Error(), `dynamodb: write "r": `) {
			t.Fatalf("error %q", err)
		}
	}
	if f, err := g.Fence(ctx, "r"); err != nil || f != 5 {
		t.Fatalf("Fence=%d, %v; want 5: the cancelled transaction raised nothing", f, err)
	}
	if _, ok := read(t, g.Table, "r", "other"); ok {
		t.Fatal("the cancelled transaction wrote another item")
	}
	// Stale AND a failing user condition: fenced, since the token is.
	var fe *fence.FencedError
	if err := g.Write(ctx, "r", 4, cond); !errors.As(err, &fe) || fe.LastFence != 5 {
		t.Fatalf("stale write with a failing condition: %v, want FencedError", err)
	}
}

func codes(tce *types.TransactionCanceledException) []string {
	var s []string
	for _, r := range tce.CancellationReasons {
		s = append(s, aws.ToString(r.Code))
	}
	return s
}

func TestGuard_BadRequest(t *testing.T) {
	g := newGuard(t)
	ctx := t.Context()
	if err := g.Claim(ctx, "r", 10); err != nil {
		t.Fatal(err)
	}
	ok := put(g.Table, "r", "k", []byte("v"))
	fenceKey := g.FenceKey("other")
	fenceKey["fence"] = &types.AttributeValueMemberN{Value: "1"}
	many := make([]types.TransactWriteItem, ddbguard.MaxItems+1)
	for i := range many {
		many[i] = put(g.Table, "r", fmt.Sprint(i), []byte("v"))
	}
	for name, items := range map[string][]types.TransactWriteItem{
		"NoAction":       {{}},
		"TwoActions":     {{Put: ok.Put, Delete: &types.Delete{TableName: aws.String(g.Table), Key: dataKey("r", "x")}}},
		"PutFenceItem":   {{Put: &types.Put{TableName: aws.String(g.Table), Item: fenceKey}}},
		"DeleteFence":    {{Delete: &types.Delete{TableName: aws.String(g.Table), Key: g.FenceKey("r")}}},
		"UpdateFenceARN": {{Update: &types.Update{TableName: aws.String("arn:aws:dynamodb:us-east-1:000000000000:table/" + g.Table), Key: g.FenceKey("x"), UpdateExpression: aws.String("SET fence = :z")}}},
		"TooMany":        many,
	} {
		err := g.Write(ctx, "r", 11, append([]types.TransactWriteItem{ok}, items...)...)
		if !errors.Is(err, fence.ErrBadRequest) || errors.Is(err, fence.ErrFenced) {
			t.Errorf("%s: %v, want ErrBadRequest", name, err)
		}
	}
	// MaxItems fit.
	if err := g.Write(ctx, "r", 11, many[:ddbguard.MaxItems]...); err != nil {
		t.Fatalf("Write(%d items): %v", ddbguard.MaxItems, err)
	}
	for _, tok := range []fence.Token{0, fence.MaxToken + 1, 1<<64 - 1} {
		if err := g.Write(ctx, "r", tok, ok); !errors.Is(err, fence.ErrInvalidToken) {
			t.Errorf("Write(token %d): %v, want ErrInvalidToken", tok, err)
		}
		if err := g.Claim(ctx, "r", tok); !errors.Is(err, fence.ErrInvalidToken) {
			t.Errorf("Claim(token %d): %v, want ErrInvalidToken", tok, err)
		}
	}
	for _, r := range []string{"", "a\nb", strings.Repeat("x", fence.MaxNameLen+1), "\xff"} {
		if err := g.Write(ctx, r, 12, ok); !errors.Is(err, fence.ErrBadRequest) {
			t.Errorf("Write(%q): %v, want ErrBadRequest", r, err)
		}
		if err := g.Claim(ctx, r, 12); !errors.Is(err, fence.ErrBadRequest) {
			t.Errorf("Claim(%q): %v, want ErrBadRequest", r, err)
		}
		if _, err := g.Fence(ctx, r); !errors.Is(err, fence.ErrBadRequest) {
			t.Errorf("Fence(%q): %v, want ErrBadRequest", r, err)
		}
	}
	if f, err := g.Fence(ctx, "r"); err != nil || f != 11 {
		t.Fatalf("Fence=%d, %v; want 11", f, err)
	}
	var zero ddbguard.Guard // no table, no client: an error, no panic
	if err := zero.Write(ctx, "r", 1); !errors.Is(err, fence.ErrBadRequest) {
		t.Fatalf("zero Guard: %v", err)
	}
}

func TestGuard_NotANumber(t *testing.T) {
	g := newGuard(t)
	ctx := t.Context()
	for _, v := range []types.AttributeValue{
		&types.AttributeValueMemberS{Value: "99"},
		&types.AttributeValueMemberN{Value: "0"},
		&types.AttributeValueMemberN{Value: "-5"},
		&types.AttributeValueMemberN{Value: "1.5"},
		&types.AttributeValueMemberN{Value: "99999999999999999999"},
	} {
		item := g.FenceKey("r")
		item["fence"] = v
		if _, err := testClient(t).PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(g.Table), Item: item}); err != nil {
			t.Fatal(err)
		}
		if f, err := g.Fence(ctx, "r"); err == nil {
			t.Errorf("Fence with %#v: %d, want an error", v, f)
		}
		err := g.Claim(ctx, "r", 3)
		if errors.Is(err, fence.ErrFenced) {
			t.Errorf("Claim with fence %#v: %v, want no FencedError", v, err)
		}
	}
}

func TestGuard_CancelledContext(t *testing.T) {
	g := newGuard(t)
	if err := g.Claim(t.Context(), "r", 10); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tok := range []fence.Token{9, 10, 11} {
		err := g.Write(ctx, "r", tok, put(g.Table, "r", "k", []byte("v")))
		if err == nil || errors.Is(err, fence.ErrFenced) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Write(%d) with a cancelled context: %v, want context.Canceled, not ErrFenced", tok, err)
		}
		if err := g.Claim(ctx, "r", tok); err == nil || errors.Is(err, fence.ErrFenced) {
			t.Fatalf("Claim(%d) with a cancelled context: %v", tok, err)
		}
	}
}

// TestGuard_Race: writers race with tokens that go up; the holder of the
// highest token always commits, a stale holder is refused, and the final
// state is the highest token's write.
func TestGuard_Race(t *testing.T) {
	g := newGuard(t)
	ctx := t.Context()
	const writers, rounds = 8, 12
	var mu sync.Mutex
	accepted := map[fence.Token]int{} // token -> writer
	conflicts := 0
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range rounds {
				tok := fence.Token(1 + i*writers + w) // distinct, rising per writer
				err := g.Write(ctx, "race", tok, put(g.Table, "race", "a", []byte(fmt.Sprint(tok))), put(g.Table, "race", "b", []byte(fmt.Sprint(tok))))
				var fe *fence.FencedError
				var tce *types.TransactionCanceledException
				switch {
				case err == nil:
					mu.Lock()
					accepted[tok] = w
					mu.Unlock()
				case errors.As(err, &fe):
					if fe.LastFence <= tok {
						t.Errorf("token %d fenced by %d", tok, fe.LastFence)
					}
				case errors.As(err, &tce) && slices.Contains(codes(tce), "TransactionConflict"):
					// Another transaction held the fence item: not a verdict.
					mu.Lock()
					conflicts++
					mu.Unlock()
				default:
					t.Errorf("Write(%d): %v", tok, err)
				}
			}
		})
	}
	wg.Wait()
	top := fence.Token(writers * rounds)
	// A fresh holder (above all) commits; the stale one is refused.
	if err := g.Write(ctx, "race", top+1, put(g.Table, "race", "a", []byte("fresh")), put(g.Table, "race", "b", []byte("fresh"))); err != nil {
		t.Fatalf("fresh holder: %v", err)
	}
	var fe *fence.FencedError
	if err := g.Write(ctx, "race", top, put(g.Table, "race", "a", []byte("stale"))); !errors.As(err, &fe) || fe.LastFence != top+1 {
		t.Fatalf("stale holder: %v, want FencedError{LastFence: %d}", err, top+1)
	}
	a, _ := read(t, g.Table, "race", "a")
	b, _ := read(t, g.Table, "race", "b")
	if string(a) != "fresh" || string(b) != "fresh" {
		t.Fatalf("a=%q b=%q, want the fresh holder's", a, b)
	}
	if f, _ := g.Fence(ctx, "race"); f != top+1 {
		t.Fatalf("Fence=%d, want %d", f, top+1)
	}
	if len(accepted) == 0 {
		t.Fatal("no write accepted in the race")
	}
	t.Logf("%d of %d racing writes accepted, %d cancelled by a conflict", len(accepted), writers*rounds, conflicts)
}

func TestGuard_Rejections(t *testing.T) {
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	rec, err := reject.New("dynamodb", slog.New(slog.NewTextHandler(&logs, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	g := newGuard(t)
	g.Rejections = rec
	ctx := t.Context()
	if err := g.Write(ctx, "r", 5, put(g.Table, "r", "k", []byte("v"))); err != nil {
		t.Fatal(err)
	}
	g.Write(ctx, "r", 4, put(g.Table, "r", "k", []byte("v"))) // fenced
	g.Claim(ctx, "r", 3)                                      // fenced
	g.Claim(ctx, "r", 0)                                      // invalid token
	g.Write(ctx, "", 9)                                       // bad request
	cond := put(g.Table, "r", "k", []byte("v"))
	cond.Put.ConditionExpression = aws.String("attribute_not_exists(pk)")
	g.Write(ctx, "r", 6, cond) // the user's condition: not a rejection
	key, _ := fence.GenerateSigningKey()
	g.Keys = fence.KeySet{key.ID: key.Public().Key}
	g.Claim(ctx, "r", 7) // no sequencer
	want := map[string]float64{reject.ReasonFenced: 2, reject.ReasonInvalidToken: 1, reject.ReasonBadRequest: 1, reject.ReasonInvalidSequencer: 1}
	for reason, n := range want {
		got, err := counter(reg, reason)
		if err != nil || got != n {
			t.Errorf("%s{store=dynamodb,reason=%s} = %g (%v), want %g", reject.MetricName, reason, got, err, n)
		}
	}
	if out := logs.String(); strings.Count(out, "guarded write rejected") != 5 || !strings.Contains(out, "last_fence=5") || !strings.Contains(out, "op=claim") {
		t.Fatalf("logs:\n%s", out)
	}
}

func counter(reg *prometheus.Registry, reason string) (float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() != reject.MetricName {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["store"] == "dynamodb" && labels["reason"] == reason {
				return m.GetCounter().GetValue(), nil
			}
		}
	}
	return 0, fmt.Errorf("no series")
}

// countingDB counts the calls a Guard makes.
type countingDB struct {
	ddbguard.API
	mu    sync.Mutex
	calls []string
}

func (c *countingDB) count(op string) {
	c.mu.Lock()
	c.calls = append(c.calls, op)
	c.mu.Unlock()
}

func (c *countingDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.count("TransactWriteItems")
	return c.API.TransactWriteItems(ctx, in, opts...)
}

func (c *countingDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.count("UpdateItem")
	return c.API.UpdateItem(ctx, in, opts...)
}

func (c *countingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.count("GetItem")
	return c.API.GetItem(ctx, in, opts...)
}

// TestGuard_OneRoundTrip: a write is one TransactWriteItems and a claim one
// UpdateItem, refused or not: the server returns the fence item's old image
// with the refusal (ReturnValuesOnConditionCheckFailure), so no read follows.
func TestGuard_OneRoundTrip(t *testing.T) {
	db := &countingDB{API: testClient(t)}
	g := ddbguard.NewGuard(db, newTable(t, false))
	for _, tc := range []struct {
		name  string
		claim bool
		token fence.Token
		err   error
	}{{"Absent", false, 5, nil}, {"Higher", false, 6, nil}, {"Equal", false, 6, nil}, {"Stale", false, 5, fence.ErrFenced},
		{"ClaimHigher", true, 7, nil}, {"ClaimStale", true, 6, fence.ErrFenced}} {
		db.mu.Lock()
		db.calls = nil
		db.mu.Unlock()
		var err error
		want := "TransactWriteItems"
		if tc.claim {
			err, want = g.Claim(t.Context(), "r", tc.token), "UpdateItem"
		} else {
			err = g.Write(t.Context(), "r", tc.token, put(g.Table, "r", "k", []byte(tc.name)))
		}
		if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.err)
		}
		db.mu.Lock()
		calls := slices.Clone(db.calls)
		db.mu.Unlock()
		if len(calls) != 1 || calls[0] != want {
			t.Fatalf("%s: calls %q, want one %s", tc.name, calls, want)
		}
	}
}

func TestGuard_Unfenced(t *testing.T) {
	fencetest.TestGuardUnfenced(t, func(t *testing.T, u fence.Unfenced) fencetest.Guarded {
		g := newGuard(t)
		g.Unfenced = u
		return guarded{g}
	})
}
