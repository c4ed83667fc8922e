package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
)

const lockSynopsis = `fence lock RESOURCE [RESOURCE...] [--ttl 10s] [--wait D] [--holder ID] [--limit N | --shared | --handover] [--kill-grace 5s] [--conflict-exit-code 3] [--quiet] -- CMD [ARGS...]

Acquires the lock on RESOURCE and runs CMD in its own process group, with
FENCE_TOKEN, FENCE_RESOURCE, FENCE_HOLDER and FENCE_ADDR in its environment
(and FENCE_SEQUENCER if the server signs its grants, FENCE_AUTH_TOKEN,
FENCE_CACERT, FENCE_CLIENT_CERT and FENCE_CLIENT_KEY when they are set), so
that fence commands inside CMD reach the same server the same way and write
with the lock's token. FENCE_TOKEN stands for --token only for FENCE_RESOURCE:
a fence command inside CMD that writes another resource needs its own --token.

fence lock keeps the lease alive, forwards signals to CMD, releases the lock
when CMD exits and exits with CMD's exit code (128+N if signal N killed it).
If the lease is lost, CMD's process group gets SIGTERM at once and SIGKILL
after --kill-grace, and fence lock exits 4. If fence lock itself dies (kill -9,
the OOM killer), CMD and every process it started are killed too: on Linux a
small supervisor process (fence __supervise) stands between them for that.

With --handover, a SIGTERM first hands the lease to the next waiter (another
fence lock on RESOURCE, say the next instance of a rolling restart) in one
change, and then reaches CMD: the successor starts at once, with a greater
token, while CMD shuts down, and what CMD still writes is fenced, so there is
no instant without a holder and none with two writing with the token. CMD
then has --kill-grace to exit before its process group gets SIGKILL. If
nobody waits, the SIGTERM reaches CMD as without --handover, and the lock is
released when CMD exits.

With --limit N, RESOURCE is a semaphore: fence lock holds one of its N
permits, so that at most N commands run at once (waiters are served first
come, first served). Each permit is a lease on its own slot resource,
RESOURCE/permit-I-of-N, which FENCE_RESOURCE names and FENCE_TOKEN fences: a
command that paused past its TTL is fenced while the other permits' commands
write on. Every fence lock on RESOURCE must give the same N while any permit
is held; another N is refused.

With --shared, fence lock holds RESOURCE shared (a read lock): any number
of fence lock --shared run at once, and none beside a fence lock without
it. They share one FENCE_TOKEN, which the next exclusive holder's token is
above: what they still write after it is fenced. A fence lock waiting for
RESOURCE exclusively stops new --shared ones, so that readers never starve
a writer.

With several RESOURCEs, fence lock takes all of their locks at once, in one
change, or none: CMD gets FENCE_TOKENS="R1=T1 R2=T2 ..." (in the order given)
instead of FENCE_RESOURCE and FENCE_TOKEN, and waiting for them never
deadlocks with another fence lock waiting for some of the same. The names
must not contain spaces. Losing any of the leases stops CMD.

If a caller asks the holder to let go (fence revoke --grace D), CMD's
process group gets SIGTERM as soon as fence lock learns of it (within about
a third of --ttl): CMD then has until the deadline to finish and exit,
after which the server revokes the lease and CMD is stopped as above.

If another holder has the lock for all of --wait, fence lock exits with
--conflict-exit-code (default 3) and says so on stderr, unless --quiet: from
cron, --quiet makes a run that found the lock taken send no mail.`

const lockExamples = `  fence lock nightly-report -- ./make-report.sh --full
  fence lock orders --ttl 30s --wait 1m -- sh -c 'fence put orders total "$(compute)"'
  # crontab: one run at a time across all machines, each write fenced; a run
  # that finds the lock taken exits 0 and prints nothing
  */5 * * * * fence lock --addr fence:7700 --quiet --conflict-exit-code 0 billing -- /usr/local/bin/bill
  # at most 4 encoders at once across the fleet, each one's writes fenced on its own
  fence lock encoders --limit 4 --wait 10m -- sh -c 'fence put "$FENCE_RESOURCE" job "$JOB"'
  # many readers at once, no writer beside them
  fence lock catalog --shared --wait 1m -- ./export-catalog.sh
  # both ledgers at once, or neither
  fence lock ledger-eu ledger-us --wait 30s -- ./reconcile.sh
  # one active worker; a rolling restart hands over with no gap
  fence lock scheduler --wait 5m --handover -- ./scheduler
`

