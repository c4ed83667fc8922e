package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/internal/chaos/history"
)

// restore is the backup-and-restore fault of the embedded server, in two
// turns. The first backs the store up: it kills the server (what a
// file-system snapshot of a running server holds), copies the journal,
// starts the server again and reads every key, so that the history says
// what the backup holds. The next restores that backup: it kills the
// server, puts the backup's journal in place, runs fence bump on it, as
// the operator's guide says, starts the server and records each
// resource's restored state (history.KindRestore). What was acknowledged
// between the two turns is lost by design; the checkers hold the restore to
// the backup, and everything after it to the restored state, with tokens
// above every one issued before. The clients are stopped (SIGSTOP) during
// a turn, so that the reads see one state. With UnsafeJournal there is no
// bump: the checkers must find tokens issued twice.
func (r *run) restore(ctx context.Context) {
	r.waitAcked(ctx, r.opsAtStart)
	for _, c := range r.clients {
		c.Process.Signal(syscall.SIGSTOP)
	}
	defer func() {
		for _, c := range r.clients {
			c.Process.Signal(syscall.SIGCONT)
		}
	}()
	start := r.now()
	r.server.kill()
	journal := filepath.Join(r.dataDir, journalDir)
	var detail string
	var err error
	if r.backup == "" {
		r.backup = r.dataDir + ".backup"
		detail = "kill -9, back up the journal, restart, read every key"
		err = copyDir(journal, r.backup)
	} else {
		detail = "kill -9, restore the backup"
		err = errors.Join(os.RemoveAll(journal), copyDir(r.backup, journal), os.RemoveAll(r.backup))
		r.backup = ""
		if err == nil && !r.cfg.UnsafeJournal {
			var out []byte
			out, err = exec.Command(r.cfg.Binary, "bump", "--data", r.dataDir).CombinedOutput()
			detail += ", " + strings.TrimSpace(string(out))
			if err != nil {
				err = fmt.Errorf("fence bump: %w: %s", err, out)
			}
		} else if err == nil {
			detail += "; unsafe: no bump"
		}
	}
	if err != nil {
		r.cfg.Log.Error("restore", "error", err)
	}
	if err := r.server.start(); err != nil {
		r.cfg.Log.Error("restore: restarting the server failed", "error", err)
		return
	}
	r.restarted()
	if strings.HasPrefix(detail, "kill -9, back up") {
		r.readEveryKey()
	} else {
		r.recordRestored()
	}
	r.opsAtStart = r.acked()
	r.addFault(history.Fault{Kind: FaultRestore, Client: -1, Start: start, End: r.now(), Detail: detail})
}

// harnessAPI is a client of the storage for the harness's own reads.
func (r *run) harnessAPI() (*client.API, error) {
	store, err := client.NewAPI(r.storeURL)
	if err != nil {
		return nil, err
	}
	store.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	if r.cfg.TLS != nil {
		store.HTTPClient.Transport = &http.Transport{TLSClientConfig: r.cfg.TLS.Clone()}
	}
	store.AuthToken = r.cfg.AuthToken
	return store, nil
}

// readEveryKey reads every key of the workload directly from the storage,
// as client -1: the final reads, and what a backup holds.
func (r *run) readEveryKey() {
	store, err := r.harnessAPI()
	if err != nil {
		return
	}
	for res := range r.cfg.Resources {
		for k := range r.cfg.Keys {
			resource, key := "r"+strconv.Itoa(res), r.keyPrefix+"k"+strconv.Itoa(k)
			op := history.Op{ID: r.harnessID(), Client: -1, Kind: history.KindRead, Resource: resource, Key: key, Call: r.now()}
			item, err := store.Get(context.Background(), resource, key)
			if errors.Is(err, fence.ErrNotFound) {
				err = nil
			}
			op.Value, op.Rev = string(item.Value), uint64(item.Rev)
			op.Outcome = outcome(err)
			if op.Outcome != history.Unknown {
				op.Return = r.now()
			}
			r.record(op)
		}
	}
}

// recordRestored records each resource's state after a restore: its
// fence and its keys.
func (r *run) recordRestored() {
	store, err := r.harnessAPI()
	if err != nil {
		return
	}
	ctx := context.Background()
	for res := range r.cfg.Resources {
		resource := "r" + strconv.Itoa(res)
		op := history.Op{ID: r.harnessID(), Client: -1, Kind: history.KindRestore, Resource: resource, Call: r.now()}
		fenced, err := store.Fence(ctx, resource)
		op.Token = uint64(fenced)
		for k := 0; k < r.cfg.Keys && err == nil; k++ {
			key := r.keyPrefix + "k" + strconv.Itoa(k)
			var item fence.Item
			if item, err = store.Get(ctx, resource, key); errors.Is(err, fence.ErrNotFound) {
				err = nil
			}
			op.Writes = append(op.Writes, history.Write{Resource: resource, Key: key, Value: string(item.Value), Rev: uint64(item.Rev)})
		}
		if err != nil {
			// Not recorded: the checkers would take the state for lost.
			r.cfg.Log.Error("restore: reading the restored state failed", "resource", resource, "error", err)
			continue
		}
		op.Outcome, op.Return = history.OK, r.now()
		r.record(op)
	}
}

// harnessID returns a new ID for an op of the harness's own (clients'
// IDs start at 1<<32).
func (r *run) harnessID() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.harnessIDs++
	return r.harnessIDs
}

// copyDir copies the regular files of src into a new directory dst.
func copyDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if err := copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return errors.Join(out.Sync(), out.Close())
}
