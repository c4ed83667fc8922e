package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/guard/postgres"
	"github.com/fence-lock/fence/internal/tools/chaos/history"
	"github.com/fence-lock/fence/internal/tools/chaos/proxy"
)

// guardTarget is the store of a run with Config.Guard, which the clients
// write through a guard: PostgreSQL (pgTarget) or S3 (s3Target).
type guardTarget interface {
	// addr is the proxy the clients reach the store through.
	addr() string
	// prefix names the run's own tables or objects, apart from others'.
	prefix() string
	// proxy is the clients' proxy, which the net fault acts on.
	clientProxy() *proxy.Proxy
	// finalReads reads every key directly from the store, as client -1.
	finalReads(r *run)
	// close removes what the run made, where it can, and closes the proxy.
	close()
}

// setUpGuard sets up the store of cfg.Guard: an s3:// location, or else a
// PostgreSQL connection string.
func setUpGuard(ctx context.Context, cfg Config) (guardTarget, error) {
	if isS3Guard(cfg.Guard) {
		return setUpS3Guard(ctx, cfg)
	}
	return setUpPGGuard(ctx, cfg)
}

// pgTarget is the PostgreSQL database of a run with a PostgreSQL guard:
// the harness's own connections (to make and drop the tables, and for the
// final reads), and the proxy the clients reach it through.
type pgTarget struct {
	pool  *pgxpool.Pool
	proxy *proxy.Proxy
	pfx   string // of the run's tables: <prefix>_fences, <prefix>_data, <prefix>_rev
}

func (g *pgTarget) addr() string              { return g.proxy.Addr() }
func (g *pgTarget) prefix() string            { return g.pfx }
func (g *pgTarget) clientProxy() *proxy.Proxy { return g.proxy }

