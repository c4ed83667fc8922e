package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/guard/reject"
)

// Defaults of the Guard's fields.
const (
	// DefaultKeyAttribute is the default Guard.KeyAttribute: the table's
	// partition key, a string.
	DefaultKeyAttribute = "pk"
	// DefaultKeyPrefix is the default Guard.KeyPrefix: the fence item of
	// resource r has the partition key "fence#" + r.
	DefaultKeyPrefix = "fence#"
	// DefaultFenceAttribute is the default Guard.FenceAttribute: the number
	// attribute of a fence item that holds the resource's last fence.
	DefaultFenceAttribute = "fence"
	// DefaultSortKeyValue is the sort key of fence items when
	// Guard.SortKeyAttribute is set.
	DefaultSortKeyValue = "fence"
)

// MaxItems is the most items Write takes: DynamoDB's limit of 100 actions in
// one transaction, less the fence item's.
const MaxItems = 99

// API is the part of the DynamoDB client that a Guard uses. A
// *dynamodb.Client is one.
type API interface {
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// Guard enforces fencing tokens on writes to a DynamoDB table, with one fence
// item per resource in that table. Create one with NewGuard; set its fields
// before the first call and do not change them after. A Guard is safe for
// concurrent use.
//
// Write and Claim return *fence.FencedError when the token is lower than
// the resource's last fence, and then change nothing. They return an error
// wrapping fence.ErrInvalidToken, fence.ErrBadRequest or
// fence.ErrInvalidSequencer before sending anything, for a bad token,
// resource, item or sequencer. Any other error is DynamoDB's, wrapped: a
// cancelled transaction for another reason than the fence (a user item's
// own condition, a conflict, throttling), or one whose outcome is unknown
// (a deadline, a lost connection: the write may or may not have been
// applied). It is never reported as fence.ErrFenced.
type Guard struct {
	// Table is the name of the table that holds the fence items (and, for
	// Write, usually the user's items too: they may be in any table of the
	// account and region). Required.
	Table string

	// KeyAttribute is the table's partition key attribute, of type string.
	// Default (and when empty): DefaultKeyAttribute.
	KeyAttribute string

	// KeyPrefix is prefixed to the resource name to make its fence item's
	// partition key. Default (and when empty): DefaultKeyPrefix. Every
	// guard of a resource must use the same Table, KeyAttribute, KeyPrefix
	// and SortKeyAttribute, and no other writer may write items whose
	// partition key starts with KeyPrefix.
	KeyPrefix string

	// SortKeyAttribute is the table's sort key attribute, of type string,
	// if it has one: fence items then have the sort key
	// DefaultSortKeyValue. Empty: the table has a partition key only.
	SortKeyAttribute string

	// FenceAttribute is the number attribute of a fence item that holds the
	// last fence. Default (and when empty): DefaultFenceAttribute.
	FenceAttribute string

	// Keys are the lock service's public keys. nil: sequencers are not
	// required. Set: every guarded write and claim (Write, Claim) requires
	// a valid sequencer for its resource and token in ctx
	// (fence.WithSequencer), checked before anything is sent to DynamoDB;
	// otherwise it returns an error wrapping fence.ErrInvalidSequencer and
	// changes nothing. A valid sequencer never makes a stale token
	// acceptable.
	Keys fence.KeySet

	// Rejections logs and counts the writes and claims the guard refuses
	// (reject.New("dynamodb", ...)). nil: none are recorded.
	Rejections *reject.Recorder

	// Unfenced names best-effort resources (see fence.Unfenced): Write with
	// token 0 on one of them writes the items alone, in one transaction, the
	// fence neither checked nor raised. Set it before the first call.
	Unfenced fence.Unfenced

	db API
}

// NewGuard returns a Guard that keeps its fence items in table, through db
// (usually a *dynamodb.Client), with the default key and attribute names.
func NewGuard(db API, table string) *Guard {
	return &Guard{Table: table, db: db}
}

func (g *Guard) keyAttribute() string   { return or(g.KeyAttribute, DefaultKeyAttribute) }
func (g *Guard) keyPrefix() string      { return or(g.KeyPrefix, DefaultKeyPrefix) }
func (g *Guard) fenceAttribute() string { return or(g.FenceAttribute, DefaultFenceAttribute) }

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// FenceKey returns the primary key of resource's fence item: KeyAttribute =
// KeyPrefix + resource (and SortKeyAttribute = DefaultSortKeyValue, if
// set). The item is absent until the resource's first fenced write or
// claim.
func (g *Guard) FenceKey(resource string) map[string]types.AttributeValue {
	key := map[string]types.AttributeValue{
		g.keyAttribute(): &types.AttributeValueMemberS{Value: g.keyPrefix() + resource},
	}
	if g.SortKeyAttribute != "" {
		key[g.SortKeyAttribute] = &types.AttributeValueMemberS{Value: DefaultSortKeyValue}
	}
	return key
}

// Write writes items, the user's own puts, updates, deletes and condition
// checks, in one TransactWriteItems together with a conditional update of
// resource's fence item, if token >= the resource's last fence: the
// transaction commits all of them, the fence raised to token included, or
// none. It makes one round trip (the SDK may retry it, with the same
// ClientRequestToken, which makes a retry of a committed transaction
// succeed without applying it twice).
//
// The fence item is the transaction's last action, after the items: in a
// *types.TransactionCanceledException that Write returns wrapped, the
// CancellationReasons of items[i] is at index i. If the token is stale,
// Write returns *fence.FencedError and changes nothing; if an item's own
// condition fails, or the transaction is cancelled for another reason
// (TransactionConflict, throttling), it returns that error wrapped, never
// ErrFenced. At most MaxItems items, none of them a fence item (an item of
// Table whose KeyAttribute starts with KeyPrefix), each with exactly one of
// ConditionCheck, Put, Update and Delete; otherwise an error wrapping
// fence.ErrBadRequest, before anything is sent. See Guard for the other
// errors.
func (g *Guard) Write(ctx context.Context, resource string, token fence.Token, items ...types.TransactWriteItem) error {
	return g.Rejections.Observe(ctx, "write", resource, token, g.write(ctx, resource, token, items))
}

func (g *Guard) write(ctx context.Context, resource string, token fence.Token, items []types.TransactWriteItem) error {
	if token == 0 && g.Unfenced.Has(resource) {
		// Best effort: the items alone, in one transaction, without the fence.
		if err := g.check(ctx, resource, 1); err != nil && !errors.Is(err, fence.ErrInvalidSequencer) {
			return fmt.Errorf("dynamodb: write %q: %w", resource, err)
		}
		if err := g.checkItems(items); err != nil {
			return fmt.Errorf("dynamodb: write %q: %w", resource, err)
		}
		if len(items) == 0 {
			return nil
		}
		if _, err := g.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}); err != nil {
			return fmt.Errorf("dynamodb: write %q: %w", resource, err)
		}
		return nil
	}
	if err := g.check(ctx, resource, token); err != nil {
		return fmt.Errorf("dynamodb: write %q: %w", resource, err)
	}
	if err := g.checkItems(items); err != nil {
		return fmt.Errorf("dynamodb: write %q: %w", resource, err)
	}
	actions := make([]types.TransactWriteItem, 0, len(items)+1)
	actions = append(actions, items...)
	up := g.update(resource, token)
	actions = append(actions, types.TransactWriteItem{Update: &types.Update{
		TableName:                           up.TableName,
		Key:                                 up.Key,
		UpdateExpression:                    up.UpdateExpression,
		ConditionExpression:                 up.ConditionExpression,
		ExpressionAttributeNames:            up.ExpressionAttributeNames,
		ExpressionAttributeValues:           up.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}})
	_, err := g.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: actions})
	if err == nil {
		return nil
	}
	return g.refusal(ctx, "write", resource, token, fenceRefusal(err, len(items)), err)
}

