package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/state"
)

// DefaultElectionTTL is the default Store.ElectionTTL.
const DefaultElectionTTL = 2 * time.Second

// StoreSchema is the DDL of the tables a Store keeps fence's state in
// (OpenStore creates them if they do not exist): the leader row, with the
// writer epoch, the leader's lease and the store revision; one row per
// resource (with its lease's holder, owner and session) and per entry; and the servers that share the store. Put them in
// a schema of their own with search_path in the connection string.
const StoreSchema = `
CREATE TABLE IF NOT EXISTS fence_leader (
	id      int PRIMARY KEY CHECK (id = 1),
	epoch   bigint NOT NULL,
	leader  text NOT NULL,
	key_id  text NOT NULL,
	expires timestamptz NOT NULL,
	rev     bigint NOT NULL
);
INSERT INTO fence_leader VALUES (1, 0, '', '', '-infinity', 0) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS fence_resources (
	name        text PRIMARY KEY,
	last_token  bigint NOT NULL,
	last_fence  bigint NOT NULL,
	lease_token bigint NOT NULL,
	holder      text NOT NULL,
	ttl_ns      bigint NOT NULL,
	expires_ns  bigint NOT NULL,
	delay_ns    bigint NOT NULL,
	owner       text NOT NULL DEFAULT '',
	owner_token bigint NOT NULL DEFAULT 0,
	session       text NOT NULL DEFAULT '',
	session_token bigint NOT NULL DEFAULT 0,
	session_lease bigint NOT NULL DEFAULT 0,
	shared_holders bytea NOT NULL DEFAULT '',
	shared_lease   bigint NOT NULL DEFAULT 0,
	revoke_grace_ns bigint NOT NULL DEFAULT 0,
	revoke_lease    bigint NOT NULL DEFAULT 0
);
DO $$ BEGIN
	IF NOT EXISTS (SELECT 1 FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'fence_resources' AND column_name = 'owner_token') THEN
		ALTER TABLE fence_resources ADD COLUMN IF NOT EXISTS owner text NOT NULL DEFAULT '',
			ADD COLUMN owner_token bigint NOT NULL DEFAULT 0;
	END IF;
	IF NOT EXISTS (SELECT 1 FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'fence_resources' AND column_name = 'session_lease') THEN
		ALTER TABLE fence_resources ADD COLUMN IF NOT EXISTS session text NOT NULL DEFAULT '',
			ADD COLUMN IF NOT EXISTS session_token bigint NOT NULL DEFAULT 0,
			ADD COLUMN session_lease bigint NOT NULL DEFAULT 0;
	END IF;
	IF NOT EXISTS (SELECT 1 FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'fence_resources' AND column_name = 'shared_lease') THEN
		ALTER TABLE fence_resources ADD COLUMN IF NOT EXISTS shared_holders bytea NOT NULL DEFAULT '',
			ADD COLUMN shared_lease bigint NOT NULL DEFAULT 0;
	END IF;
	IF NOT EXISTS (SELECT 1 FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'fence_resources' AND column_name = 'revoke_lease') THEN
		ALTER TABLE fence_resources ADD COLUMN IF NOT EXISTS revoke_grace_ns bigint NOT NULL DEFAULT 0,
			ADD COLUMN revoke_lease bigint NOT NULL DEFAULT 0;
	END IF;
END $$;
CREATE TABLE IF NOT EXISTS fence_entries (
	resource text NOT NULL,
	key      text NOT NULL,
	rev      bigint NOT NULL,
	token    bigint NOT NULL,
	value    bytea NOT NULL,
	PRIMARY KEY (resource, key)
);
CREATE TABLE IF NOT EXISTS fence_members (
	url     text PRIMARY KEY,
	key_id  text NOT NULL,
	expires timestamptz NOT NULL
);
ALTER TABLE fence_leader ADD COLUMN IF NOT EXISTS commit_seq bigint NOT NULL DEFAULT 0;
CREATE OR REPLACE FUNCTION fence_commit(e bigint, r bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	UPDATE fence_leader SET rev = r WHERE id = 1 AND epoch = e;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'fence: writer epoch % is not current', e USING ERRCODE = 'FE001';
	END IF;
END $$;
CREATE OR REPLACE FUNCTION fence_commit(e bigint, r bigint, seq bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	UPDATE fence_leader SET rev = GREATEST(rev, r), commit_seq = CASE WHEN seq > 0 THEN seq ELSE commit_seq END
		WHERE id = 1 AND epoch = e AND (seq = 0 OR commit_seq = seq - 1);
	IF NOT FOUND THEN
		IF EXISTS (SELECT 1 FROM fence_leader WHERE id = 1 AND epoch = e) THEN
			RAISE EXCEPTION 'fence: commit % of epoch % came before the commit it follows', seq, e USING ERRCODE = 'FE002';
		END IF;
		RAISE EXCEPTION 'fence: writer epoch % is not current', e USING ERRCODE = 'FE001';
	END IF;
END $$;
CREATE OR REPLACE FUNCTION fence_commit(e bigint, r bigint, since bigint, seq bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	at bigint;
BEGIN
	UPDATE fence_leader SET rev = GREATEST(rev, r), commit_seq = CASE WHEN seq > 0 THEN seq ELSE commit_seq END
		WHERE id = 1 AND epoch = e AND (seq = 0 OR commit_seq BETWEEN since - 1 AND seq - 1);
	IF NOT FOUND THEN
		SELECT commit_seq INTO at FROM fence_leader WHERE id = 1 AND epoch = e;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'fence: writer epoch % is not current', e USING ERRCODE = 'FE001';
		ELSIF at >= seq THEN
			RAISE EXCEPTION 'fence: commit % of epoch % was applied already', seq, e USING ERRCODE = 'FE003';
		END IF;
		RAISE EXCEPTION 'fence: commit % of epoch % came before the commit it follows', seq, e USING ERRCODE = 'FE002';
	END IF;
END $$;
`