// lockCmd runs a command under a lock: it acquires RESOURCE, runs the
// command in its own process group with FENCE_TOKEN, FENCE_RESOURCE,
// FENCE_HOLDER and FENCE_ADDR (and FENCE_SEQUENCER if the server signs its
// grants, and the client's credentials and TLS files) in its environment,
// keeps the lease alive, and releases it when the command exits, with the
// command's exit code. If the lease is lost, the command's process group
// gets SIGTERM at once and SIGKILL after --kill-grace, and fence exits with
// exitLeaseLost.
func lockCmd(ctx context.Context, args []string, std stdio) error {
	var (
		cfg          clientConfig
		ttl, wait    time.Duration
		killGrace    time.Duration
		holder       string
		conflictCode int
		quiet        bool
		handover     bool
		shared       bool
		limit        int
	)
	fs := newFlagSet("lock", lockSynopsis, lockExamples, std.out)
	fs.StringVar(&cfg.Addr, "addr", DefaultAddr, "base `URL` of the fence server (host:port means http://host:port), or of a cluster's servers separated by commas (the lease fails over between them)")
	addAuthTokenFlag(fs, &cfg)
	addTLSClientFlags(fs, &cfg)
	fs.DurationVar(&ttl, "ttl", fence.DefaultTTL, "lease time to live; renewed about every ttl/3")
	fs.DurationVar(&wait, "wait", 0, "how long to wait if another holder has the lock (then exit with --conflict-exit-code)")
	fs.StringVar(&holder, "holder", "", "holder `id` (default: a new random id)")
	fs.DurationVar(&killGrace, "kill-grace", 5*time.Second, "time between SIGTERM and SIGKILL when the lease is lost or handed over")
	fs.IntVar(&conflictCode, "conflict-exit-code", exitNotHeld, "exit `code` (0-255) when another holder has the lock for all of --wait")
	fs.BoolVar(&quiet, "quiet", false, "print nothing when another holder has the lock (cron mails what a job prints)")
	fs.BoolVar(&handover, "handover", false, "on SIGTERM, hand the lease to the next waiter before the command gets the signal")
	fs.BoolVar(&shared, "shared", false, "hold RESOURCE shared (a read lock), beside other --shared holders and no exclusive one")
	fs.IntVar(&limit, "limit", 0, fmt.Sprintf("hold one of `N` (1-%d) permits of the semaphore RESOURCE rather than its lock (0: the lock)", fence.MaxPermits))
	positional, command, dashdash, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(positional) == 0:
		return wantArgs("lock", positional, "RESOURCE")
	case len(positional) > fence.MaxMultiAcquire:
		return &usageError{fmt.Errorf("lock: %d resources: at most %d at once", len(positional), fence.MaxMultiAcquire)}
	case len(positional) > 1 && (limit > 0 || handover || shared):
		return &usageError{errors.New("lock: --limit, --shared and --handover take one RESOURCE")}
	case !dashdash || len(command) == 0:
		return &usageError{errors.New("lock: put '--' and the command to run after RESOURCE and the flags")}
	case killGrace < 0:
		return &usageError{fmt.Errorf("lock: --kill-grace must not be negative, not %s", killGrace)}
	case conflictCode < 0 || conflictCode > 255:
		return &usageError{fmt.Errorf("lock: --conflict-exit-code %d: want 0 to 255", conflictCode)}
	case limit < 0 || limit > fence.MaxPermits:
		return &usageError{fmt.Errorf("lock: --limit %d: want 1 to %d (0, the default: the lock)", limit, fence.MaxPermits)}
	case limit > 0 && handover:
		return &usageError{errors.New("lock: --handover hands over a lock, not a permit: drop --limit or --handover")}
	case shared && (limit > 0 || handover):
		return &usageError{errors.New("lock: --shared takes neither --limit (permits are exclusive) nor --handover (a shared hold is not handed over)")}
	}
	for _, r := range positional {
		if len(positional) > 1 && strings.ContainsFunc(r, unicode.IsSpace) {
			return &usageError{fmt.Errorf("lock: resource %q contains a space, which FENCE_TOKENS cannot tell apart: take it alone", r)}
		}
	}
	resource := strings.Join(positional, " ")
	if cfg.Addr, err = cleanAddr(cfg.Addr); err != nil {
		return err
	}
	// Find the command before taking the lock: a typo must not take it.
	path, err := exec.LookPath(command[0])
	if err != nil {
		var ee *exec.Error
		if errors.As(err, &ee) {
			err = ee.Err
		}
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("lock: cannot run %q: %w", command[0], err)
	}
	// One lease per process: a session of its own would only double the
	// server's records.
	c, err := client.New(cfg.Addr, client.WithAuthToken(cfg.AuthToken), client.WithoutSession())
	if err != nil {
		return addrError(err)
	}
	hc, err := cfg.httpClient()
	if err != nil {
		return &usageError{fmt.Errorf("lock: %w", err)}
	}
	if hc != nil {
		c.API().HTTPClient = hc
	}
	env, err := lockEnv(&cfg)
	if err != nil {
		return &usageError{fmt.Errorf("lock: %w", err)}
	}
	// Signals from now on are the command's: forward them rather than stop.
	sigC := make(chan os.Signal, 8)
	signal.Notify(sigC, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigC)
	opts := []fence.SessionOption{fence.WithTTL(ttl), fence.WithWait(wait)}
	if holder != "" {
		opts = append(opts, fence.WithHolder(holder))
	}
	if limit > 0 {
		opts = append(opts, fence.WithLimit(limit))
	}
	if shared {
		opts = append(opts, fence.WithShared())
	}
	var leases heldLeases
	if len(positional) == 1 {
		var l *client.Lease
		if l, err = c.Acquire(ctx, resource, opts...); err == nil {
			leases = heldLeases{l}
		}
	} else {
		leases, err = c.AcquireAll(ctx, positional, opts...)
	}
	if err != nil {
		if !errors.Is(err, fence.ErrLockHeld) {
			return apiError(err)
		}
		if quiet {
			return &exitError{code: conflictCode}
		}
		msg := "lock: " + describe(err)
		if wait > 0 {
			msg += fmt.Sprintf("; waited %s", wait)
		}
		return &exitError{code: conflictCode, err: &userError{msg, err}}
	}
	release := func() { leases.release(ctx, std) }
	lease := leases[0]
	if len(leases) == 1 {
		// From here on, RESOURCE is what the lease holds: a permit's slot.
		resource = lease.Resource()
		env = append(env, "FENCE_TOKEN="+lease.Token().String(), "FENCE_RESOURCE="+resource)
		if seq := lease.Sequencer(); seq != "" {
			env = append(env, "FENCE_SEQUENCER="+seq)
		}
	} else {
		env = append(env, "FENCE_TOKENS="+leases.tokens())
	}
	env = append(env, "FENCE_HOLDER="+lease.Holder())
	child, err := startCommand(path, command, env, std)
	if err != nil {
		release()
		return fmt.Errorf("lock: cannot run %q: %w", command[0], err)
	}
	leaseDone, revokeC := leases.done(), leases.revokeRequested()
	var killC <-chan time.Time // after a hand-over: --kill-grace for the command to stop
	for {
		select {
		case <-revokeC:
			revokeC = nil
			asked := leases.asked()
			fmt.Fprintf(std.err, "fence: lock %s: asked to let go by %s; stopping the command\n", asked.Resource(), asked.RevokeAt().UTC().Format(time.RFC3339Nano))
			syscall.Kill(-child.group, syscall.SIGTERM)
		case err := <-child.done:
			if leaseDone != nil {
				release()
			}
			return commandExit(err)
		case sig := <-sigC:
			if handover && sig == syscall.SIGTERM && leaseDone != nil && handOver(ctx, lease, resource, std) {
				leaseDone = nil // the successor's now: nothing left to keep or release
				t := time.NewTimer(killGrace)
				defer t.Stop()
				killC = t.C
			}
			syscall.Kill(-child.group, sig.(syscall.Signal))
		case <-killC:
			fmt.Fprintf(std.err, "fence: lock %s: the command did not stop within --kill-grace of the hand-over; killing it\n", resource)
			syscall.Kill(-child.group, syscall.SIGKILL)
			killC = nil
		case <-leaseDone:
			lost := leases.lost()
			fmt.Fprintf(std.err, "fence: lock %s: %s; stopping the command\n", lost.Resource(), lostMessage(lost.Token(), lost.Err()))
			stopGroup(child.group, child.done, killGrace)
			release() // the others, of a multi-acquire
			return &exitError{code: exitLeaseLost}
		}
	}
}

