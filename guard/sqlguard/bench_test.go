package sqlguard_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/guard/sqlguard"
)

// BenchmarkWrite is one single-row upsert in a transaction, on each
// database: guarded (Run: begin, fence, upsert, commit) with a new token
// each time (each Run raises the fence) and with the same token each time
// (the same holder's writes: on MySQL the check then adds its locking read),
// next to the same upsert in a plain transaction (begin, upsert, commit).
func BenchmarkWrite(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			db := be.require(b)
			ns := be.namespace(b)
			ddl := `CREATE TABLE ` + ns + `.data (k text PRIMARY KEY, v bigint NOT NULL)`
			upsert := `INSERT INTO ` + ns + `.data (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v`
			if be.dialect == sqlguard.MySQL {
				ddl = `CREATE TABLE ` + ns + `.data (k varchar(64) PRIMARY KEY, v bigint NOT NULL) ENGINE=InnoDB`
				upsert = `INSERT INTO ` + ns + `.data (k, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v)`
			}
			if _, err := db.ExecContext(context.Background(), ddl); err != nil {
				b.Fatal(err)
			}
			g := sqlguard.New(db, be.dialect)
			g.Table = ns + ".fences"
			if err := g.CreateTable(context.Background()); err != nil {
				b.Fatal(err)
			}
			var token int64
			guarded := func(b *testing.B, raise bool) {
				for b.Loop() {
					if raise || token == 0 {
						token++
					}
					err := g.Run(b.Context(), "r", fence.Token(token), func(ctx context.Context, tx *sql.Tx) error {
						_, err := tx.ExecContext(ctx, upsert, "k", token)
						return err
					})
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.Run("guarded", func(b *testing.B) { guarded(b, true) })
			b.Run("guarded-same-token", func(b *testing.B) { guarded(b, false) })
			b.Run("bare", func(b *testing.B) {
				var n int64
				for b.Loop() {
					n++
					tx, err := db.BeginTx(b.Context(), nil)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := tx.ExecContext(b.Context(), upsert, "k", n); err != nil {
						tx.Rollback()
						b.Fatal(err)
					}
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