// codeDeposed is the SQLSTATE fence_commit raises when the epoch moved.
const codeDeposed = "FE001"

// codeOutOfOrder is the SQLSTATE fence_commit raises when the commit before
// the one it numbers was not applied (state.ErrOutOfOrder).
const codeOutOfOrder = "FE002"

// codeApplied is the SQLSTATE fence_commit raises when a commit numbered
// as this one or later was applied: this one's changes are applied (by an
// earlier attempt, or carried by a later commit), and its transaction,
// rolled back, changes nothing.
const codeApplied = "FE003"

// Store is fence's whole state in a PostgreSQL database, for several fence
// servers that share it: a state.Remote (the lock state and the fenced
// storage; every commit one transaction that first checks the writer epoch
// in the leader row, which it keeps locked until it commits) and a
// state.Elector (a leader row whose lease is counted by the database's
// clock). It is safe for concurrent use.
//
// A commit is as durable as the database makes it: it survives the loss of
// the primary only with synchronous_commit on and a synchronous standby
// (synchronous_standby_names), and a failover manager that promotes only a
// synchronous standby (Patroni's synchronous_mode). Without them a failover
// may lose acknowledged changes and issue a token twice. Commits are never
// cancelled: a commit whose wait for the standby was cancelled is already
// committed on the primary, so a commit that times out is of unknown outcome
// and ends the leader's term; the next leader starts with a synchronous
// write.
type Store struct {
	pool *pgxpool.Pool
	self state.Member
	opts state.EngineOptions

	stopC chan struct{}
	wg    sync.WaitGroup
}

var (
	_ state.Remote  = (*Store)(nil)
	_ state.Elector = (*Store)(nil)
)

// OpenStore connects to the database that connString names (a pgx
// connection string; several hosts with target_session_attrs=read-write
// find the primary after a failover), creates the tables of StoreSchema if
// they do not exist, and registers opts.Self as one of its servers.
func OpenStore(ctx context.Context, connString string, opts state.EngineOptions) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("postgres: store: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: store: %w", err)
	}
	s, err := NewStore(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// NewStore returns a Store on pool for the server opts.Self, creating the
// tables of StoreSchema if they do not exist. Close closes pool.
func NewStore(ctx context.Context, pool *pgxpool.Pool, opts state.EngineOptions) (*Store, error) {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// Servers starting together would race on CREATE OR REPLACE FUNCTION.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7700)`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, StoreSchema)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: store: create tables: %w", err)
	}
	s := &Store{pool: pool, self: opts.Self, opts: opts, stopC: make(chan struct{})}
	s.wg.Add(1)
	go s.register()
	return s, nil
}

// Close stops this server's membership and closes the pool.
func (s *Store) Close() error {
	select {
	case <-s.stopC:
	default:
		close(s.stopC)
	}
	s.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s.pool.Exec(ctx, `DELETE FROM fence_members WHERE url = $1`, s.self.URL)
	s.pool.Close()
	return nil
}

func (s *Store) ttl() time.Duration {
	if s.opts.ElectionTTL <= 0 {
		return DefaultElectionTTL
	}
	return s.opts.ElectionTTL
}

