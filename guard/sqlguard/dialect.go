package sqlguard

import (
	"fmt"
	"strings"
)

// DefaultTable is the name of the fence table unless Guard.Table says
// otherwise: the same as the postgres package's.
const DefaultTable = "fence_fences"

// Dialect is the SQL a Guard speaks: Postgres or MySQL. The zero value is
// no dialect: a Guard with it returns an error from every method.
type Dialect int

const (
	// Postgres is PostgreSQL's SQL, for database/sql drivers such as
	// github.com/jackc/pgx/v5/stdlib and github.com/lib/pq ($1 placeholders).
	// The fence row is checked and raised with
	// INSERT ... ON CONFLICT (resource) DO UPDATE ... WHERE last_fence <= token,
	// as the postgres package does.
	Postgres Dialect = iota + 1
	// MySQL is MySQL's and MariaDB's SQL (InnoDB), for
	// github.com/go-sql-driver/mysql (? placeholders). The fence row is
	// checked and raised with
	// INSERT ... ON DUPLICATE KEY UPDATE last_fence = GREATEST(last_fence, token).
	MySQL
)

// String returns "postgres" or "mysql", the dialect's name in errors.
func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case MySQL:
		return "mysql"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

func (d Dialect) valid() error {
	if d != Postgres && d != MySQL {
		return fmt.Errorf("unknown dialect %v: want sqlguard.Postgres or sqlguard.MySQL", d)
	}
	return nil
}

// Schema returns the DDL of the fence table with its default name,
// DefaultTable: one row per resource ever fenced, holding its last fence.
// CreateTable runs it. Never delete a row: that would reset the resource's
// fence, and a stale holder's write would be accepted. It returns "" for an
// unknown dialect.
//
// PostgreSQL: CREATE TABLE IF NOT EXISTS fence_fences (resource text PRIMARY
// KEY, last_fence bigint NOT NULL CHECK (last_fence > 0)), postgres.Schema's
// table.
//
// MySQL: CREATE TABLE IF NOT EXISTS fence_fences (resource varbinary(512) NOT
// NULL PRIMARY KEY, last_fence bigint NOT NULL, CHECK (last_fence > 0))
// ENGINE=InnoDB. The resource is binary, so that two names are one row only
// when their bytes are equal (no collation folds case or trailing spaces);
// 512 bytes is fence.MaxNameLen. InnoDB, for the row locks.
func (d Dialect) Schema() string {
	table, err := d.quoteTable(DefaultTable)
	if err != nil {
		return ""
	}
	return d.createTable(table)
}

// PostgresColumns is the fence table's columns on PostgreSQL, the DDL after
// the table's name. Package guard/postgres (on pgx) creates the same table
// from it, so that both guards fence one resource through one row.
const PostgresColumns = ` (resource text PRIMARY KEY, last_fence bigint NOT NULL CHECK (last_fence > 0))`

func (d Dialect) createTable(table string) string {
	switch d {
	case Postgres:
		return `CREATE TABLE IF NOT EXISTS ` + table + PostgresColumns
	case MySQL:
		return `CREATE TABLE IF NOT EXISTS ` + table + ` (resource varbinary(512) NOT NULL PRIMARY KEY, last_fence bigint NOT NULL, CHECK (last_fence > 0)) ENGINE=InnoDB`
	}
	return ""
}

// raise returns the statement that checks and raises the fence, its
// arguments, and the rows affected that prove the token was accepted
// without a second statement.
//
// Postgres: one row affected (inserted, or updated because last_fence <=
// token, an equal token included) means accepted; none means the WHERE
// failed: rejected. The statement locks the row in both cases.
//
// MySQL: ON DUPLICATE KEY UPDATE reports 1 for an inserted row, 2 for an
// existing row whose value changed, and 0 for one left as it was (1 with
// the CLIENT_FOUND_ROWS flag, clientFoundRows=true in the DSN, which a Guard
// cannot see). GREATEST changes the value only when token > last_fence, so 2
// proves acceptance whatever the flag; 0 and 1 are ambiguous (an insert, an
// equal token, or a rejection), and the locking read decides. The statement
// takes the row's exclusive lock (or inserts it, locked) and, like every
// InnoDB write, compares against the row's latest committed version, not a
// REPEATABLE READ snapshot: a stale token cannot pass on an old version.
func (d Dialect) raise(table, resource string, token int64) (query string, args []any, accepted int64) {
	switch d {
	case Postgres:
		return `INSERT INTO ` + table + ` AS f (resource, last_fence) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET last_fence = EXCLUDED.last_fence
WHERE f.last_fence <= EXCLUDED.last_fence`, []any{resource, token}, 1
	case MySQL:
		return `INSERT INTO ` + table + ` (resource, last_fence) VALUES (?, ?)
ON DUPLICATE KEY UPDATE last_fence = GREATEST(last_fence, ?)`, []any{resource, token, token}, 2
	}
	return "", nil, 0
}

// lockedRead returns the statement that reads the fence after raise,
// inside raise's transaction, while the row is locked by it.
//
// Postgres: a plain SELECT. In READ COMMITTED its snapshot is newer than the
// lock; in REPEATABLE READ and SERIALIZABLE it is the transaction's, and a
// newer version would have made raise fail with a serialization failure.
//
// MySQL: SELECT ... FOR UPDATE, a locking read, which InnoDB answers from
// the latest committed version (the one raise compared against, or raise's
// own); a plain SELECT in REPEATABLE READ would read the transaction's
// snapshot, which may predate it.
func (d Dialect) lockedRead(table string) string {
	switch d {
	case Postgres:
		return `SELECT last_fence FROM ` + table + ` WHERE resource = $1`
	case MySQL:
		return `SELECT last_fence FROM ` + table + ` WHERE resource = ? FOR UPDATE`
	}
	return ""
}

// read returns the statement that reads the last committed fence, outside
// a transaction.
func (d Dialect) read(table string) string {
	switch d {
	case Postgres:
		return `SELECT last_fence FROM ` + table + ` WHERE resource = $1`
	case MySQL:
		return `SELECT last_fence FROM ` + table + ` WHERE resource = ?`
	}
	return ""
}

// quoteTable returns name quoted for SQL if it is a valid table name: one or
// two (schema- or database-qualified) parts of 1 to 63 lowercase ASCII
// letters, digits and underscores, not starting with a digit. Lowercase
// only, so that the quoted name is the same table as the name written
// unquoted (PostgreSQL folds unquoted names to lowercase; MySQL's may be
// case-sensitive, lower_case_table_names).
func (d Dialect) quoteTable(name string) (string, error) {
	if err := d.valid(); err != nil {
		return "", err
	}
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("invalid table name %q: more than one '.'", name)
	}
	q := `"`
	if d == MySQL {
		q = "`"
	}
	for i, p := range parts {
		if !isIdentifier(p) {
			return "", fmt.Errorf("invalid table name %q: want [schema.]name, each 1..63 of a-z, 0-9 and _, not starting with a digit", name)
		}
		parts[i] = q + p + q // no quote character can be inside
	}
	return strings.Join(parts, "."), nil
}

func isIdentifier(s string) bool {
	if len(s) == 0 || len(s) > 63 || ('0' <= s[0] && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
