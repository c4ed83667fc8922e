package postgres_test

import (
	"context"
	"errors"
	"log"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/guard/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func ExampleGuard_Run() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	if err := postgres.CreateTable(ctx, pool); err != nil {
		log.Fatal(err)
	}
	g := postgres.NewGuard(pool)

	var token fence.Token = 42 // from the lock service, with the lease on "orders"
	err = g.Run(ctx, "orders", token, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE orders SET total = $1 WHERE id = $2`, 99, 7)
		return err
	})
	if errors.Is(err, fence.ErrFenced) {
		log.Print("a newer holder has the lock: stop writing")
	}
}

func ExampleGuard_Check() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	g := postgres.NewGuard(pool)

	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx) // after Commit, a no-op
	if err := g.Check(ctx, tx, "orders", 42); err != nil {
		log.Fatal(err) // *fence.FencedError if stale; the deferred Rollback undoes everything
	}
	if _, err := tx.Exec(ctx, `UPDATE orders SET total = $1 WHERE id = $2`, 99, 7); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err) // may or may not have committed, unless it is a *pgconn.PgError
	}
}
