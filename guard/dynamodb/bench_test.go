package dynamodb_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// BenchmarkWrite measures one item written three ways on the local server:
// through the guard (one TransactWriteItems of the item and the fence
// update), and without it, as a TransactWriteItems of the item alone and as
// a PutItem.
//
// The JVM of the local server compiles its hot paths during the first few
// thousand requests: all three are warmed up first, so that the first one
// measured is not the slowest for that reason alone.
func BenchmarkWrite(b *testing.B) {
	warm := newGuard(b)
	for i := range 3000 {
		item := put(warm.Table, "warm", "k", []byte("value"))
		var err error
		switch i % 3 {
		case 0:
			err = warm.Write(b.Context(), "warm", 1, item)
		case 1:
			_, err = testClient(b).TransactWriteItems(b.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{item}})
		default:
			_, err = testClient(b).PutItem(b.Context(), &dynamodb.PutItemInput{TableName: aws.String(warm.Table), Item: item.Put.Item})
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Run("Guarded", func(b *testing.B) {
		g := newGuard(b)
		item := put(g.Table, "bench", "k", []byte("value"))
		for b.Loop() {
			if err := g.Write(b.Context(), "bench", 7, item); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("BareTransactWriteItems", func(b *testing.B) {
		table := newTable(b, false)
		items := []types.TransactWriteItem{put(table, "bench", "k", []byte("value"))}
		for b.Loop() {
			// A new input each time: the SDK sets its ClientRequestToken,
			// and a reused token would make the server answer from its
			// idempotency cache.
			in := &dynamodb.TransactWriteItemsInput{TransactItems: items}
			if _, err := testClient(b).TransactWriteItems(b.Context(), in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("BarePutItem", func(b *testing.B) {
		table := newTable(b, false)
		item := put(table, "bench", "k", []byte("value")).Put.Item
		for b.Loop() {
			if _, err := testClient(b).PutItem(b.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
