// Package mysql is the fencing guard for MySQL and MariaDB (InnoDB), over
// database/sql with github.com/go-sql-driver/mysql: sqlguard's MySQL
// dialect under its own name. The Guard is sqlguard.Guard, and everything
// sqlguard's documentation says holds: the fence row is checked and raised
// inside the user's *sql.Tx with one INSERT ... ON DUPLICATE KEY UPDATE
// last_fence = GREATEST(last_fence, token), which takes the row's exclusive
// lock until the transaction ends and compares against its latest committed
// version (not a REPEATABLE READ snapshot); the check and the user's writes
// commit or roll back together. One more statement in the transaction, and a
// locking read (SELECT ... FOR UPDATE) of the fence when the first
// statement's rows affected do not prove acceptance (rejection, an equal
// token, a resource's first fence). Writes outside the guard's transactions,
// and autocommit statements, are not fenced.
//
//	db, err := sql.Open("mysql", "app:secret@tcp(127.0.0.1:3306)/app")
//	g := mysql.NewGuard(db)
//	err = g.CreateTable(ctx) // once: Schema
//	err = g.Run(ctx, "orders", lease.Token(), func(ctx context.Context, tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, `UPDATE orders SET total = ? WHERE id = ?`, total, id)
//		return err
//	})
//
// It registers no driver: import github.com/go-sql-driver/mysql for that.
package mysql

import (
	"database/sql"

	"github.com/fence-lock/fence/sqlguard"
)

// Guard is sqlguard.Guard: Run, Check, Claim, Fence and CreateTable, with
// the Table, Keys and Rejections fields.
type Guard = sqlguard.Guard

// DefaultTable is the fence table's name unless Guard.Table says otherwise.
const DefaultTable = sqlguard.DefaultTable

// Schema is the DDL of the fence table DefaultTable, which CreateTable runs:
// sqlguard.MySQL.Schema(). The resource is binary (no collation folds case
// or trailing spaces); InnoDB, for the row locks. Never delete a row: that
// would reset the resource's fence.
const Schema = "CREATE TABLE IF NOT EXISTS `fence_fences` (resource varbinary(512) NOT NULL PRIMARY KEY, last_fence bigint NOT NULL, CHECK (last_fence > 0)) ENGINE=InnoDB"

// NewGuard returns a Guard over db, a MySQL or MariaDB database, with the
// fence table DefaultTable: sqlguard.New(db, sqlguard.MySQL).
func NewGuard(db *sql.DB) *Guard {
	return sqlguard.New(db, sqlguard.MySQL)
}
