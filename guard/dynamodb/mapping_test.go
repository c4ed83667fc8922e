package dynamodb_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/fence-lock/fence"
	ddbguard "github.com/fence-lock/fence/guard/dynamodb"
)

// fakeDB answers every call with the error it is given, and GetItem with a
// fence item holding getFence (none if 0); it counts the GetItems.
type fakeDB struct {
	err      error
	getFence string
	gets     int
	last     *dynamodb.TransactWriteItemsInput
}

func (f *fakeDB) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	f.last = in
	return nil, f.err
}

func (f *fakeDB) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, f.err
}

func (f *fakeDB) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.gets++
	if f.getFence == "" {
		return &dynamodb.GetItemOutput{}, nil
	}
	return &dynamodb.GetItemOutput{Item: map[string]types.AttributeValue{"fence": &types.AttributeValueMemberN{Value: f.getFence}}}, nil
}

func reason(code string, fence string) types.CancellationReason {
	r := types.CancellationReason{Code: aws.String(code)}
	if fence != "" {
		r.Item = map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "fence#r"}, "fence": &types.AttributeValueMemberN{Value: fence}}
	}
	return r
}

func cancelled(reasons ...types.CancellationReason) error {
	// As the SDK returns it: wrapped in an operation error.
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "TransactWriteItems",
		Err: &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: reasons}}
}

// TestCancellationMapping: only ConditionalCheckFailed at the fence item's
// index (the last) is a refusal of the token.
func TestCancellationMapping(t *testing.T) {
	item := types.TransactWriteItem{Put: &types.Put{TableName: aws.String("t"),
		Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "data"}}}}
	for _, tc := range []struct {
		name     string
		err      error
		getFence string
		fenced   bool
		last     fence.Token
		gets     int
	}{
		{"FenceFailed", cancelled(reason("None", ""), reason("ConditionalCheckFailed", "9")), "", true, 9, 0},
		{"FenceFailedNoOldImage", cancelled(reason("None", ""), reason("ConditionalCheckFailed", "")), "12", true, 12, 1},
		{"BothFailed", cancelled(reason("ConditionalCheckFailed", ""), reason("ConditionalCheckFailed", "9")), "", true, 9, 0},
		{"OtherIndexFailed", cancelled(reason("ConditionalCheckFailed", ""), reason("None", "")), "9", false, 0, 0},
		{"OtherIndexFailedFenceEmpty", cancelled(reason("ConditionalCheckFailed", ""), types.CancellationReason{}), "9", false, 0, 0},
		{"Conflict", cancelled(reason("None", ""), reason("TransactionConflict", "")), "9", false, 0, 0},
		{"Throttled", cancelled(reason("None", ""), reason("ThrottlingError", "")), "9", false, 0, 0},
		{"CapacityExceeded", cancelled(reason("ProvisionedThroughputExceeded", ""), reason("None", "")), "9", false, 0, 0},
		{"ValidationError", cancelled(reason("ValidationError", ""), reason("None", "")), "9", false, 0, 0},
		{"TooFewReasons", cancelled(reason("ConditionalCheckFailed", "9")), "9", false, 0, 0},
		{"TooManyReasons", cancelled(reason("None", ""), reason("None", ""), reason("ConditionalCheckFailed", "9")), "9", false, 0, 0},
		{"NoReasons", cancelled(), "9", false, 0, 0},
		{"ConditionalCheckFailedException", &types.ConditionalCheckFailedException{}, "9", false, 0, 0}, // not a transaction's
		{"Conflicting", &types.TransactionConflictException{}, "9", false, 0, 0},
		{"InProgress", &types.TransactionInProgressException{}, "9", false, 0, 0},
		{"Other", errors.New("connection reset"), "9", false, 0, 0},
		// The condition failed, but the fence is not above the token: not a
		// verdict the guard can stand behind.
		{"FailedButLow", cancelled(reason("None", ""), reason("ConditionalCheckFailed", "5")), "", false, 0, 0},
		{"FailedButNotANumber", cancelled(reason("None", ""), types.CancellationReason{Code: aws.String("ConditionalCheckFailed"),
			Item: map[string]types.AttributeValue{"fence": &types.AttributeValueMemberS{Value: "9"}}}), "", false, 0, 0},
		{"FailedReadLow", cancelled(reason("None", ""), reason("ConditionalCheckFailed", "")), "", false, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := &fakeDB{err: tc.err, getFence: tc.getFence}
			g := ddbguard.NewGuard(db, "t")
			err := g.Write(t.Context(), "r", 5, item)
			var fe *fence.FencedError
			if tc.fenced != errors.As(err, &fe) || err == nil {
				t.Fatalf("Write: %v, want fenced=%v", err, tc.fenced)
			}
			if tc.fenced && (*fe != fence.FencedError{Resource: "r", Presented: 5, LastFence: tc.last}) {
				t.Fatalf("FencedError %+v, want LastFence %d", fe, tc.last)
			}
			if !tc.fenced && !errors.Is(err, tc.err) {
				t.Fatalf("Write: %v, want it to wrap %v", err, tc.err)
			}
			if db.gets != tc.gets {
				t.Fatalf("%d GetItems, want %d", db.gets, tc.gets)
			}
			if n := len(db.last.TransactItems); n != 2 || db.last.TransactItems[1].Update == nil ||
				db.last.TransactItems[1].Update.ReturnValuesOnConditionCheckFailure != types.ReturnValuesOnConditionCheckFailureAllOld {
				t.Fatalf("transaction %+v, want the user's item then the fence's update (ALL_OLD)", db.last.TransactItems)
			}
		})
	}
}

func TestClaimMapping(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		fenced bool
	}{
		{"Failed", &types.ConditionalCheckFailedException{Item: map[string]types.AttributeValue{"fence": &types.AttributeValueMemberN{Value: "9"}}}, true},
		{"FailedWrapped", fmt.Errorf("op: %w", &types.ConditionalCheckFailedException{}), true}, // read: 9
		{"Throttled", &types.ProvisionedThroughputExceededException{}, false},
		{"Conflict", &types.TransactionConflictException{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := &fakeDB{err: tc.err, getFence: "9"}
			err := ddbguard.NewGuard(db, "t").Claim(t.Context(), "r", 5)
			var fe *fence.FencedError
			if tc.fenced != errors.As(err, &fe) || (tc.fenced && fe.LastFence != 9) {
				t.Fatalf("Claim: %v, want fenced=%v (LastFence 9)", err, tc.fenced)
			}
		})
	}
}
