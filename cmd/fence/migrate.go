package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fence-lock/fence/internal/admin"
	"github.com/fence-lock/fence/server"
)

const migrateExamples = `  fence migrate --from /var/lib/fence --to etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379/fence
  fence migrate --from ./fence-data --to 'postgres://fence@db1,db2/fence?target_session_attrs=read-write'
`

// migrateCmd copies an embedded store into an empty shared one.
func migrateCmd(ctx context.Context, args []string, std stdio) error {
	var (
		from, to string
		wait     time.Duration
	)
	fs := newFlagSet("migrate", "fence migrate --from DIR --to URL [--wait D]\n\n"+
		"Copies the embedded store in DIR (stop its fence serve first) into the empty shared\n"+
		"store at URL (as fence serve --store takes it): every resource's last token, fence,\n"+
		"lease and lock-delay, every value with its revision and token, and the store\n"+
		"revision, so that tokens and revisions only go up from there. Run it while no fence\n"+
		"server serves the shared store; then start the servers with --store URL.", migrateExamples, std.out)
	fs.StringVar(&from, "from", "", "`directory` of the embedded store to copy (fence serve --data)")
	fs.StringVar(&to, "to", "", "`URL` of the empty shared store (fence serve --store)")
	fs.DurationVar(&wait, "wait", 10*time.Second, "how long to wait for the shared store's leadership (a running server keeps it)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if from == "" || to == "" {
		return &usageError{errors.New("migrate: --from DIR and --to URL are required")}
	}
	if server.EngineName(to) == "" {
		return &usageError{fmt.Errorf("migrate: --to %q: want etcd://, etcds:// or postgres://", redactStore(to))}
	}
	src, err := server.OpenEmbedded(from)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer src.Close()
	dst, release, err := server.Take(ctx, to, wait)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	n, err := admin.Migrate(ctx, src, dst)
	err = errors.Join(err, release())
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	fmt.Fprintf(std.out, "migrated %d resources (%d leases), %d values, revision %d, from %s to %s\n",
		n.Resources, n.Leases, n.Entries, n.Rev, from, redactStore(to))
	return nil
}

const bumpExamples = `  fence bump --store etcd://10.0.0.1:2379/fence --by 1000000
  fence bump --data /var/lib/fence --by 1000000
`

// bumpCmd raises every token and the revision of a restored store.
func bumpCmd(ctx context.Context, args []string, std stdio) error {
	var (
		store, data string
		by          uint64
		wait        time.Duration
	)
	fs := newFlagSet("bump", "fence bump (--store URL | --data DIR) [--by N]\n\n"+
		"After a store is restored from a backup, tokens issued after the backup was taken\n"+
		"are unknown to it: a new grant could hand one out again, and a stale holder's write\n"+
		"could pass. bump sets the store's token floor N above the highest token it knows\n"+
		"of: every resource, recorded in the backup or created after it, then has its last\n"+
		"token and its fence at the floor at least (every lease ends: its holder is fenced),\n"+
		"and the store revision is raised by N. N must exceed the grants of any one resource,\n"+
		"and the writes, made after the backup. Run it before any fence server serves the\n"+
		"restored store, and stop every server that ran before the restore.", bumpExamples, std.out)
	fs.StringVar(&store, "store", "", "`URL` of a restored shared store (fence serve --store)")
	fs.StringVar(&data, "data", "", "`directory` of a restored embedded store (fence serve --data)")
	fs.Uint64Var(&by, "by", 1_000_000_000, "how far above the highest known token to set the floor, and how much to raise the revision")
	fs.DurationVar(&wait, "wait", 10*time.Second, "with --store: how long to wait for the store's leadership")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if (store == "") == (data == "") {
		return &usageError{errors.New("bump: give one of --store URL and --data DIR")}
	}
	var (
		db      admin.DB
		release func() error
		where   string
	)
	if data != "" {
		b, err := server.OpenEmbedded(data)
		if err != nil {
			return fmt.Errorf("bump: %w", err)
		}
		db, release, where = b, b.Close, data
	} else {
		d, r, err := server.Take(ctx, store, wait)
		if err != nil {
			return fmt.Errorf("bump: %w", err)
		}
		db, release, where = d, r, redactStore(store)
	}
	floor, n, err := admin.Bump(ctx, db, by)
	err = errors.Join(err, release())
	if err != nil {
		return fmt.Errorf("bump: %w", err)
	}
	fmt.Fprintf(std.out, "raised the token floor to %d, above every token of the %d resources recorded and of any other, and the revision by %d in %s\n", floor, n, by, where)
	return nil
}
