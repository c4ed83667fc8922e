package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fence-lock/fence/engine/bolt"
	"github.com/fence-lock/fence/engine/journal"
)

// JournalDir is the directory of the embedded store inside a data directory.
const JournalDir = "journal"

// OpenEmbedded opens the embedded store in the data directory dir: the
// journal in dir/journal. The first time, a store of an older fence (the
// bbolt file dir/fence.db) is imported into it (journal.Import: all or
// nothing) and then renamed fence.db.imported, so that nothing reads it
// again. It fails if another process has the directory open.
func OpenEmbedded(dir string) (*journal.DB, error) {
	return OpenEmbeddedOptions(dir, journal.Options{})
}

// OpenEmbeddedOptions is OpenEmbedded with the journal's options.
func OpenEmbeddedOptions(dir string, opts journal.Options) (*journal.DB, error) {
	jdir := filepath.Join(dir, JournalDir)
	old := filepath.Join(dir, bolt.FileName)
	if _, err := os.Stat(jdir); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(old); err == nil {
			b, err := bolt.Open(dir) // holds the old store's lock while importing
			if err != nil {
				return nil, fmt.Errorf("server: %w", err)
			}
			err = journal.Import(jdir, b.Export)
			if cerr := b.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, fmt.Errorf("server: importing %s: %w", old, err)
			}
		}
	}
	db, err := journal.OpenOptions(jdir, opts)
	if errors.Is(err, journal.ErrCorrupt) {
		return nil, fmt.Errorf("server: %w\n"+
			"fence does not serve from a damaged journal: what follows the damage would be lost, and tokens issued again. "+
			"Restore the data directory from a backup, then run fence bump --data %s before serving it "+
			"(see \"A damaged journal\" in docs/operations/backup-and-restore.md)", err, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if _, err := os.Stat(old); err == nil {
		// Imported (now or by a start that stopped before this rename).
		if err := os.Rename(old, old+".imported"); err != nil {
			db.Close()
			return nil, fmt.Errorf("server: %w", err)
		}
	}
	return db, nil
}
