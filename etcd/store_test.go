package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/etcd"
	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/internal/testserver"
	"github.com/fence-lock/fence/state"
)

// The Store's tests run on a real 3-member etcd cluster (Debian's etcd, each
// member its own process), started on first use and shared by the tests;
// each test works under a prefix of its own.
var (
	clusterOnce sync.Once
	clusterEtcd *testserver.Etcd
	clusterDir  string
	clusterErr  error
)

// cluster returns the shared 3-member cluster, or skips (fails in CI) when
// etcd is not installed.
func cluster(t testing.TB) *testserver.Etcd {
	t.Helper()
	clusterOnce.Do(func() {
		clusterDir, clusterErr = os.MkdirTemp("", "fence-etcd-cluster-")
		if clusterErr == nil {
			clusterEtcd, clusterErr = testserver.StartEtcd(clusterDir, 3)
		}
	})
	testserver.Require(t, clusterErr)
	return clusterEtcd
}

// stopCluster stops the shared cluster, if it was started; TestMain calls it.
func stopCluster() {
	if clusterEtcd != nil {
		clusterEtcd.Close()
	}
	if clusterDir != "" {
		os.RemoveAll(clusterDir)
	}
}

// clusterClient returns a new client of the shared cluster, closed when t ends.
func clusterClient(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: cluster(t).Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var prefixN sync.Mutex
var prefixSeq int

// newPrefix returns a key prefix that no other test uses.
func newPrefix(t testing.TB) string {
	prefixN.Lock()
	defer prefixN.Unlock()
	prefixSeq++
	return fmt.Sprintf("/fence-store-test/%d/%s/", prefixSeq, url.PathEscape(t.Name()))
}

// newStore returns a Store for server url on prefix, closed when t ends.
func newStore(t testing.TB, prefix, url string, unsafe bool) *etcd.Store {
	t.Helper()
	s := etcd.NewStore(clusterClient(t), prefix, state.EngineOptions{Self: state.Member{URL: url}, UnsafeSkipEpochCheck: unsafe})
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	cluster(t)
	fencetest.TestReplicated(t, func(t *testing.T) fencetest.ReplicatedStore {
		prefix := newPrefix(t)
		return fencetest.ReplicatedStore{
			Open: func(t *testing.T, url string, unsafe bool) fencetest.Replicated {
				return newStore(t, prefix, url, unsafe)
			},
			EndLeadership: func(t *testing.T) {
				if err := revokeLease(t.Context(), t, prefix); err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}

// revokeLease revokes the lease of the first election key under prefix: the
// engine ends that server's leadership behind its back.
func revokeLease(ctx context.Context, t *testing.T, prefix string) error {
	cli := clusterClient(t)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := cli.Get(ctx, prefix+"election/", clientv3.WithFirstCreate()...)
		if err != nil {
			return err
		}
		if len(resp.Kvs) > 0 {
			_, err := cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("no election key")
}

// TestStore_Limits checks that a change beyond etcd's limits is refused
// with fence.ErrTooLarge and changes nothing, and that concurrent changes
// are batched below the limits.
func TestStore_Limits(t *testing.T) {
	ctx := t.Context()
	db, _ := fencetest.Lead(t, newStore(t, newPrefix(t), "http://127.0.0.1:1", false))
	tok, err := db.Grant(ctx, "r", "A", time.Minute, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	txn := &fence.Txn{Fences: map[string]fence.Token{"r": tok}}
	for i := range 200 { // etcd's default --max-txn-ops is 128
		txn.Then = append(txn.Then, fence.Op{Kind: fence.OpPut, Resource: "r", Key: fmt.Sprint("k", i), Value: []byte("v")})
	}
	if _, err := db.Txn(ctx, txn); !errors.Is(err, fence.ErrTooLarge) {
		t.Fatalf("Txn of 200 ops: err=%v, want ErrTooLarge", err)
	}
	if _, err := db.Get(ctx, "r", "k0"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("Get after the refused txn: err=%v, want ErrNotFound", err)
	}
	big := []byte(strings.Repeat("x", fence.MaxValueSize))
	if _, err := db.Put(ctx, "r", "big", big, tok, fence.Cond{}); err != nil {
		t.Fatalf("Put of 1 MiB (under etcd's 1.5 MiB): %v", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 300)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = db.Put(ctx, "r", fmt.Sprint("p", i), []byte("v"), tok, fence.Cond{})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Put %d of 300 concurrent: %v", i, err)
		}
	}
	if db.Err() != nil {
		t.Fatalf("Err()=%v", db.Err())
	}
}
