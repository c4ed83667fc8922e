package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/postgres"
	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/internal/tools/testserver"
	"github.com/fence-lock/fence/state"
)

// The Store's tests run on a real PostgreSQL primary with a synchronous
// standby (fsync and synchronous_commit on, unlike the guards' server),
// started on first use and shared; each test works in a schema of its own
// (search_path). Tests that kill the primary start a pair of their own.
var (
	replicatedOnce sync.Once
	replicated     *testserver.Postgres
	replicatedDir  string
	replicatedErr  error
	storeSchemaN   atomic.Int64
)

func replicatedPG(t testing.TB) *testserver.Postgres {
	t.Helper()
	replicatedOnce.Do(func() {
		replicatedDir, replicatedErr = testserver.MkdirTemp("fence-pg-store-")
		if replicatedErr == nil {
			replicated, replicatedErr = testserver.StartPostgres(replicatedDir, testserver.PostgresOptions{Standby: true})
		}
	})
	testserver.Require(t, replicatedErr)
	return replicated
}

// stopReplicated stops the shared pair, if it was started; TestMain calls it.
func stopReplicated() {
	if replicated != nil {
		replicated.Close()
	}
	if replicatedDir != "" {
		os.RemoveAll(replicatedDir)
	}
}

// newStoreSchema creates a schema on pg and returns a connection string
// whose search_path is it.
func newStoreSchema(t testing.TB, pg *testserver.Postgres) string {
	t.Helper()
	name := fmt.Sprintf("store_%d", storeSchemaN.Add(1))
	conn, err := pgx.Connect(t.Context(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	return pg.URL() + "&search_path=" + name
}

func newPool(t testing.TB, connString string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(t.Context(), connString)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func newPGStore(t testing.TB, connString, url string, unsafe bool) *postgres.Store {
	t.Helper()
	s, err := postgres.OpenStore(t.Context(), connString, state.EngineOptions{Self: state.Member{URL: url}, UnsafeSkipEpochCheck: unsafe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	replicatedPG(t)
	fencetest.TestReplicated(t, func(t *testing.T) fencetest.ReplicatedStore {
		conn := newStoreSchema(t, replicatedPG(t))
		return fencetest.ReplicatedStore{
			Open: func(t *testing.T, url string, unsafe bool) fencetest.Replicated {
				return newPGStore(t, conn, url, unsafe)
			},
			EndLeadership: func(t *testing.T) {
				if _, err := newPool(t, conn).Exec(t.Context(), `UPDATE fence_leader SET expires = '-infinity'`); err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}

// TestStore_Failover kills the primary mid-load and promotes the
// synchronous standby: every change acknowledged before the kill is there,
// and a new leader carries on with greater tokens.
func TestStore_Failover(t *testing.T) {
	dir := testserver.TempDir(t)
	pg, err := testserver.StartPostgres(dir, testserver.PostgresOptions{Standby: true})
	testserver.Require(t, err)
	t.Cleanup(func() { pg.Close() })
	conn := pg.URL() + "&connect_timeout=2"
	s := newPGStore(t, conn, "http://127.0.0.1:1", false)
	db, term := fencetest.Lead(t, s)
	ctx := t.Context()

	type acked struct {
		resource string
		token    fence.Token
		value    string
	}
	var mu sync.Mutex
	var acks []acked
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			res := fmt.Sprint("r", w)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tok, err := db.Grant(ctx, res, "h", time.Minute, time.Now().Add(time.Minute))
				if err != nil {
					return // the primary is gone
				}
				v := fmt.Sprint(w, "-", i)
				if _, err := db.Put(ctx, res, "k", []byte(v), tok, fence.Cond{}); err != nil {
					return
				}
				mu.Lock()
				acks = append(acks, acked{res, tok, v})
				mu.Unlock()
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	if err := pg.Primary.Kill(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if len(acks) == 0 {
		t.Fatal("no change was acknowledged before the kill")
	}
	if err := pg.Standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}

	// If a commit was in flight when the primary died, its outcome is
	// unknown and the leader's term is over, as its server would see it
	// (db.Done): it resigns and campaigns again, on the promoted standby,
	// which the same URL finds. Otherwise the leader goes on.
	db2 := db
	if db.Err() != nil {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for {
			if err := term.Resign(rctx); err == nil {
				break
			} else if rctx.Err() != nil {
				t.Fatalf("Resign after the failover: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		db2, _ = fencetest.Lead(t, s)
	}
	last := map[string]acked{}
	for _, a := range acks {
		last[a.resource] = a
	}
	for res, a := range last {
		f, err := db2.Fence(ctx, res)
		if err != nil || f < a.token {
			t.Fatalf("after failover: Fence(%s)=%d, %v; want >= %d (acknowledged)", res, f, err, a.token)
		}
		item, err := db2.Get(ctx, res, "k")
		if err != nil {
			t.Fatalf("after failover: Get(%s): %v", res, err)
		}
		if item.Token < a.token {
			t.Fatalf("after failover: %s/k written with token %d, want >= %d (the last acknowledged write)", res, item.Token, a.token)
		}
		tok, err := db2.Grant(ctx, res, "h2", time.Minute, time.Now().Add(time.Minute))
		if err != nil || tok <= f {
			t.Fatalf("after failover: Grant(%s)=%d, %v; want > %d", res, tok, err, f)
		}
	}
	t.Logf("%d changes acknowledged before the primary was killed; all there after the promotion", len(acks))
}

// TestStore_OwnerUpgrade opens a store on tables of a fence older than
// lease owners and sessions: the columns are added, an old row loads
// without an owner or a session, and a lease that an older server changed
// after a newer one recorded an owner or a session loads without it.
func TestStore_OwnerUpgrade(t *testing.T) {
	conn := newStoreSchema(t, replicatedPG(t))
	pool := newPool(t, conn)
	ctx := t.Context()
	// The table as fences before owners made it, with one lease.
	if _, err := pool.Exec(ctx, `CREATE TABLE fence_resources (
		name text PRIMARY KEY, last_token bigint NOT NULL, last_fence bigint NOT NULL,
		lease_token bigint NOT NULL, holder text NOT NULL, ttl_ns bigint NOT NULL,
		expires_ns bigint NOT NULL, delay_ns bigint NOT NULL);
		INSERT INTO fence_resources VALUES ('old', 3, 3, 3, 'h', 1000000000, 0, 0)`); err != nil {
		t.Fatal(err)
	}
	s := newPGStore(t, conn, "http://127.0.0.1:1", false)
	owners := func() map[string]string {
		t.Helper()
		got := map[string]string{}
		if _, err := s.Load(ctx, func(name string, r state.Resource) error { got[name] = r.Owner; return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := owners(); got["old"] != "" {
		t.Fatalf("owners after the upgrade: %v, want none for old", got)
	}
	// A newer server records alice's lease; an older one then grants the
	// next lease, leaving owner as it was.
	if _, err := pool.Exec(ctx, `UPDATE fence_resources SET owner = 'alice', owner_token = 3 WHERE name = 'old'`); err != nil {
		t.Fatal(err)
	}
	if got := owners(); got["old"] != "alice" {
		t.Fatalf("owners: %v, want alice for old", got)
	}
	if _, err := pool.Exec(ctx, `UPDATE fence_resources SET last_token = 4, last_fence = 4, lease_token = 4, holder = 'b' WHERE name = 'old'`); err != nil {
		t.Fatal(err)
	}
	if got := owners(); got["old"] != "" {
		t.Fatalf("owners after an older server's grant: %v, want none (alice's was for token 3)", got)
	}
	// The same for sessions: a newer server records the lease's session,
	// an older one grants the next lease and leaves it as it was.
	sessions := func() state.Resource {
		t.Helper()
		var got state.Resource
		if _, err := s.Load(ctx, func(name string, r state.Resource) error { got = r; return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if r := sessions(); r.Session != "" || r.SessionToken != 0 {
		t.Fatalf("after the upgrade: session %q %d, want none", r.Session, r.SessionToken)
	}
	if _, err := pool.Exec(ctx, `UPDATE fence_resources SET session = '.session/s', session_token = 7, session_lease = 4 WHERE name = 'old'`); err != nil {
		t.Fatal(err)
	}
	if r := sessions(); r.Session != ".session/s" || r.SessionToken != 7 {
		t.Fatalf("session %q %d, want .session/s 7", r.Session, r.SessionToken)
	}
	if _, err := pool.Exec(ctx, `UPDATE fence_resources SET last_token = 5, last_fence = 5, lease_token = 5, holder = 'c' WHERE name = 'old'`); err != nil {
		t.Fatal(err)
	}
	if r := sessions(); r.Session != "" || r.SessionToken != 0 {
		t.Fatalf("after an older server's grant: session %q %d, want none (it was token 4's)", r.Session, r.SessionToken)
	}
	// Opening again changes nothing (the columns are there).
	newPGStore(t, conn, "http://127.0.0.1:2", false)
}

// TestStore_CommitOrder checks what the numbering of an epoch's commits
// does across epochs (fencetest's CommitNumbers checks it within one): a
// commit of an old epoch is refused as deposed, and a new epoch numbers
// from 1 again.
func TestStore_CommitOrder(t *testing.T) {
	conn := newStoreSchema(t, replicatedPG(t))
	s := newPGStore(t, conn, "http://127.0.0.1:1", false)
	ctx := t.Context()
	term, err := s.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	epoch := term.Epoch()
	changes := func(seq uint64, token fence.Token) *state.Changes {
		return &state.Changes{Seq: seq, Resources: map[string]state.Resource{"r": {LastToken: token, LastFence: token}}}
	}
	for seq := uint64(1); seq <= 3; seq++ {
		if err := s.Commit(ctx, epoch, changes(seq, fence.Token(seq))); err != nil {
			t.Fatalf("commit %d: %v", seq, err)
		}
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	term, err = s.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(context.Background())
	if err := s.Commit(ctx, epoch, changes(4, 4)); !errors.Is(err, state.ErrDeposed) {
		t.Fatalf("a commit of the old epoch: %v, want deposed", err)
	}
	if err := s.Commit(ctx, term.Epoch(), changes(1, 3)); err != nil {
		t.Fatalf("commit 1 of the next epoch: %v", err)
	}
}