// Claim raises resource's last fence to token without writing anything else,
// as a lock grant does, so that holders of lower tokens are refused from now
// on: one conditional UpdateItem. It returns nil if token >= the last fence
// (an equal token is a retry), and *fence.FencedError otherwise. See Guard
// for the other errors.
func (g *Guard) Claim(ctx context.Context, resource string, token fence.Token) error {
	return g.Rejections.Observe(ctx, "claim", resource, token, g.claim(ctx, resource, token))
}

func (g *Guard) claim(ctx context.Context, resource string, token fence.Token) error {
	if err := g.check(ctx, resource, token); err != nil {
		return fmt.Errorf("dynamodb: claim %q: %w", resource, err)
	}
	_, err := g.db.UpdateItem(ctx, g.update(resource, token))
	if err == nil {
		return nil
	}
	var r refusalInfo
	if ccf := (*types.ConditionalCheckFailedException)(nil); errors.As(err, &ccf) {
		r = refusalInfo{fenced: true, item: ccf.Item}
	}
	return g.refusal(ctx, "claim", resource, token, r, err)
}

// Fence returns resource's last fence, 0 if it was never fenced, with a
// strongly consistent GetItem.
func (g *Guard) Fence(ctx context.Context, resource string) (fence.Token, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return 0, fmt.Errorf("dynamodb: fence: %w", err)
	}
	if g.Table == "" {
		return 0, fmt.Errorf("dynamodb: fence %q: %w: Guard.Table is empty", resource, fence.ErrBadRequest)
	}
	last, err := g.read(ctx, resource)
	if err != nil {
		return 0, fmt.Errorf("dynamodb: fence %q: %w", resource, err)
	}
	return last, nil
}

