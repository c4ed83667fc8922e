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
	"github.com/fence-lock/fence/engine/etcd"
	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/internal/tools/chaos/proxy"
	"github.com/fence-lock/fence/internal/tools/testserver"
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

// TestStore_TermOutlivesItsSession checks that a leadership outlives the
// end of the session that kept its lease alive (keepalives unanswered
// through an etcd leader election, or answered by a member that did not
// know the lease yet): the lease is alive, so the term keeps it alive in a
// new session, past its TTL. The term ends once the lease is gone.
func TestStore_TermOutlivesItsSession(t *testing.T) {
	cluster(t)
	ctx := t.Context()
	prefix := newPrefix(t)
	s := newStore(t, prefix, "http://127.0.0.1:1", false)
	term, err := s.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(context.Background())
	etcd.EndSession(term)
	select {
	case <-term.Done():
		t.Fatal("the term ended with its session, its lease alive")
	case <-time.After(5 * time.Second): // 2.5 times the TTL
	}
	if err := s.Commit(ctx, term.Epoch(), &state.Changes{Seq: 1, Resources: map[string]state.Resource{"r": {LastToken: 1, LastFence: 1}}}); err != nil {
		t.Fatalf("a commit past the TTL of the ended session: %v, want the term going on", err)
	}
	if err := revokeLease(ctx, t, prefix); err != nil {
		t.Fatal(err)
	}
	select {
	case <-term.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the term goes on with its lease revoked")
	}
}

// TestStore_TermOutlivesCutMembers cuts the paths to all members but one,
// each in turn, for three TTLs: the lease's keepalives go to every member
// at once, so the one left keeps the term. Through the balanced client
// alone, two calls in three go to a member cut off, whose connection stays
// in the balance for 7 s, and a TTL's keepalives may all be lost (this test
// failed one run in four that way).
func TestStore_TermOutlivesCutMembers(t *testing.T) {
	proxies := proxyMembers(t, cluster(t))
	s := openThrough(t, proxies)
	term, err := s.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(context.Background())
	for i := range proxies {
		for j, p := range proxies {
			p.Blackhole(j != i)
		}
		select {
		case <-term.Done():
			t.Fatalf("the term ended with only member %d reachable", i)
		case <-time.After(3 * etcd.DefaultElectionTTL):
		}
		for _, p := range proxies {
			p.Heal()
		}
	}
}

// TestStore_CommitsGoToTheLeader checks that commits go through the
// connection to etcd's leader once it is found, and through the other
// members when that connection stops answering: a commit sent again after
// a lost answer goes elsewhere.
func TestStore_CommitsGoToTheLeader(t *testing.T) {
	c := cluster(t)
	proxies := proxyMembers(t, c)
	byMember := map[string]*proxy.Proxy{}
	for i, ep := range c.Endpoints() {
		byMember[ep] = proxies[i]
	}
	s := openThrough(t, proxies)
	term, err := s.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(context.Background())
	seq := uint64(0)
	commit := func() error {
		seq++
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		return s.Commit(ctx, term.Epoch(), &state.Changes{Seq: seq, Resources: map[string]state.Resource{"r": {LastToken: fence.Token(seq), LastFence: fence.Token(seq)}}})
	}
	leader, err := c.Leader(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := "http://" + byMember[leader.ClientURL].Addr()
	deadline := time.Now().Add(5 * time.Second)
	for etcd.CommitsVia(s) != want {
		if time.Now().After(deadline) {
			t.Fatalf("commits go through %q, want the leader's %q", etcd.CommitsVia(s), want)
		}
		if err := commit(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The leader's connection stops answering (etcd's members still talk
	// to each other: it stays the leader).
	byMember[leader.ClientURL].Blackhole(true)
	// The commit below is sent again until it is confirmed: the first
	// attempt goes through the cut connection, the next ones through the
	// balanced client, which goes round the members, so that one of the
	// next two reaches one that answers. Without the way round, every
	// attempt (1 s each) would go through the cut connection until the
	// leader is looked for again, 5 s after it was found.
	seq--
	for attempts := 1; ; attempts++ {
		err := commit()
		if err == nil {
			break
		}
		if attempts == 3 {
			t.Fatalf("no commit went through in %d attempts with the leader's connection cut: %v", attempts, err)
		}
		seq-- // the same commit again
	}
	if via := etcd.CommitsVia(s); via == want {
		t.Fatalf("commits still go through the leader's cut connection %q", via)
	}
}

// proxyMembers puts a proxy in front of each member of c, in the order of
// its Endpoints; they are closed when t ends.
func proxyMembers(t *testing.T, c *testserver.Etcd) []*proxy.Proxy {
	var proxies []*proxy.Proxy
	for _, ep := range c.Endpoints() {
		p, err := proxy.New("127.0.0.1:0", strings.TrimPrefix(ep, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		proxies = append(proxies, p)
	}
	return proxies
}

// openThrough opens a Store on the members behind proxies, closed when t ends.
func openThrough(t *testing.T, proxies []*proxy.Proxy) *etcd.Store {
	var hosts []string
	for _, p := range proxies {
		hosts = append(hosts, p.Addr())
	}
	s, err := etcd.OpenStore(t.Context(), "etcd://"+strings.Join(hosts, ",")+newPrefix(t), state.EngineOptions{Self: state.Member{URL: "http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
