package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fence-lock/fence/guard/sqlguard"
)

// DefaultTable is the name of the fence table unless Guard.Table says otherwise.
const DefaultTable = "fence_fences"

// Schema is the DDL of the fence table with its default name, DefaultTable:
// one row per resource ever fenced, holding its last fence. CreateTable runs
// it. Never delete a row: that would reset the resource's fence, and a stale
// holder's write would be accepted.
// The table is guard/sqlguard's on PostgreSQL: a resource fenced through
// either guard is fenced through both.
const Schema = `CREATE TABLE IF NOT EXISTS ` + DefaultTable + sqlguard.PostgresColumns

// createTable returns Schema for the quoted table name.
func createTable(table string) string {
	return `CREATE TABLE IF NOT EXISTS ` + table + sqlguard.PostgresColumns
}

// Execer runs a statement: *pgxpool.Pool, *pgx.Conn and pgx.Tx implement it.
type Execer interface {
	Exec(ctx context.Context, sql string, arguments ...any) (pgconn.CommandTag, error)
}

// CreateTable creates the fence table DefaultTable (Schema) if it does not
// exist. To create a table with another name, use Guard.CreateTable.
func CreateTable(ctx context.Context, db Execer) error {
	if _, err := db.Exec(ctx, Schema); err != nil {
		return fmt.Errorf("postgres: create table %s: %w", DefaultTable, err)
	}
	return nil
}

// quoteTable returns name quoted for SQL if it is a valid table name: one or
// two (schema-qualified) parts of 1 to 63 lowercase ASCII letters, digits
// and underscores, not starting with a digit. Lowercase only, so that the
// quoted name is the same table as the name written unquoted.
func quoteTable(name string) (string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("postgres: invalid table name %q: more than one '.'", name)
	}
	for _, p := range parts {
		if !isIdentifier(p) {
			return "", fmt.Errorf("postgres: invalid table name %q: want [schema.]name, each 1..63 of a-z, 0-9 and _, not starting with a digit", name)
		}
	}
	return pgx.Identifier(parts).Sanitize(), nil
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