// check validates the arguments of Write and Claim, and the sequencer.
func (g *Guard) check(ctx context.Context, resource string, token fence.Token) error {
	if err := fence.ValidateResource(resource); err != nil {
		return err
	}
	if !token.Valid() {
		return fmt.Errorf("%w: %d", fence.ErrInvalidToken, uint64(token))
	}
	if g.Table == "" {
		return fmt.Errorf("%w: Guard.Table is empty", fence.ErrBadRequest)
	}
	return g.Keys.Check(ctx, resource, token)
}

// checkItems returns an error wrapping fence.ErrBadRequest unless items fit
// in a transaction with the fence item, each is one action, and none is a
// fence item (a write there could lower a fence).
func (g *Guard) checkItems(items []types.TransactWriteItem) error {
	if len(items) > MaxItems {
		return fmt.Errorf("%w: %d items, more than the %d that fit in a transaction with the fence item", fence.ErrBadRequest, len(items), MaxItems)
	}
	for i, it := range items {
		var table *string
		var key map[string]types.AttributeValue
		n := 0
		if c := it.ConditionCheck; c != nil {
			n, table, key = n+1, c.TableName, c.Key
		}
		if p := it.Put; p != nil {
			n, table, key = n+1, p.TableName, p.Item
		}
		if u := it.Update; u != nil {
			n, table, key = n+1, u.TableName, u.Key
		}
		if d := it.Delete; d != nil {
			n, table, key = n+1, d.TableName, d.Key
		}
		if n != 1 {
			return fmt.Errorf("%w: item %d has %d actions, want exactly one of ConditionCheck, Put, Update and Delete", fence.ErrBadRequest, i, n)
		}
		if table == nil || !g.sameTable(*table) {
			continue
		}
		if s, ok := key[g.keyAttribute()].(*types.AttributeValueMemberS); ok && strings.HasPrefix(s.Value, g.keyPrefix()) {
			return fmt.Errorf("%w: item %d is in the fence items' key space (%s begins with %q)", fence.ErrBadRequest, i, g.keyAttribute(), g.keyPrefix())
		}
	}
	return nil
}

// sameTable reports whether name, a table name or ARN, names Table.
func (g *Guard) sameTable(name string) bool {
	return name == g.Table || strings.HasSuffix(name, ":table/"+g.Table) || strings.HasSuffix(g.Table, ":table/"+name)
}