// handOver hands lease to the next waiter and reports whether it did. With
// nobody waiting the lease stays held and renewed; after a transfer of
// unknown outcome it is no longer renewed. Either way it says so on stderr.
func handOver(ctx context.Context, lease *client.Lease, resource string, std stdio) bool {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	next, err := lease.Transfer(tctx, "")
	switch {
	case errors.Is(err, fence.ErrNotFound):
		fmt.Fprintf(std.err, "fence: lock %s: no hand-over: nobody waits; the lock is released when the command exits\n", resource)
		return false
	case err != nil:
		// The lease may have passed on, and is no longer renewed: it ends
		// by its TTL, or at the release when the command exits.
		fmt.Fprintf(std.err, "fence: lock %s: the hand-over's outcome is unknown (%s); the lease is no longer renewed\n", resource, describe(err))
		return false
	}
	fmt.Fprintf(std.err, "fence: lock %s: handed over to %q (token %d); stopping the command\n", resource, next.Holder, next.Token)
	return true
}

// heldLeases are the leases fence lock holds for its command: one, or
// those of a multi-acquire.
type heldLeases []*client.Lease

// release releases every lease not lost already, saying on stderr which
// failed.
func (ls heldLeases) release(ctx context.Context, std stdio) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, l := range ls {
		if l.Err() != nil {
			continue
		}
		if err := l.Release(rctx); err != nil {
			fmt.Fprintf(std.err, "fence: lock %s: the release failed (the lease will expire by its TTL): %s\n", l.Resource(), describe(err))
		}
	}
}

