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
	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/internal/testserver"
	"github.com/fence-lock/fence/postgres"
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

func newPGStore(t testing.TB, connString, url string, unsafe ...bool) *postgres.Store {
	t.Helper()
	s, err := postgres.OpenStore(t.Context(), connString, state.EngineOptions{Self: state.Member{URL: url}, UnsafeSkipEpochCheck: len(unsafe) > 0 && unsafe[0]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// leadPG campaigns with s and returns a DB on a Cache of its term.
func leadPG(t testing.TB, s *postgres.Store) (*state.DB, state.Term) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	term, err := s.Campaign(ctx)
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	c, err := state.NewCache(ctx, s, term.Epoch())
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	db := state.NewDB("postgres", c)
	t.Cleanup(func() {
		db.Close()
		term.Resign(context.Background())
	})
	return db, term
}

func openPGLeader(t *testing.T) fencetest.Backend {
	db, _ := leadPG(t, newPGStore(t, newStoreSchema(t, replicatedPG(t)), "http://127.0.0.1:1"))
	return db
}

func TestStore_Store(t *testing.T) {
	replicatedPG(t)
	fencetest.TestStore(t, openPGLeader)
}

func TestStore_Ledger(t *testing.T) {
	replicatedPG(t)
	fencetest.TestLedger(t, openPGLeader)
}

// TestStore_Takeover checks invariant 9 on PostgreSQL: once another server
// has taken the leader row, the old leader commits nothing; and, as a
// negative control, that without the epoch check it would.
func TestStore_Takeover(t *testing.T) {
	for _, unsafe := range []bool{false, true} {
		t.Run(fmt.Sprintf("SkipEpochCheck=%v", unsafe), func(t *testing.T) {
			ctx := t.Context()
			conn := newStoreSchema(t, replicatedPG(t))
			a := newPGStore(t, conn, "http://127.0.0.1:1", unsafe)
			b := newPGStore(t, conn, "http://127.0.0.1:2")
			dbA, _ := leadPG(t, a)
			tok, err := dbA.Grant(ctx, "r", "A", time.Minute, time.Now().Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := dbA.Put(ctx, "r", "k", []byte("A"), tok, fence.Cond{}); err != nil {
				t.Fatal(err)
			}
			// A is paused as far as the database can tell: its lease ends.
			pool := newPool(t, conn)
			if _, err := pool.Exec(ctx, `UPDATE fence_leader SET expires = '-infinity'`); err != nil {
				t.Fatal(err)
			}
			dbB, _ := leadPG(t, b)
			if m, _, ok, err := b.Leader(ctx); err != nil || !ok || m.URL != "http://127.0.0.1:2" {
				t.Fatalf("Leader=%v, %v, %v; want B", m, ok, err)
			}
			if tokB, err := dbB.Grant(ctx, "r", "B", time.Minute, time.Now().Add(time.Minute)); err != nil || tokB != tok+1 {
				t.Fatalf("B: Grant=%d, %v; want %d", tokB, err, tok+1)
			}
			_, err = dbA.Put(ctx, "r", "k", []byte("zombie"), tok, fence.Cond{})
			item, gerr := dbB.Get(ctx, "r", "k")
			if gerr != nil {
				t.Fatal(gerr)
			}
			if unsafe {
				if err != nil || string(item.Value) != "zombie" {
					t.Fatalf("without the epoch check: Put err=%v, value %q; want the zombie's write applied", err, item.Value)
				}
				return
			}
			if !errors.Is(err, state.ErrDeposed) {
				t.Fatalf("deposed leader: Put err=%v, want ErrDeposed", err)
			}
			if string(item.Value) != "A" {
				t.Fatalf("value %q, want A", item.Value)
			}
			if _, err := dbA.Fence(ctx, "r"); !errors.Is(err, state.ErrDeposed) {
				t.Fatalf("deposed leader: read err=%v, want ErrDeposed", err)
			}
		})
	}
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
	s := newPGStore(t, conn, "http://127.0.0.1:1")
	db, term := leadPG(t, s)
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

	// The leader's commits failed with the primary: its term is over, as
	// its server would see it (db.Done). It resigns and campaigns again, on
	// the promoted standby, which the same URL finds.
	if db.Err() == nil {
		t.Fatal("no commit failed when the primary was killed")
	}
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
	db2, _ := leadPG(t, s)
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