// update is the conditional raise of the fence: set it to token if it is
// absent or <= token.
func (g *Guard) update(resource string, token fence.Token) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(g.Table),
		Key:                                 g.FenceKey(resource),
		UpdateExpression:                    aws.String("SET #f = :t"),
		ConditionExpression:                 aws.String("attribute_not_exists(#f) OR #f <= :t"),
		ExpressionAttributeNames:            map[string]string{"#f": g.fenceAttribute()},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":t": &types.AttributeValueMemberN{Value: strconv.FormatUint(uint64(token), 10)}},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// refusalInfo says whether DynamoDB refused the fence's condition, and the
// fence item's old image if it returned one.
type refusalInfo struct {
	fenced bool
	item   map[string]types.AttributeValue
}

// fenceRefusal reads err, TransactWriteItems' error, for the fence item's
// verdict: refused only if err is a TransactionCanceledException whose
// cancellation reason at index fenceIndex (the fence item's) has the code
// ConditionalCheckFailed. A conflict, a throttle, a user item's failed
// condition, or reasons that do not line up with the transaction's actions
// are not a refusal of the token.
func fenceRefusal(err error, fenceIndex int) refusalInfo {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || len(tce.CancellationReasons) != fenceIndex+1 {
		return refusalInfo{}
	}
	r := tce.CancellationReasons[fenceIndex]
	if aws.ToString(r.Code) != "ConditionalCheckFailed" {
		return refusalInfo{}
	}
	return refusalInfo{fenced: true, item: r.Item}
}

// refusal turns err into the operation's error: a *fence.FencedError if
// the fence's condition refused token (LastFence from the old image, or
// else a consistent read), otherwise err wrapped.
func (g *Guard) refusal(ctx context.Context, op, resource string, token fence.Token, r refusalInfo, err error) error {
	if !r.fenced {
		return fmt.Errorf("dynamodb: %s %q: %w", op, resource, err)
	}
	var last fence.Token
	var rerr error
	if len(r.item) > 0 {
		last, rerr = g.decode(r.item)
	} else { // a server that does not return the old image
		last, rerr = g.read(ctx, resource)
	}
	if rerr != nil {
		return fmt.Errorf("dynamodb: %s %q: refused by the fence's condition, but reading the fence: %w (%w)", op, resource, rerr, err)
	}
	if last <= token {
		// The fence attribute was not a number, or (read after the
		// refusal) the fence item was lowered or deleted meanwhile.
		return fmt.Errorf("dynamodb: %s %q: token %d refused by the fence's condition, but the fence is %d: %w", op, resource, token, last, err)
	}
	return &fence.FencedError{Resource: resource, Presented: token, LastFence: last}
}

// read returns the fence from a strongly consistent GetItem.
func (g *Guard) read(ctx context.Context, resource string) (fence.Token, error) {
	out, err := g.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                aws.String(g.Table),
		Key:                      g.FenceKey(resource),
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#f"),
		ExpressionAttributeNames: map[string]string{"#f": g.fenceAttribute()},
	})
	if err != nil {
		return 0, err
	}
	if len(out.Item) == 0 {
		return 0, nil
	}
	return g.decode(out.Item)
}

// decode returns the fence in a fence item: 0 if the attribute is absent.
func (g *Guard) decode(item map[string]types.AttributeValue) (fence.Token, error) {
	v, ok := item[g.fenceAttribute()]
	if !ok {
		return 0, nil
	}
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("fence attribute %q is a %T, not a number", g.fenceAttribute(), v)
	}
	t, err := parseToken(n.Value)
	if err != nil {
		return 0, fmt.Errorf("fence attribute %q: %w", g.fenceAttribute(), err)
	}
	return t, nil
}

// parseToken parses a DynamoDB number, a decimal string, as a token in
// 1..fence.MaxToken. DynamoDB returns a number as it was stored, here always
// in strconv.FormatUint's form; any other form is refused, not guessed at.
func parseToken(s string) (fence.Token, error) {
	u, err := strconv.ParseUint(s, 10, 64)
	if t := fence.Token(u); err != nil || !t.Valid() {
		return 0, fmt.Errorf("%.40q is not a token (1..%d)", s, uint64(fence.MaxToken))
	}
	return fence.Token(u), nil
}
