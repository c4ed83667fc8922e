package s3_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fence-lock/fence/internal/tools/testserver"
)

// The tests share one SeaweedFS server (master, volume, filer and S3
// gateway, started by TestMain with internal/tools/testserver on loopback
// ports), reached with made-up static credentials, which it does not check
// (no identities are configured). Each test works in a bucket of its own.

var (
	server   *testserver.SeaweedFS
	noServer error // why there is no server: testserver.ErrNotInstalled, or a failed start
	bucketN  atomic.Int64
)

func TestMain(m *testing.M) {
	dir, err := testserver.MkdirTemp("fence-s3-")
	if err == nil {
		server, err = testserver.StartSeaweedFS(dir)
	}
	if err != nil {
		noServer = err
	}
	code := m.Run()
	if server != nil {
		server.Close()
	}
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// newClient returns a client of the S3 endpoint, path-style, with static
// fake credentials: nothing here can reach AWS.
func newClient(endpoint string) *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "fencetest", SecretAccessKey: "fencetest", Source: "fence tests"}, nil
		}),
	})
}

// bucket is the one bucket of the tests, created on first use: SeaweedFS
// gives each bucket volumes of its own, of which the test server has few.
const bucket = "fence-test"

var bucketOnce sync.Once
var bucketErr error

// newBucket returns a client, the tests' bucket and a key prefix of the
// test's own in it. It skips the test when SeaweedFS cannot be built (no go
// command), unless FENCE_REQUIRE_SERVERS=1, and fails it when the server
// did not start.
func newBucket(tb testing.TB) (api *s3.Client, name, prefix string) {
	tb.Helper()
	if noServer != nil {
		testserver.Require(tb, noServer)
	}
	bucketOnce.Do(func() { bucketErr = server.CreateBucket(bucket) })
	if bucketErr != nil {
		tb.Fatal(bucketErr)
	}
	return newClient(server.S3), bucket, fmt.Sprintf("t%d/", bucketN.Add(1))
}

// headerDropper is an S3 endpoint that forwards to SeaweedFS without the
// conditional headers (If-Match, If-None-Match): an endpoint that ignores
// them, as one without conditional writes does. The negative control of
// the conformance check.
func headerDropper(tb testing.TB) *s3.Client {
	tb.Helper()
	return newClient(testserver.DropHeaders(tb, server.S3))
}
