package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/internal/tools/chaos/proxy"
	"github.com/fence-lock/fence/internal/tools/testserver"
	"github.com/fence-lock/fence/wire"
)

// A cluster of fence serve processes on one shared store, each on a fixed
// loopback port (its advertise URL), so that a killed server restarts where
// the others and the clients expect it.
type fenceCluster struct {
	t       *testing.T
	store   string
	args    []string
	ports   []int
	servers []*server
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startCluster starts n fence servers on store and waits until one leads.
func startCluster(t *testing.T, store string, n int, args ...string) *fenceCluster {
	t.Helper()
	c := &fenceCluster{t: t, store: store, args: args}
	for range n {
		c.ports = append(c.ports, freePort(t))
		c.servers = append(c.servers, nil)
	}
	for i := range n {
		c.start(i)
	}
	c.waitLeader(30 * time.Second)
	return c
}

func (c *fenceCluster) url(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", c.ports[i]) }

// addrs returns the servers' URLs separated by commas, as clients take them.
func (c *fenceCluster) addrs(except ...int) string {
	var us []string
	for i := range c.ports {
		if !slices.Contains(except, i) {
			us = append(us, c.url(i))
		}
	}
	return strings.Join(us, ",")
}

func (c *fenceCluster) start(i int) {
	c.t.Helper()
	args := append([]string{"--store", c.store, "--listen", fmt.Sprintf("127.0.0.1:%d", c.ports[i])}, c.args...)
	c.servers[i] = startQuiet(c.t, c.t.TempDir(), args...)
}

// clusterStatus reads GET /v1/cluster from server i.
func (c *fenceCluster) status(i int) (wire.ClusterStatus, error) {
	var st wire.ClusterStatus
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	resp, err := hc.Get(c.url(i) + "/v1/cluster")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// waitLeader waits until a live server says it leads, and returns it.
func (c *fenceCluster) waitLeader(within time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for i, s := range c.servers {
			if s == nil || isDone(s.exited) {
				continue
			}
			if st, err := c.status(i); err == nil && st.Role == wire.RoleLeader {
				return i
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("no fence server leads after %s", within)
	return -1
}

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (c *fenceCluster) kill(i int) {
	c.servers[i].cmd.Process.Signal(syscall.SIGKILL)
	<-c.servers[i].exited
}

func (c *fenceCluster) signal(i int, sig syscall.Signal) {
	if err := c.servers[i].cmd.Process.Signal(sig); err != nil {
		c.t.Fatal(err)
	}
}

// etcdStore starts a 3-member etcd cluster for the test and returns a store
// URL on it.
func etcdStore(t *testing.T) (*testserver.Etcd, string) {
	t.Helper()
	e, err := testserver.StartEtcd(t.TempDir(), 3)
	testserver.Require(t, err)
	t.Cleanup(func() { e.Close() })
	hosts := make([]string, 0, len(e.Members))
	for _, m := range e.Members {
		hosts = append(hosts, strings.TrimPrefix(m.ClientURL, "http://"))
	}
	return e, "etcd://" + strings.Join(hosts, ",") + "/fence-e2e/"
}

// newAPI returns a client of addrs with failover, which gives up on a call
// after retryFor.
func newAPI(t testing.TB, addrs string, retryFor time.Duration) *client.API {
	t.Helper()
	c, err := client.NewAPI(addrs)
	if err != nil {
		t.Fatal(err)
	}
	c.HTTPClient = &http.Client{Timeout: 5 * time.Second}
	c.RetryFor = retryFor
	return c
}

// load is the clients' work while servers fail: each worker loops acquire →
// put → release on its own resource, through every server's address, and
// records what was acknowledged.
type load struct {
	workers  []*loadWorker
	ops      atomic.Int64
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

type loadWorker struct {
	resource   string
	mu         sync.Mutex
	lastGrant  fence.Token // the last token granted; each must be greater
	ackToken   fence.Token // the token of the last acknowledged put
	ackValue   string
	released   bool   // the last grant was released; else a new acquire may get it back
	regression string // a grant that was not greater than the one before, if any
	errors     int
	internal   []string // answers 500 internal: for bugs only, never for a failover
}

func startLoad(t *testing.T, addrs string, workers int) *load {
	l := &load{stop: make(chan struct{})}
	for w := range workers {
		lw := &loadWorker{resource: fmt.Sprintf("load-%d", w)}
		l.workers = append(l.workers, lw)
		api := newAPI(t, addrs, 10*time.Second)
		l.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				lw.cycle(ctx, api, w, i, &l.ops)
				cancel()
			}
		})
	}
	return l
}

func (lw *loadWorker) cycle(ctx context.Context, api *client.API, w, i int, ops *atomic.Int64) {
	holder := fmt.Sprintf("worker-%d", w)
	ls, err := api.Acquire(ctx, lw.resource, holder, 5*time.Second, 5*time.Second)
	if err != nil {
		lw.fail(err)
		return
	}
	lw.mu.Lock()
	// The same holder acquiring a lease it still holds gets the same token:
	// only after a release must the token be greater.
	if (ls.Token < lw.lastGrant || ls.Token == lw.lastGrant && lw.released) && lw.regression == "" {
		lw.regression = fmt.Sprintf("grant %d after grant %d", ls.Token, lw.lastGrant)
	}
	lw.lastGrant, lw.released = ls.Token, false
	lw.mu.Unlock()
	value := fmt.Sprintf("%d-%d", w, i)
	if _, err := api.Put(ctx, lw.resource, "k", []byte(value), ls.Token, fence.Cond{}); err != nil {
		lw.fail(err)
		return
	}
	lw.mu.Lock()
	lw.ackToken, lw.ackValue = ls.Token, value
	lw.mu.Unlock()
	ops.Add(1)
	if err := api.Release(ctx, lw.resource, ls.Token); err != nil {
		lw.fail(err)
		return
	}
	lw.mu.Lock()
	lw.released = true
	lw.mu.Unlock()
}

func (lw *loadWorker) fail(err error) {
	lw.mu.Lock()
	lw.errors++
	var p *wire.Problem
	if errors.As(err, &p) && p.Status == http.StatusInternalServerError {
		lw.internal = append(lw.internal, err.Error())
	}
	lw.mu.Unlock()
	time.Sleep(20 * time.Millisecond)
}

// finish stops the workers and waits for them; a second call does nothing.
func (l *load) finish() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// check verifies that every acknowledged write is there (or was overwritten
// by a later one) and that no grant went down.
func (l *load) check(t *testing.T, api *client.API) {
	t.Helper()
	for _, lw := range l.workers {
		if lw.regression != "" {
			t.Errorf("%s: token went down: %s", lw.resource, lw.regression)
		}
		if len(lw.internal) > 0 {
			t.Errorf("%s: %d answers 500 internal, which clients do not retry; the first: %s", lw.resource, len(lw.internal), lw.internal[0])
		}
		if lw.ackToken == 0 {
			continue
		}
		item, err := api.Get(t.Context(), lw.resource, "k")
		if err != nil {
			t.Errorf("%s: Get: %v (acknowledged: token %d, %q)", lw.resource, err, lw.ackToken, lw.ackValue)
			continue
		}
		switch {
		case item.Token < lw.ackToken:
			t.Errorf("%s: stored write has token %d, older than the acknowledged %d: an acknowledged write was lost", lw.resource, item.Token, lw.ackToken)
		case item.Token == lw.ackToken && string(item.Value) != lw.ackValue:
			t.Errorf("%s: token %d holds %q, acknowledged %q", lw.resource, item.Token, item.Value, lw.ackValue)
		}
		f, err := api.Fence(t.Context(), lw.resource)
		if err != nil || f < lw.lastGrant {
			t.Errorf("%s: Fence=%d, %v; want >= %d (the last grant)", lw.resource, f, err, lw.lastGrant)
		}
	}
}

// failovers returns how many failovers the measuring tests do:
// FENCE_FAILOVERS, default 2 (the closing figures use 20 or more).
func failovers(t *testing.T) int {
	if v := os.Getenv("FENCE_FAILOVERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("FENCE_FAILOVERS=%q: want a positive integer", v)
		}
		return n
	}
	return 2
}

// TestCluster_LeaderKill kills the leading fence server with SIGKILL under
// load, again and again: a standby serves within the election TTL, no token
// goes down, no acknowledged write is lost, and every unexpired lease (the
// permits of a semaphore too, and the leases of a session, kept alive by
// the session's renewals alone) stays renewable by its holder and is
// granted to nobody else before it expires.
func TestCluster_LeaderKill(t *testing.T) {
	_, store := etcdStore(t)
	c := startCluster(t, store, 3)
	l := startLoad(t, c.addrs(), 6)
	defer l.finish()

	// Long leases, held across every failover by self-renewing sessions.
	cl, err := client.New(c.addrs())
	if err != nil {
		t.Fatal(err)
	}
	var leases []*client.Lease
	for i := range 3 {
		ls, err := cl.Acquire(t.Context(), fmt.Sprint("held-", i), fence.WithTTL(8*time.Second), fence.WithHolder(fmt.Sprint("holder-", i)))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, ls)
	}
	// And the two permits of a semaphore, each a lease on its own slot.
	var permits []*client.Lease
	for i := range 2 {
		ls, err := cl.Acquire(t.Context(), "pool", fence.WithLimit(2), fence.WithTTL(8*time.Second), fence.WithHolder(fmt.Sprint("permit-holder-", i)))
		if err != nil {
			t.Fatal(err)
		}
		permits = append(permits, ls)
	}
	// And a session with two leases in it, which only the session renews.
	session, err := cl.Acquire(t.Context(), fence.SessionResource("cluster"), fence.WithTTL(8*time.Second), fence.WithHolder("session-holder"))
	if err != nil {
		t.Fatal(err)
	}
	inSession := fence.WithSession(t.Context(), session.SessionRef())
	joiner := newAPI(t, c.addrs(), 5*time.Second)
	var joined []fence.Lease
	for i := range 2 {
		l, err := joiner.Acquire(inSession, fmt.Sprint("joined-", i), "session-holder", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		joined = append(joined, l)
	}
	// And a shared group of two readers, renewed by their holders.
	var readers []*client.Lease
	for i := range 2 {
		ls, err := cl.Acquire(t.Context(), "doc", fence.WithShared(), fence.WithTTL(8*time.Second), fence.WithHolder(fmt.Sprint("reader-", i)))
		if err != nil {
			t.Fatal(err)
		}
		readers = append(readers, ls)
	}
	if readers[0].Token() != readers[1].Token() {
		t.Fatalf("readers got tokens %d and %d, want one group token", readers[0].Token(), readers[1].Token())
	}
	// And a holder asked to let go in ten minutes: the request stands
	// across every failover.
	asked, _, err := joiner.RequestRevoke(t.Context(), leases[2].Resource(), 10*time.Minute)
	if err != nil || asked.Token != leases[2].Token() {
		t.Fatalf("RequestRevoke: %+v, %v", asked, err)
	}
	held := slices.Concat(leases, permits, readers, []*client.Lease{session})

	var times []time.Duration
	for round := range failovers(t) {
		leader := c.waitLeader(30 * time.Second)
		for start := l.ops.Load(); l.ops.Load() < start+20; {
			time.Sleep(5 * time.Millisecond)
		}
		killed := time.Now()
		c.kill(leader)
		// The first acquire served by another server: a client of the
		// others only, that does not retry.
		probe := newAPI(t, c.addrs(leader), 0)
		var took time.Duration
		for i := 0; ; i++ {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			_, err := probe.Acquire(ctx, fmt.Sprintf("probe-%d-%d", round, i), "probe", time.Second, 0)
			cancel()
			if err == nil {
				took = time.Since(killed)
				break
			}
			if time.Since(killed) > 30*time.Second {
				t.Fatalf("round %d: no acquire served 30s after the leader was killed: %v", round, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		times = append(times, took)
		t.Logf("round %d: leader %d killed; first acquire served by another server after %s", round, leader, took.Round(time.Millisecond))

		// Held leases: still held by their holders, renewable, granted to nobody else.
		contender := newAPI(t, c.addrs(leader), 5*time.Second)
		for _, ls := range leases {
			if err := ls.Err(); err != nil {
				t.Fatalf("round %d: lease %s lost across the failover: %v", round, ls.Resource(), err)
			}
			if _, err := contender.Acquire(t.Context(), ls.Resource(), "thief", time.Second, 0); !errors.Is(err, fence.ErrLockHeld) {
				t.Fatalf("round %d: another holder's acquire of %s: err=%v, want ErrLockHeld", round, ls.Resource(), err)
			}
		}
		for _, ls := range permits {
			if err := ls.Err(); err != nil {
				t.Fatalf("round %d: permit %s lost across the failover: %v", round, ls.Resource(), err)
			}
		}
		if _, err := contender.AcquirePermit(t.Context(), "pool", "thief", 2, time.Second, 0); !errors.Is(err, fence.ErrLockHeld) {
			t.Fatalf("round %d: a third permit of two: err=%v, want ErrLockHeld", round, err)
		}
		if st, err := contender.Status(t.Context(), "doc"); err != nil || !st.Shared || !slices.Equal(st.Holders, []string{"reader-0", "reader-1"}) || st.Token != readers[0].Token() {
			t.Fatalf("round %d: the shared group after the failover: %+v, %v; want both readers with token %d", round, st, err, readers[0].Token())
		}
		if _, err := contender.Acquire(t.Context(), "doc", "writer", time.Second, 0); !errors.Is(err, fence.ErrLockHeld) {
			t.Fatalf("round %d: a writer beside the readers: err=%v, want ErrLockHeld", round, err)
		}
		if st, err := contender.Status(t.Context(), leases[2].Resource()); err != nil || st.RevokeAt.IsZero() || st.Token != leases[2].Token() {
			t.Fatalf("round %d: the lease asked to let go, after the failover: %+v, %v; want held, asked still", round, st, err)
		}
		for _, l := range joined {
			st, err := contender.Status(t.Context(), l.Resource)
			if err != nil || !st.Held || st.Token != l.Token {
				t.Fatalf("round %d: %s, in the session, after the failover: %+v, %v; want held with token %d", round, l.Resource, st, err, l.Token)
			}
			if _, err := contender.Acquire(t.Context(), l.Resource, "thief", time.Second, 0); !errors.Is(err, fence.ErrLockHeld) {
				t.Fatalf("round %d: another holder's acquire of %s: err=%v, want ErrLockHeld", round, l.Resource, err)
			}
		}
		// Each holder renews through the new leader before the next
		// failover: a renewal sent after the kill moves its deadline past
		// kill + TTL - margin.
		for _, ls := range held {
			for !ls.Deadline().After(killed.Add(7 * time.Second)) {
				if err := ls.Err(); err != nil {
					t.Fatalf("round %d: lease %s lost after the failover: %v", round, ls.Resource(), err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		// The session's renewal through the new leader moved the expiry
		// of the leases in it to its own: the takeover linked them to it.
		for _, l := range joined {
			for deadline := time.Now().Add(5 * time.Second); ; {
				st, err1 := contender.Status(t.Context(), l.Resource)
				ss, err2 := contender.Status(t.Context(), session.Resource())
				if err1 == nil && err2 == nil && st.Expires.Equal(ss.Expires) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("round %d: %s expires at %v, its session at %v (%v, %v): the session's renewal did not renew it", round, l.Resource, st.Expires, ss.Expires, err1, err2)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		c.start(leader) // it comes back as a standby
	}
	// A handover through the cluster: the waiter gets the lease with a
	// greater token in one change, and the old token is fenced at once.
	waiter := newAPI(t, c.addrs(), 10*time.Second)
	got := make(chan fence.Lease, 1)
	go func() {
		l, err := waiter.Acquire(t.Context(), leases[0].Resource(), "successor", 8*time.Second, time.Minute)
		if err != nil {
			t.Errorf("the successor: %v", err)
		}
		got <- l
	}()
	for {
		st, _, err := waiter.List(t.Context(), leases[0].Resource(), "", 1)
		if err == nil && len(st) == 1 && st[0].Waiters == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	next, err := leases[0].Transfer(t.Context(), "successor")
	if err != nil || next.Token <= leases[0].Token() {
		t.Fatalf("Transfer: %+v, %v; want the successor's lease with a greater token", next, err)
	}
	if succ := <-got; succ.Token != next.Token {
		t.Fatalf("the successor got token %d, the transfer said %d", succ.Token, next.Token)
	}
	if _, err := waiter.Put(t.Context(), leases[0].Resource(), "k", []byte("old"), leases[0].Token(), fence.Cond{}); !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("the old holder's write after the handover: %v, want fenced", err)
	}
	held = held[1:] // leases[0] is the successor's now
	for _, ls := range held {
		if err := ls.Err(); err != nil {
			t.Fatalf("lease %s lost: %v", ls.Resource(), err)
		}
		if err := ls.Release(t.Context()); err != nil {
			t.Fatalf("release %s: %v", ls.Resource(), err)
		}
	}
	// The session's release released the leases in it.
	for _, l := range joined {
		if st, err := joiner.Status(t.Context(), l.Resource); err != nil || st.Held {
			t.Fatalf("%s after its session's release: %+v, %v; want free", l.Resource, st, err)
		}
	}
	l.finish()
	l.check(t, newAPI(t, c.addrs(), 10*time.Second))
	slices.Sort(times)
	t.Logf("failover (kill -9 of the leader to the first acquire served by another): %d failovers, median %s, max %s, ops %d",
		len(times), times[len(times)/2].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond), l.ops.Load())
}

// TestCluster_LeaderPause freezes the leader (SIGSTOP) past the election
// TTL, lets another server take over and grant the resource anew, and then
// wakes the old leader with requests from the stale holder queued on it: it
// must acknowledge none of them from its old state (invariant 9), and the
// new holder's write and fence stand. With the epoch check off (the negative
// control) the old leader's commits go through: its stale write or its
// stale write is acknowledged. Whether the old leader commits before it
// notices its lost lease is a race, so the control tries a few times and
// needs one violation.
func TestCluster_LeaderPause(t *testing.T) {
	t.Run("EpochCheck", func(t *testing.T) {
		acked, violated := pauseScenario(t, false)
		if len(acked) > 0 {
			t.Errorf("the old leader acknowledged %v after it was replaced", acked)
		}
		if violated != "" {
			t.Errorf("after the old leader woke: %s", violated)
		}
	})
	t.Run("SkipEpochCheck", func(t *testing.T) {
		for attempt := range 5 {
			if _, violated := pauseScenario(t, true); violated != "" {
				t.Logf("attempt %d, epoch check off: %s", attempt, violated)
				return
			}
		}
		t.Fatal("with the epoch check off, the old leader never overwrote the new holder in 5 attempts: the negative control proves nothing")
	})
}

// pauseScenario runs the pause story once and returns what the old leader
// acknowledged of the stale holder's requests, and a description of the
// violation seen afterwards ("" if the new holder's value and fence stand).
func pauseScenario(t *testing.T, unsafe bool) (acked []string, violated string) {
	t.Helper()
	_, store := etcdStore(t)
	var args []string
	if unsafe {
		args = append(args, "--unsafe-skip-epoch-check")
	}
	c := startCluster(t, store, 2, args...)
	old := c.waitLeader(30 * time.Second)
	direct := newAPI(t, c.url(old), 0)
	ctx := t.Context()
	a, err := direct.Acquire(ctx, "r", "A", time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Put(ctx, "r", "k", []byte("A"), a.Token, fence.Cond{}); err != nil {
		t.Fatal(err)
	}

	c.signal(old, syscall.SIGSTOP)
	stopped := true
	defer func() {
		if stopped {
			c.signal(old, syscall.SIGCONT)
		}
	}()
	other := 1 - old
	others := newAPI(t, c.url(other), 20*time.Second)
	// The new leader restores A's lease for a full TTL; then B gets it.
	b, err := others.Acquire(ctx, "r", "B", 10*time.Second, 20*time.Second)
	if err != nil {
		t.Fatalf("B's acquire through the new leader: %v", err)
	}
	if b.Token <= a.Token {
		t.Fatalf("B's token %d, want > A's %d", b.Token, a.Token)
	}
	if _, err := others.Put(ctx, "r", "k", []byte("B"), b.Token, fence.Cond{}); err != nil {
		t.Fatal(err)
	}

	// A's write and renew wait in the paused server's socket.
	type answer struct {
		what string
		err  error
	}
	answers := make(chan answer, 2)
	go func() {
		_, err := direct.Put(context.Background(), "r", "k", []byte("A-stale"), a.Token, fence.Cond{})
		answers <- answer{"put", err}
	}()
	go func() {
		_, err := direct.Renew(context.Background(), "r", a.Token, time.Minute)
		answers <- answer{"renew", err}
	}()
	time.Sleep(200 * time.Millisecond)
	c.signal(old, syscall.SIGCONT)
	stopped = false
	for range 2 {
		if ans := <-answers; ans.err == nil {
			acked = append(acked, ans.what)
		}
	}
	time.Sleep(500 * time.Millisecond) // the old leader's expiry timers have fired
	item, err := others.Get(ctx, "r", "k")
	if err != nil {
		t.Fatal(err)
	}
	f, err := others.Fence(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case slices.Contains(acked, "put"):
		// The new leader's memory still says B: the stale write is in
		// the engine, behind its back, and acknowledged to A.
		violated = fmt.Sprintf("A's put with token %d was acknowledged after B was granted token %d", a.Token, b.Token)
	case string(item.Value) != "B" || f < b.Token:
		violated = fmt.Sprintf("value %q, fence %d after B's write with token %d", item.Value, f, b.Token)
	}
	return acked, violated
}

// TestCluster_EngineLeaderKill kills the etcd Raft leader under load and
// brings it back: nothing acknowledged is lost, no token goes down, and
// the fence leader rides out etcd's elections (the epoch stays).
func TestCluster_EngineLeaderKill(t *testing.T) {
	e, store := etcdStore(t)
	c := startCluster(t, store, 3)
	leader := c.waitLeader(30 * time.Second)
	first, err := c.status(leader)
	if err != nil {
		t.Fatal(err)
	}
	l := startLoad(t, c.addrs(), 6)
	for round := range 2 {
		for start := l.ops.Load(); l.ops.Load() < start+50; {
			time.Sleep(5 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		m, err := e.Leader(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		before := l.ops.Load()
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for l.ops.Load() < before+20 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no progress 30s after etcd's leader %s was killed", round, m.Name)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("round %d: etcd leader %s killed; load went on", round, m.Name)
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
	}
	l.finish()
	l.check(t, newAPI(t, c.addrs(), 10*time.Second))
	// The fence leader rode out etcd's elections: its lease never expired.
	if last, err := c.status(leader); err != nil || last.Epoch != first.Epoch {
		t.Errorf("the writer epoch went from %d to %d (%v): killing etcd's leader cost a fence leader change", first.Epoch, last.Epoch, err)
	}
}

// TestCluster_PostgresFailover kills the PostgreSQL primary under load and
// promotes the synchronous standby: the fence servers find it through the
// same URL, nothing acknowledged is lost, no token goes down.
func TestCluster_PostgresFailover(t *testing.T) {
	dir := testserver.TempDir(t)
	pg, err := testserver.StartPostgres(dir, testserver.PostgresOptions{Standby: true})
	testserver.Require(t, err)
	t.Cleanup(func() { pg.Close() })
	c := startCluster(t, pg.URL()+"&connect_timeout=2", 2)
	l := startLoad(t, c.addrs(), 6)
	for start := l.ops.Load(); l.ops.Load() < start+100; {
		time.Sleep(5 * time.Millisecond)
	}
	if err := pg.Primary.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := pg.Standby.Promote(t.Context()); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	before := l.ops.Load()
	for l.ops.Load() < before+50 {
		if time.Since(promoted) > 60*time.Second {
			t.Fatal("no progress 60s after the standby was promoted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("load went on %s after the promotion", time.Since(promoted).Round(time.Millisecond))
	l.finish()
	l.check(t, newAPI(t, c.addrs(), 10*time.Second))
}

// TestCluster_Migrate moves an embedded store into etcd with fence migrate
// and serves it from a cluster: tokens go on from the last issued, values
// and leases are there; then fence bump, as after a restore from a backup,
// fences every token issued before it.
func TestCluster_Migrate(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	srv := start(t, dir)
	api := newAPI(t, srv.URL, 0)
	held, err := api.Acquire(ctx, "held", "H", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	var last fence.Token
	for range 3 {
		l, err := api.Acquire(ctx, "orders", "A", time.Minute, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := api.Put(ctx, "orders", "total", []byte(fmt.Sprint("v", l.Token)), l.Token, fence.Cond{}); err != nil {
			t.Fatal(err)
		}
		if err := api.Release(ctx, "orders", l.Token); err != nil {
			t.Fatal(err)
		}
		last = l.Token
	}
	srv.kill()

	_, store := etcdStore(t)
	out, err := exec.Command(binary, "migrate", "--from", dir, "--to", store).CombinedOutput()
	if err != nil {
		t.Fatalf("fence migrate: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "migrated 2 resources (1 leases), 1 values") {
		t.Fatalf("fence migrate said %q", out)
	}
	if out, err := exec.Command(binary, "migrate", "--from", dir, "--to", store).CombinedOutput(); err == nil || !strings.Contains(string(out), "not empty") {
		t.Fatalf("a second migrate into the same store: %v %s; want it refused as not empty", err, out)
	}

	c := startCluster(t, store, 2)
	capi := newAPI(t, c.addrs(), 10*time.Second)
	item, err := capi.Get(ctx, "orders", "total")
	if err != nil || string(item.Value) != fmt.Sprint("v", last) || item.Token != last {
		t.Fatalf("Get after migrate=%+v, %v; want v%d written with token %d", item, err, last, last)
	}
	l, err := capi.Acquire(ctx, "orders", "B", time.Minute, 0)
	if err != nil || l.Token != last+1 {
		t.Fatalf("Acquire after migrate=%+v, %v; want token %d", l, err, last+1)
	}
	if _, err := capi.Acquire(ctx, "held", "thief", time.Second, 0); !errors.Is(err, fence.ErrLockHeld) {
		t.Fatalf("the migrated lease: another's acquire err=%v, want ErrLockHeld", err)
	}
	if _, err := capi.Renew(ctx, "held", held.Token, 0); err != nil {
		t.Fatalf("the migrated lease's holder renews: %v", err)
	}

	// A restore from a backup would roll tokens back: bump raises them past
	// anything issued, with the servers stopped.
	for i := range c.servers {
		c.kill(i)
	}
	out, err = exec.Command(binary, "bump", "--store", store, "--by", "1000").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "raised the token floor to ") {
		t.Fatalf("fence bump: %v\n%s", err, out)
	}
	c.start(0)
	c.waitLeader(30 * time.Second)
	if _, err := capi.Put(ctx, "orders", "total", []byte("stale"), l.Token, fence.Cond{}); !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("Put with a token from before the bump: err=%v, want ErrFenced", err)
	}
	if n, err := capi.Acquire(ctx, "orders", "C", time.Minute, 0); err != nil || n.Token != l.Token+1001 {
		t.Fatalf("Acquire after the bump=%+v, %v; want token %d", n, err, l.Token+1001)
	}
}

// TestCluster_MixedKeys checks that a server signing with another key than
// the servers already on the store refuses to start: a new leader signs the
// leases it restores with its own key. The refusal is a configuration that
// cannot work, as a bad key file is: exit 2 (docs/reference/exit-codes.md),
// not 1, which says the store could not be reached.
func TestCluster_MixedKeys(t *testing.T) {
	_, store := etcdStore(t)
	keys := t.TempDir()
	for _, k := range []string{"a", "b"} {
		if out, err := exec.Command(binary, "keygen", "--out", keys+"/"+k).CombinedOutput(); err != nil {
			t.Fatalf("keygen: %v %s", err, out)
		}
	}
	c := startCluster(t, store, 1, "--signing-key", keys+"/a")
	ls, err := newAPI(t, c.addrs(), 0).Acquire(t.Context(), "r", "A", time.Minute, 0)
	if err != nil || ls.Sequencer == "" {
		t.Fatalf("Acquire=%+v, %v; want a signed lease", ls, err)
	}
	cmd := exec.Command(binary, "serve", "--store", store, "--listen", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--signing-key", keys+"/b")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "same --signing-key") {
		t.Fatalf("a server with another key: %v\n%s\nwant it to refuse to start", err, out)
	}
	if code := cmd.ProcessState.ExitCode(); code != 2 {
		t.Fatalf("a server with another key exited %d, want 2 (a configuration that cannot work)\n%s", code, out)
	}
}

// TestCluster_EtcdMembersCutOff cuts the path from the fence servers to one
// etcd member of three for longer than the election TTL, under load, with
// the other two reachable: that used to depose the leader and hang
// requests for the whole cut. Then to all members but one, which the
// partition fault of fence chaos found to cost a leader change, when the
// lease's refreshes went to members cut off. Neither may cost a leader
// change, nor a request beyond those that retried.
func TestCluster_EtcdMembersCutOff(t *testing.T) {
	e, _ := etcdStore(t)
	var hosts []string
	var proxies []*proxy.Proxy
	for _, m := range e.Members {
		p, err := proxy.New("127.0.0.1:0", strings.TrimPrefix(m.ClientURL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		proxies = append(proxies, p)
		hosts = append(hosts, p.Addr())
	}
	store := "etcd://" + strings.Join(hosts, ",") + "/fence-cut/"
	c := startCluster(t, store, 2)
	leader := c.waitLeader(30 * time.Second)
	before, err := c.status(leader)
	if err != nil {
		t.Fatal(err)
	}
	l := startLoad(t, c.addrs(), 4)
	time.Sleep(time.Second)
	// Cut the member the leader's lease keepalives go to, whichever it is:
	// each in turn, past the election TTL (2 s).
	for _, p := range proxies {
		p.Blackhole(true)
		time.Sleep(3 * time.Second)
		p.Heal()
		time.Sleep(500 * time.Millisecond)
	}
	// Then all but one, each in turn: the members still reach each other,
	// so the one left serves everything.
	for i := range proxies {
		for j, p := range proxies {
			p.Blackhole(j != i)
		}
		time.Sleep(3 * time.Second)
		for _, p := range proxies {
			p.Heal()
		}
		time.Sleep(500 * time.Millisecond)
	}
	l.finish()
	after, err := c.status(leader)
	if err != nil {
		t.Fatal(err)
	}
	if after.Epoch != before.Epoch {
		t.Errorf("the writer epoch went from %d to %d: cutting etcd members off (one, then all but one) cost a leader change", before.Epoch, after.Epoch)
		for i, s := range c.servers {
			t.Logf("server %d's warnings:\n%s", i, s.logs)
		}
	}
	l.check(t, newAPI(t, c.addrs(), 10*time.Second))
	failed := 0
	for _, w := range l.workers {
		failed += w.errors
	}
	if failed > 0 {
		t.Errorf("%d calls failed (after the client's retries) while etcd members were cut off", failed)
	}
	t.Logf("%d cycles, %d failed calls, epoch %d before and after", l.ops.Load(), failed, after.Epoch)
}
