package azblob_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/fence-lock/fence/internal/tools/testserver"
)

// The tests share one Azurite blob service (started by TestMain with
// internal/tools/testserver, on a loopback port) and one container in it,
// each test under a key prefix of its own. They reach it with a SAS of the
// container, signed with Azurite's well-known development key: a SAS
// signs no request headers, so the negative control's proxy can drop the
// conditional ones.

var (
	server   *testserver.Azurite
	noServer error // why there is no server: testserver.ErrNotInstalled, or a failed start
	prefixN  atomic.Int64

	containerOnce sync.Once
	containerSAS  string // the container's URL with a SAS
	containerErr  error
)

const containerName = "fence-test"

func TestMain(m *testing.M) {
	dir, err := testserver.MkdirTemp("fence-azblob-")
	if err == nil {
		server, err = testserver.StartAzurite(dir)
	}
	if err != nil {
		noServer = err
	}
	code := m.Run()
	server.Close()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// newContainer returns the URL (with a SAS) of the tests' container,
// created on first use, and a key prefix of the test's own. It skips the
// test when Azurite cannot be installed (no node, no npm), unless
// FENCE_REQUIRE_SERVERS=1, and fails it when the server did not start.
func newContainer(tb testing.TB) (sasURL, prefix string) {
	tb.Helper()
	if noServer != nil {
		testserver.Require(tb, noServer)
	}
	containerOnce.Do(func() {
		cred, err := container.NewSharedKeyCredential(testserver.AzuriteAccount, testserver.AzuriteKey)
		if err != nil {
			containerErr = err
			return
		}
		c, err := container.NewClientWithSharedKeyCredential(server.BlobURL+"/"+containerName, cred, nil)
		if err != nil {
			containerErr = err
			return
		}
		if _, err := c.Create(context.Background(), nil); err != nil {
			containerErr = fmt.Errorf("creating the container: %w\n%s", err, server.LogTail(20))
			return
		}
		perms := sas.ContainerPermissions{Read: true, Add: true, Create: true, Write: true, Delete: true, List: true}
		containerSAS, containerErr = c.GetSASURL(perms, time.Now().Add(24*time.Hour), nil)
	})
	if containerErr != nil {
		tb.Fatal(containerErr)
	}
	return containerSAS, fmt.Sprintf("t%d/", prefixN.Add(1))
}

// newClient returns a client of the container at sasURL.
func newClient(tb testing.TB, sasURL string) *container.Client {
	tb.Helper()
	c, err := container.NewClientWithNoCredential(sasURL, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// headerDropper returns sasURL through a proxy that drops the conditional
// headers (If-Match, If-None-Match): a store that ignores them. The
// negative control of the conformance check.
func headerDropper(tb testing.TB, sasURL string) string {
	tb.Helper()
	return testserver.DropHeaders(tb, sasURL)
}