// register keeps this server's member row fresh until Close.
func (s *Store) register() {
	defer s.wg.Done()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), s.ttl())
		s.pool.Exec(ctx, `INSERT INTO fence_members VALUES ($1, $2, now() + $3 * interval '1 millisecond')
			ON CONFLICT (url) DO UPDATE SET key_id = EXCLUDED.key_id, expires = EXCLUDED.expires`,
			s.self.URL, s.self.KeyID, s.ttl().Milliseconds())
		cancel()
		select {
		case <-s.stopC:
			return
		case <-time.After(s.ttl() / 3):
		}
	}
}

// Members implements state.Elector.
func (s *Store) Members(ctx context.Context) ([]state.Member, error) {
	rows, err := s.pool.Query(ctx, `SELECT url, key_id FROM fence_members WHERE expires > now() ORDER BY url`)
	if err != nil {
		return nil, fmt.Errorf("postgres: members: %w", err)
	}
	ms, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.Member, error) {
		var m state.Member
		err := row.Scan(&m.URL, &m.KeyID)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: members: %w", err)
	}
	return ms, nil
}

// Leader implements state.Elector.
func (s *Store) Leader(ctx context.Context) (state.Member, state.Epoch, bool, error) {
	var m state.Member
	var epoch int64
	var live bool
	err := s.pool.QueryRow(ctx, `SELECT epoch, leader, key_id, expires > now() FROM fence_leader WHERE id = 1`).Scan(&epoch, &m.URL, &m.KeyID, &live)
	if err != nil {
		return state.Member{}, 0, false, fmt.Errorf("postgres: leader: %w", err)
	}
	return m, state.Epoch(epoch), live && m.URL != "", nil
}

// Campaign implements state.Elector: it takes the leader row once its lease
// has passed by the database's clock, raising the epoch in the same
// statement, and then keeps the lease fresh.
func (s *Store) Campaign(ctx context.Context) (state.Term, error) {
	for {
		var epoch int64
		err := s.pool.QueryRow(ctx, `UPDATE fence_leader
			SET epoch = epoch + 1, commit_seq = 0, leader = $1, key_id = $2, expires = now() + $3 * interval '1 millisecond'
			WHERE id = 1 AND expires < now() RETURNING epoch`,
			s.self.URL, s.self.KeyID, s.ttl().Milliseconds()).Scan(&epoch)
		switch {
		case err == nil:
			t := &term{s: s, epoch: state.Epoch(epoch), doneC: make(chan struct{}), stopC: make(chan struct{})}
			s.wg.Add(1)
			go t.keepalive()
			return t, nil
		case !errors.Is(err, pgx.ErrNoRows):
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("postgres: campaign: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(s.ttl() / 8):
		}
	}
}

// term is one leadership of this server.
type term struct {
	s        *Store
	epoch    state.Epoch
	doneC    chan struct{} // closed when the lease may be lost
	stopC    chan struct{} // closed by Resign
	stopOnce sync.Once
}

func (t *term) Epoch() state.Epoch    { return t.epoch }
func (t *term) Done() <-chan struct{} { return t.doneC }

// keepalive renews the lease every third of the TTL. The lease counts as
// lost (Done) when the row says another epoch, or when no renewal has
// succeeded for a TTL by this server's clock, sent before the database's
// clock started counting it.
func (t *term) keepalive() {
	defer t.s.wg.Done()
	defer close(t.doneC)
	ttl := t.s.ttl()
	lastOK := time.Now()
	for {
		select {
		case <-t.stopC:
			return
		case <-t.s.stopC:
			return
		case <-time.After(ttl / 3):
		}
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), ttl/2)
		tag, err := t.s.pool.Exec(ctx, `UPDATE fence_leader SET expires = now() + $2 * interval '1 millisecond' WHERE id = 1 AND epoch = $1`,
			int64(t.epoch), ttl.Milliseconds())
		cancel()
		switch {
		case err == nil && tag.RowsAffected() == 0:
			return // deposed
		case err == nil:
			lastOK = sent
		case time.Since(lastOK) >= ttl:
			return
		}
	}
}

func (t *term) Resign(ctx context.Context) error {
	t.stopOnce.Do(func() { close(t.stopC) })
	_, err := t.s.pool.Exec(ctx, `UPDATE fence_leader SET expires = '-infinity' WHERE id = 1 AND epoch = $1`, int64(t.epoch))
	if err != nil {
		return fmt.Errorf("postgres: resign: %w", err)
	}
	return nil
}

