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
	"github.com/fence-lock/fence/internal/tools/chaos/history"
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
	if r.backup == "" {
		backup := r.dataDir + ".backup"
		if err := copyDir(journal, backup); err != nil {
			os.RemoveAll(backup)
			r.cfg.Log.Error("restore: the backup failed; no backup taken", "error", err)
		} else {
			r.backup = backup
		}
		if err := r.server.start(); err != nil {
			r.harnessFailed(fmt.Errorf("restore: restarting the server: %w", err))
			return
		}
		r.restarted()
		r.readEveryKey()
		r.opsAtStart = r.acked()
		r.addFault(history.Fault{Kind: FaultRestore, Client: -1, Start: start, End: r.now(), Detail: "kill -9, back up the journal, restart, read every key"})
		return
	}
	// From here on the journal is touched: a step that fails ends the
	// run, since the checkers would take what it left for fence's doing.
	detail := "kill -9, restore the backup"
	if err := os.RemoveAll(journal); err != nil {
		r.harnessFailed(fmt.Errorf("restore: %w", err))
		return
	}
	if err := copyDir(r.backup, journal); err != nil {
		r.harnessFailed(fmt.Errorf("restore: %w", err))
		return
	}
	os.RemoveAll(r.backup)
	r.backup = ""
	if !r.cfg.UnsafeJournal {
		out, err := exec.Command(r.cfg.Binary, "bump", "--data", r.dataDir).CombinedOutput()
		if err != nil {
			r.harnessFailed(fmt.Errorf("restore: fence bump: %w: %s", err, out))
			return
		}
		detail += ", " + strings.TrimSpace(string(out))
	} else {
		detail += "; unsafe: no bump"
	}
	if err := r.server.start(); err != nil {
		r.harnessFailed(fmt.Errorf("restore: restarting the server: %w", err))
		return
	}
	r.restarted()
	if err := r.recordRestored(); err != nil {
		r.harnessFailed(err)
		return
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
	resources, keys := r.workloadKeys()
	for _, resource := range resources {
		for _, key := range keys {
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
// fence and its keys. A resource it cannot read fails the run: without its
// restore op, the checkers would take the restore for lost writes.
func (r *run) recordRestored() error {
	store, err := r.harnessAPI()
	if err != nil {
		return err
	}
	ctx := context.Background()
	resources, keys := r.workloadKeys()
	for _, resource := range resources {
		op := history.Op{ID: r.harnessID(), Client: -1, Kind: history.KindRestore, Resource: resource, Call: r.now()}
		fenced, err := store.Fence(ctx, resource)
		op.Token = uint64(fenced)
		for i := 0; i < len(keys) && err == nil; i++ {
			key := keys[i]
			var item fence.Item
			if item, err = store.Get(ctx, resource, key); errors.Is(err, fence.ErrNotFound) {
				err = nil
			}
			op.Writes = append(op.Writes, history.Write{Resource: resource, Key: key, Value: string(item.Value), Rev: uint64(item.Rev)})
		}
		if err != nil {
			return fmt.Errorf("restore: reading the restored state of %s: %w", resource, err)
		}
		op.Outcome, op.Return = history.OK, r.now()
		r.record(op)
	}
	return nil
}

// harnessFailed records an error of the harness's own: the run ends with
// it, not with the checkers' verdict.
func (r *run) harnessFailed(err error) {
	r.cfg.Log.Error("the harness failed", "error", err)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.harnessErr == nil {
		r.harnessErr = err
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

// workloadKeys returns the resources whose keys the workload writes (each
// semaphore's slots, with WorkloadSemaphore) and those keys (and each
// client's own, with WorkloadShared).
func (r *run) workloadKeys() (resources, keys []string) {
	for res := range r.cfg.Resources {
		name := "r" + strconv.Itoa(res)
		if r.cfg.Workload != WorkloadSemaphore {
			resources = append(resources, name)
			continue
		}
		for i := 1; i <= SemaphoreLimit; i++ {
			resources = append(resources, fence.SlotResource(name, i, SemaphoreLimit))
		}
	}
	for k := range r.cfg.Keys {
		keys = append(keys, r.keyPrefix+"k"+strconv.Itoa(k))
	}
	if r.cfg.Workload == WorkloadShared {
		for c := range r.cfg.Clients {
			keys = append(keys, SharedKey(r.keyPrefix, c))
		}
	}
	return resources, keys
}