// setUpPGGuard connects to cfg.Guard, creates the run's tables, and starts
// the clients' proxy to the database.
func setUpPGGuard(ctx context.Context, cfg Config) (g *pgTarget, err error) {
	pc, err := pgxpool.ParseConfig(cfg.Guard)
	if err != nil {
		return nil, fmt.Errorf("chaos: --guard: %w", err)
	}
	host := pc.ConnConfig.Host
	if host == "" || strings.HasPrefix(host, "/") {
		return nil, fmt.Errorf("chaos: --guard: the clients reach the database through a TCP proxy: give a host and a port, not the socket %q", host)
	}
	pc.MaxConns = 2
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(cctx, pc)
	if err == nil {
		err = pool.Ping(cctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		return nil, fmt.Errorf("chaos: --guard: connecting to %s: %w", net.JoinHostPort(host, strconv.Itoa(int(pc.ConnConfig.Port))), err)
	}
	g = &pgTarget{pool: pool, pfx: fmt.Sprintf("fence_chaos_%08x", rand.Uint32())}
	defer func() {
		if err != nil {
			g.close()
			g = nil
		}
	}()
	guard := postgres.NewGuard(pool)
	guard.Table = g.pfx + "_fences"
	if err := guard.CreateTable(cctx); err != nil {
		return nil, fmt.Errorf("chaos: --guard: %w", err)
	}
	for _, ddl := range []string{
		`CREATE TABLE ` + g.pfx + `_data (resource text, key text, value text NOT NULL, rev bigint NOT NULL, PRIMARY KEY (resource, key))`,
		`CREATE SEQUENCE ` + g.pfx + `_rev`,
	} {
		if _, err := pool.Exec(cctx, ddl); err != nil {
			return nil, fmt.Errorf("chaos: --guard: %w", err)
		}
	}
	if g.proxy, err = proxy.New("127.0.0.1:0", net.JoinHostPort(host, strconv.Itoa(int(pc.ConnConfig.Port)))); err != nil {
		return nil, fmt.Errorf("chaos: --guard: %w", err)
	}
	return g, nil
}

// finalReads reads every key directly from the database, as client -1.
func (g *pgTarget) finalReads(r *run) {
	for res := range r.cfg.Resources {
		for k := range r.cfg.Keys {
			resource, key := "r"+strconv.Itoa(res), r.keyPrefix+"k"+strconv.Itoa(k)
			op := history.Op{ID: r.harnessID(), Client: -1, Kind: history.KindRead, Resource: resource, Key: key, Call: r.now()}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			value, rev, err := readRow(ctx, g.pool, g.pfx, resource, key)
			cancel()
			op.Value, op.Rev, op.Outcome = value, rev, pgOutcome(err)
			if op.Outcome != history.Unknown {
				op.Return = r.now()
			}
			if err != nil {
				op.Error = err.Error()
			}
			r.record(op)
		}
	}
}

// close drops the run's tables and closes the connections and the proxy.
func (g *pgTarget) close() {
	if g.proxy != nil {
		g.proxy.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g.pool.Exec(ctx, `DROP TABLE IF EXISTS `+g.pfx+`_data, `+g.pfx+`_fences`)
	g.pool.Exec(ctx, `DROP SEQUENCE IF EXISTS `+g.pfx+`_rev`)
	g.pool.Close()
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// readRow reads resource/key from the run's data table: "", 0 if absent.
func readRow(ctx context.Context, q querier, prefix, resource, key string) (string, uint64, error) {
	var value string
	var rev int64
	err := q.QueryRow(ctx, `SELECT value, rev FROM `+prefix+`_data WHERE resource = $1 AND key = $2`, resource, key).Scan(&value, &rev)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("chaos: read %s/%s: %w", resource, key, err)
	}
	return value, uint64(rev), nil
}

// pgOutcome classifies an error of the guard or of the database: what the
// history may assume about the operation. A rejection by the database (a
// *pgconn.PgError: the transaction was rolled back) and a connection that
// was never made are definite; anything else may have committed.
func pgOutcome(err error) history.Outcome {
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	switch {
	case err == nil:
		return history.OK
	case errors.Is(err, fence.ErrFenced):
		return history.Fenced
	case errors.As(err, &pe), errors.Is(err, pgx.ErrTxCommitRollback):
		return history.Rejected
	case errors.As(err, &ce):
		return history.Fail // never connected, so nothing was sent
	}
	return history.Unknown
}

// storage is where a client reads and writes: fence's storage over HTTP,
// or PostgreSQL through the guard. Each call is one operation of the
// history, never retried.
type storage interface {
	// get reads resource/key: "", 0 if it is absent.
	get(ctx context.Context, resource, key string) (value string, rev uint64, err error)
	// put writes resource/key with token, and returns the write's revision.
	put(ctx context.Context, resource, key, value string, token fence.Token) (rev uint64, err error)
	// txn writes writes in one transaction, fenced by each resource's token
	// in fences, and returns its revision.
	txn(ctx context.Context, fences map[string]fence.Token, order []string, writes []history.Write) (rev uint64, err error)
	// outcome classifies an error of the three.
	outcome(err error) history.Outcome
}

// httpStorage is fence's storage, through its HTTP API.
type httpStorage struct{ api httpStore }

// httpStore is what httpStorage needs of client.API.
type httpStore interface {
	Get(ctx context.Context, resource, key string) (fence.Item, error)
	Put(ctx context.Context, resource, key string, value []byte, token fence.Token, c fence.Cond) (fence.WriteResult, error)
	Txn(ctx context.Context, t *fence.Txn) (fence.Rev, error)
}

func (s httpStorage) get(ctx context.Context, resource, key string) (string, uint64, error) {
	item, err := s.api.Get(ctx, resource, key)
	if errors.Is(err, fence.ErrNotFound) {
		err = nil // absent: value "" at revision 0
	}
	return string(item.Value), uint64(item.Rev), err
}

func (s httpStorage) put(ctx context.Context, resource, key, value string, token fence.Token) (uint64, error) {
	res, err := s.api.Put(ctx, resource, key, []byte(value), token, fence.Cond{})
	return uint64(res.Rev), err
}

func (s httpStorage) txn(ctx context.Context, fences map[string]fence.Token, _ []string, writes []history.Write) (uint64, error) {
	t := &fence.Txn{Fences: fences}
	for _, wr := range writes {
		t.Then = append(t.Then, fence.Op{Kind: fence.OpPut, Resource: wr.Resource, Key: wr.Key, Value: []byte(wr.Value)})
	}
	rev, err := s.api.Txn(ctx, t)
	return uint64(rev), err
}

func (httpStorage) outcome(err error) history.Outcome { return outcome(err) }

// pgStorage is PostgreSQL through fence's guard: every write runs in a
// transaction that first checks and raises its resources' fences, then
// takes the next revision from the run's sequence (the fence rows stay
// locked until the commit, so a resource's revisions grow in commit
// order), and upserts the rows. Unsafe skips the fence.
type pgStorage struct {
	pool    *pgxpool.Pool
	guard   *postgres.Guard
	prefix  string
	timeout time.Duration
	unsafe  bool
}

// newPGStorage connects to conn, but at addr (the proxy) instead of its host.
func newPGStorage(ctx context.Context, conn, addr, prefix string, timeout time.Duration, unsafe bool) (*pgStorage, error) {
	pc, err := pgxpool.ParseConfig(conn)
	if err != nil {
		return nil, fmt.Errorf("chaos: guard: %w", err)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("chaos: guard address: %w", err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("chaos: guard address %q: %w", addr, err)
	}
	// The TLS settings, server name included, were derived from the real
	// host by ParseConfig: only where to dial changes.
	pc.ConnConfig.Host, pc.ConnConfig.Port = host, uint16(p)
	for _, fb := range pc.ConnConfig.Fallbacks {
		fb.Host, fb.Port = host, uint16(p)
	}
	pc.ConnConfig.ConnectTimeout = timeout
	pc.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("chaos: guard: %w", err)
	}
	g := postgres.NewGuard(pool)
	g.Table = prefix + "_fences"
	return &pgStorage{pool: pool, guard: g, prefix: prefix, timeout: timeout, unsafe: unsafe}, nil
}

func (s *pgStorage) get(ctx context.Context, resource, key string) (string, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return readRow(ctx, s.pool, s.prefix, resource, key)
}

// upsert takes the next revision and writes the rows with it.
func (s *pgStorage) upsert(ctx context.Context, tx pgx.Tx, writes []history.Write) (uint64, error) {
	var rev int64
	if err := tx.QueryRow(ctx, `SELECT nextval('`+s.prefix+`_rev')`).Scan(&rev); err != nil {
		return 0, err
	}
	for _, w := range writes {
		if _, err := tx.Exec(ctx, `INSERT INTO `+s.prefix+`_data (resource, key, value, rev) VALUES ($1, $2, $3, $4)
ON CONFLICT (resource, key) DO UPDATE SET value = EXCLUDED.value, rev = EXCLUDED.rev`, w.Resource, w.Key, w.Value, rev); err != nil {
			return 0, err
		}
	}
	return uint64(rev), nil
}

func (s *pgStorage) put(ctx context.Context, resource, key, value string, token fence.Token) (uint64, error) {
	return s.txn(ctx, map[string]fence.Token{resource: token}, []string{resource},
		[]history.Write{{Resource: resource, Key: key, Value: value, Token: uint64(token)}})
}

// txn checks the fences in order, the same for every client (the clients
// acquire their resources in that order too), so that two transactions
// never wait on each other's fence rows in a cycle.
func (s *pgStorage) txn(ctx context.Context, fences map[string]fence.Token, order []string, writes []history.Write) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if len(order) == 1 && !s.unsafe {
		var rev uint64
		err := s.guard.Run(ctx, order[0], fences[order[0]], func(ctx context.Context, tx pgx.Tx) error {
			var err error
			rev, err = s.upsert(ctx, tx, writes)
			return err
		})
		return rev, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("chaos: guard: begin: %w", err)
	}
	defer tx.Rollback(ctx) // after Commit, nothing
	if !s.unsafe {
		for _, r := range order {
			if err := s.guard.Check(ctx, tx, r, fences[r]); err != nil {
				return 0, err
			}
		}
	}
	rev, err := s.upsert(ctx, tx, writes)
	if err != nil {
		return 0, fmt.Errorf("chaos: guard: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("chaos: guard: commit: %w", err)
	}
	return rev, nil
}

func (*pgStorage) outcome(err error) history.Outcome { return pgOutcome(err) }