// Load implements state.Remote: every resource and the revision, in one
// repeatable-read transaction.
func (s *Store) Load(ctx context.Context, fn func(name string, r state.Resource) error) (fence.Rev, error) {
	var rev int64
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT rev FROM fence_leader WHERE id = 1`).Scan(&rev); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT name, last_token, last_fence, lease_token, holder, ttl_ns, expires_ns, delay_ns,
			CASE WHEN owner_token = lease_token THEN owner ELSE '' END,
			CASE WHEN session_lease = lease_token THEN session ELSE '' END,
			CASE WHEN session_lease = lease_token THEN session_token ELSE 0 END,
			CASE WHEN shared_lease = lease_token THEN shared_holders ELSE '' END,
			CASE WHEN revoke_lease = lease_token THEN revoke_grace_ns ELSE 0 END FROM fence_resources`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var r state.Resource
			var lastToken, lastFence, leaseToken, ttl, delay, sessionToken, grace int64
			var members []byte
			if err := rows.Scan(&name, &lastToken, &lastFence, &leaseToken, &r.Holder, &ttl, &r.Expires, &delay, &r.Owner, &r.Session, &sessionToken, &members, &grace); err != nil {
				return err
			}
			r.RevokeGrace = time.Duration(grace)
			if r.Members, err = state.DecodeMembers(members); err != nil {
				return fmt.Errorf("resource %q: %w", name, err)
			}
			r.LastToken, r.LastFence, r.LeaseToken = fence.Token(lastToken), fence.Token(lastFence), fence.Token(leaseToken)
			r.SessionToken = fence.Token(sessionToken)
			r.TTL, r.Delay = time.Duration(ttl), time.Duration(delay)
			if err := fn(name, r); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: load: %w", err)
	}
	return fence.Rev(rev), nil
}

// Entry implements state.Remote.
func (s *Store) Entry(ctx context.Context, resource, key string) (state.Entry, bool, error) {
	var e state.Entry
	var rev, token int64
	err := s.pool.QueryRow(ctx, `SELECT rev, token, value FROM fence_entries WHERE resource = $1 AND key = $2`, resource, key).Scan(&rev, &token, &e.Value)
	if errors.Is(err, pgx.ErrNoRows) {
		return state.Entry{}, false, nil
	}
	if err != nil {
		return state.Entry{}, false, fmt.Errorf("postgres: get %q/%q: %w", resource, key, err)
	}
	e.Rev, e.Token = fence.Rev(rev), fence.Token(token)
	return e, true, nil
}

