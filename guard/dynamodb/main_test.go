package dynamodb_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fence-lock/fence/internal/tools/testserver"
)

// The tests share one local DynamoDB-compatible server (DynamoDB Local,
// started by TestMain with internal/tools/testserver, in memory, on a free port),
// reached on 127.0.0.1 with made-up static credentials. Each test works in
// tables of its own.

var (
	server   *testserver.DynamoDB
	cli      *dynamodb.Client
	noServer error // why there is no server: testserver.ErrNotInstalled, or a failed start
	tableN   atomic.Int64
)

func TestMain(m *testing.M) {
	dir, err := testserver.MkdirTemp("fence-dynamodb-")
	if err == nil {
		server, err = testserver.StartDynamoDB(dir)
	}
	if err != nil {
		noServer = err
	} else {
		cli = newClient(server.Endpoint)
	}
	code := m.Run()
	server.Close()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// newClient returns a client of the endpoint with static fake credentials:
// nothing here can reach AWS.
func newClient(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "fencetest", SecretAccessKey: "fencetest", Source: "fence tests"}, nil
		}),
	})
}

// testClient returns the shared client. It skips the test when the local
// server cannot be installed (no java, no npm), unless
// FENCE_REQUIRE_SERVERS=1, and fails it when the server did not start.
func testClient(tb testing.TB) *dynamodb.Client {
	tb.Helper()
	if noServer != nil {
		testserver.Require(tb, noServer)
	}
	return cli
}

// newTable creates a table of its own for one test, with a string partition
// key "pk" (and a string sort key "sk" if sorted), and returns its name.
func newTable(tb testing.TB, sorted bool) string {
	tb.Helper()
	c := testClient(tb)
	name := fmt.Sprintf("fence-test-%d", tableN.Add(1))
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	}
	if sorted {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS})
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange})
	}
	if _, err := c.CreateTable(context.Background(), in); err != nil {
		tb.Fatalf("CreateTable(%s): %v", name, err)
	}
	return name
}