// done returns a channel closed when the first of the leases ends.
func (ls heldLeases) done() <-chan struct{} {
	if len(ls) == 1 {
		return ls[0].Done()
	}
	done := make(chan struct{})
	var once sync.Once
	for _, l := range ls {
		context.AfterFunc(l.Context(), func() { once.Do(func() { close(done) }) })
	}
	return done
}

// revokeRequested returns a channel closed when the first of the leases
// is asked to let go (fence revoke --grace).
func (ls heldLeases) revokeRequested() <-chan struct{} {
	if len(ls) == 1 {
		return ls[0].RevokeRequested()
	}
	asked := make(chan struct{})
	var once sync.Once
	for _, l := range ls {
		go func() {
			select {
			case <-l.RevokeRequested():
				once.Do(func() { close(asked) })
			case <-l.Done():
			}
		}()
	}
	return asked
}

// asked returns the first lease asked to let go.
func (ls heldLeases) asked() *client.Lease {
	for _, l := range ls {
		if !l.RevokeAt().IsZero() {
			return l
		}
	}
	return ls[0]
}

// lost returns the first lease that has ended.
func (ls heldLeases) lost() *client.Lease {
	for _, l := range ls {
		if l.Err() != nil {
			return l
		}
	}
	return ls[0]
}

// tokens is FENCE_TOKENS: "R1=T1 R2=T2 ...".
func (ls heldLeases) tokens() string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.Resource() + "=" + l.Token().String()
	}
	return strings.Join(parts, " ")
}

// lockEnv returns the environment of fence lock's command, but for the
// lease's own variables: fence's, with FENCE_ADDR, and the credentials and
// TLS files that fence lock was given, so that the fence commands inside
// reach the same servers the same way. The files are made absolute: the
// command may change directory.
func lockEnv(cfg *clientConfig) ([]string, error) {
	env := append(os.Environ(), "FENCE_ADDR="+cfg.Addr)
	if cfg.AuthToken != "" {
		env = append(env, "FENCE_AUTH_TOKEN="+cfg.AuthToken)
	}
	for _, f := range []struct{ name, file string }{
		{"FENCE_CACERT", cfg.CACert}, {"FENCE_CLIENT_CERT", cfg.ClientCert}, {"FENCE_CLIENT_KEY", cfg.ClientKey},
	} {
		if f.file == "" {
			continue
		}
		abs, err := filepath.Abs(f.file)
		if err != nil {
			return nil, err
		}
		env = append(env, f.name+"="+abs)
	}
	return env, nil
}

// superviseHelp is the help of the hidden command __supervise.
const superviseHelp = `Usage: fence __supervise --parent PID PATH -- ARGV...

Internal: fence lock starts it to run its command, so that the command and
every process it starts are killed when fence lock dies, even by SIGKILL
(on Linux). It is not meant to be run by hand.
`

// lostMessage says why the lease with token was lost.
func lostMessage(token fence.Token, err error) string {
	if errors.Is(err, fence.ErrLeaseLost) {
		return describe(err)
	}
	return fmt.Sprintf("lease %d lost: %s", token, describe(err))
}

// child is the command that fence lock runs.
type child struct {
	group int          // the command's process group: signals go there
	done  <-chan error // receives the command's end, as exec.Cmd.Wait returns it
}

// stopGroup sends SIGTERM to the process group, and SIGKILL if the command
// has not exited after grace; it returns when the command has exited.
func stopGroup(group int, exitC <-chan error, grace time.Duration) {
	syscall.Kill(-group, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-exitC:
	case <-t.C:
		syscall.Kill(-group, syscall.SIGKILL)
		<-exitC
	}
	syscall.Kill(-group, syscall.SIGKILL) // whatever the command left running in its group
}

// commandExit turns the command's end into fence's exit: its exit code, or
// 128+N if signal N killed it.
func commandExit(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return &exitError{code: exitSignal + int(ws.Signal())}
		}
		return &exitError{code: ee.ExitCode()}
	}
	return fmt.Errorf("lock: %w", err)
}