// Commit implements state.Remote: one transaction, sent in one round trip,
// that checks the epoch (and locks the leader row) first.
func (s *Store) Commit(ctx context.Context, epoch state.Epoch, c *state.Changes) error {
	rev := int64(c.Rev)
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	if s.opts.UnsafeSkipEpochCheck {
		b.Queue(`UPDATE fence_leader SET rev = $1 WHERE id = 1`, rev)
	} else {
		// The update makes even an empty commit write (and wait for the
		// synchronous standby), so that a primary cut off from its standby
		// confirms no read. It numbers the commits that write: c carries
		// the changes of commits c.From() to c.Seq of the epoch, and
		// applies only if the last one applied is one of c.From()-1 ..
		// c.Seq-1 (several are in flight, on several connections: the
		// leader row's lock orders them as they arrive, and the first
		// applies what it carries; the ones it carried then apply
		// nothing).
		b.Queue(`SELECT fence_commit($1, $2, $3, $4)`, int64(epoch), rev, int64(c.From()), int64(c.Seq))
	}
	if n := len(c.Resources); n > 0 {
		names := make([]string, 0, n)
		var lastToken, lastFence, leaseToken, ttl, expires, delay, sessionTokens, graces []int64
		holders, owners, sessions := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
		members := make([][]byte, 0, n)
		for name, r := range c.Resources {
			m := state.EncodeMembers(r.Members)
			if m == nil {
				m = []byte{} // none, not NULL
			}
			members, graces = append(members, m), append(graces, int64(r.RevokeGrace))
			names, holders, owners = append(names, name), append(holders, r.Holder), append(owners, r.Owner)
			sessions, sessionTokens = append(sessions, r.Session), append(sessionTokens, int64(r.SessionToken))
			lastToken, lastFence, leaseToken = append(lastToken, int64(r.LastToken)), append(lastFence, int64(r.LastFence)), append(leaseToken, int64(r.LeaseToken))
			ttl, expires, delay = append(ttl, int64(r.TTL)), append(expires, r.Expires), append(delay, int64(r.Delay))
		}
		// owner_token, session_lease, shared_lease and revoke_lease say which
		// lease owner, session, shared holders and revoke grace belong to: a
		// server older than them changes the lease and leaves them as they
		// were, which Load then ignores.
		b.Queue(`INSERT INTO fence_resources (name, last_token, last_fence, lease_token, holder, ttl_ns, expires_ns, delay_ns, owner, owner_token,
				session, session_token, session_lease, shared_holders, shared_lease, revoke_grace_ns, revoke_lease)
			SELECT n, lt, lf, le, h, tt, ex, de, o, le, s, st, le, sh, le, rg, le FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[], $9::text[], $10::text[], $11::bigint[], $12::bytea[], $13::bigint[])
				AS u(n, lt, lf, le, h, tt, ex, de, o, s, st, sh, rg)
			ON CONFLICT (name) DO UPDATE SET last_token = EXCLUDED.last_token, last_fence = EXCLUDED.last_fence,
				lease_token = EXCLUDED.lease_token, holder = EXCLUDED.holder, ttl_ns = EXCLUDED.ttl_ns,
				expires_ns = EXCLUDED.expires_ns, delay_ns = EXCLUDED.delay_ns, owner = EXCLUDED.owner,
				owner_token = EXCLUDED.owner_token, session = EXCLUDED.session, session_token = EXCLUDED.session_token,
				session_lease = EXCLUDED.session_lease, shared_holders = EXCLUDED.shared_holders, shared_lease = EXCLUDED.shared_lease,
				revoke_grace_ns = EXCLUDED.revoke_grace_ns, revoke_lease = EXCLUDED.revoke_lease`,
			names, lastToken, lastFence, leaseToken, holders, ttl, expires, delay, owners, sessions, sessionTokens, members, graces)
	}
	var putRes, putKeys, delRes, delKeys []string
	var putRevs, putTokens []int64
	var putValues [][]byte
	for id, e := range c.Entries {
		if e == nil {
			delRes, delKeys = append(delRes, id.Resource), append(delKeys, id.Key)
			continue
		}
		putRes, putKeys = append(putRes, id.Resource), append(putKeys, id.Key)
		v := e.Value
		if v == nil {
			v = []byte{} // an empty value, not NULL
		}
		putRevs, putTokens, putValues = append(putRevs, int64(e.Rev)), append(putTokens, int64(e.Token)), append(putValues, v)
	}
	if len(delRes) > 0 {
		b.Queue(`DELETE FROM fence_entries WHERE (resource, key) IN (SELECT * FROM unnest($1::text[], $2::text[]))`, delRes, delKeys)
	}
	if len(putRes) > 0 {
		b.Queue(`INSERT INTO fence_entries SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bytea[])
			ON CONFLICT (resource, key) DO UPDATE SET rev = EXCLUDED.rev, token = EXCLUDED.token, value = EXCLUDED.value`,
			putRes, putKeys, putRevs, putTokens, putValues)
	}
	b.Queue(`COMMIT`)

	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: commit: %w: %w", state.ErrNotApplied, err)
	}
	defer conn.Release()
	br := conn.SendBatch(ctx, b)
	var first error
	firstAt := -1 // the statement that failed first
	var commitTag pgconn.CommandTag
	for i := range b.Len() {
		tag, err := br.Exec()
		if i == b.Len()-1 {
			commitTag = tag
		}
		if err != nil && first == nil {
			first, firstAt = err, i
		}
	}
	closeErr := br.Close()
	if conn.Conn().PgConn().TxStatus() != 'I' {
		// A statement failed inside the transaction: end it now, so that
		// the leader row is not kept locked.
		conn.Exec(context.WithoutCancel(ctx), `ROLLBACK`)
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.As(first, &pgErr) && pgErr.Code == codeDeposed:
		return fmt.Errorf("postgres: commit: %w", state.ErrDeposed)
	case errors.As(first, &pgErr) && pgErr.Code == codeApplied:
		return nil
	case errors.As(first, &pgErr) && pgErr.Code == codeOutOfOrder:
		return fmt.Errorf("postgres: commit %d: %w", c.Seq, state.ErrOutOfOrder)
	case errors.As(first, &pgErr) && firstAt < b.Len()-1:
		// The server refused a statement before COMMIT: the transaction
		// rolled back. An error of COMMIT itself may come after the
		// transaction was committed on the primary (a backend terminated
		// while it waited for the standby): its outcome is unknown.
		return fmt.Errorf("postgres: commit: %w: %w", state.ErrNotApplied, first)
	case first != nil:
		return fmt.Errorf("postgres: commit: %w", first)
	case closeErr != nil:
		return fmt.Errorf("postgres: commit: %w", closeErr)
	case commitTag.String() != "COMMIT":
		return fmt.Errorf("postgres: commit: %w: the transaction ended in %s", state.ErrNotApplied, commitTag)
	}
	return nil
}
