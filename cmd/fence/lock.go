package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
)

const lockExamples = `  fence lock nightly-report -- ./make-report.sh --full
  fence lock orders --ttl 30s --wait 1m -- sh -c 'fence put orders total "$(compute)"'
  # crontab: one run at a time across all machines, each write fenced
  */5 * * * * fence lock --addr http://fence:7700 billing -- /usr/local/bin/bill
`

// lockCmd runs a command under a lock: it acquires RESOURCE, runs the
// command in its own process group with FENCE_TOKEN, FENCE_RESOURCE,
// FENCE_HOLDER and FENCE_ADDR (and FENCE_SEQUENCER if the server signs its
// grants) in its environment, keeps the lease alive, and
// releases it when the command exits, with the command's exit code. If the
// lease is lost, the command's process group gets SIGTERM at once and SIGKILL
// after --kill-grace, and fence exits with exitLeaseLost.
func lockCmd(ctx context.Context, args []string, std stdio) error {
	var (
		cfg       clientConfig
		ttl, wait time.Duration
		killGrace time.Duration
		holder    string
	)
	fs := newFlagSet("lock", "fence lock RESOURCE [--ttl 10s] [--wait D] [--holder ID] [--kill-grace 5s] -- CMD [ARGS...]", lockExamples, std.err)
	fs.StringVar(&cfg.Addr, "addr", DefaultAddr, "base `URL` of the fence server, or of a cluster's servers separated by commas (the lease fails over between them)")
	addAuthTokenFlag(fs, &cfg)
	addTLSClientFlags(fs, &cfg)
	fs.DurationVar(&ttl, "ttl", fence.DefaultTTL, "lease time to live; renewed about every ttl/3")
	fs.DurationVar(&wait, "wait", 0, "how long to wait if another holder has the lock (exit 3 after)")
	fs.StringVar(&holder, "holder", "", "holder `id` (default: a new random id)")
	fs.DurationVar(&killGrace, "kill-grace", 5*time.Second, "time between SIGTERM and SIGKILL when the lease is lost")
	positional, command, dashdash, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(positional) != 1:
		return wantArgs("lock", positional, "RESOURCE")
	case !dashdash || len(command) == 0:
		return &usageError{errors.New("lock: put '--' and the command to run after RESOURCE and the flags")}
	case killGrace < 0:
		return &usageError{fmt.Errorf("lock: --kill-grace must not be negative, not %s", killGrace)}
	}
	resource := positional[0]
	c, err := client.New(cfg.Addr, client.WithAuthToken(cfg.AuthToken))
	if err != nil {
		return &usageError{err}
	}
	hc, err := cfg.httpClient()
	if err != nil {
		return &usageError{fmt.Errorf("lock: %w", err)}
	}
	if hc != nil {
		c.API().HTTPClient = hc
	}
	// Signals from now on are the command's: forward them rather than stop.
	sigC := make(chan os.Signal, 8)
	signal.Notify(sigC, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigC)
	opts := []fence.SessionOption{fence.WithTTL(ttl), fence.WithWait(wait)}
	if holder != "" {
		opts = append(opts, fence.WithHolder(holder))
	}
	lease, err := c.Acquire(ctx, resource, opts...)
	if err != nil {
		return apiError(err)
	}
	release := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := lease.Release(rctx); err != nil {
			fmt.Fprintf(std.err, "fence: lock %s: release: %v (the lease will expire by its TTL)\n", resource, err)
		}
	}

	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = std.in, std.out, std.err
	cmd.Env = append(os.Environ(),
		"FENCE_TOKEN="+lease.Token().String(),
		"FENCE_RESOURCE="+resource,
		"FENCE_HOLDER="+lease.Holder(),
		"FENCE_ADDR="+cfg.Addr,
	)
	// The command's own fence calls reach the same server the same way.
	for name, v := range map[string]string{"FENCE_CACERT": cfg.CACert, "FENCE_CLIENT_CERT": cfg.ClientCert, "FENCE_CLIENT_KEY": cfg.ClientKey} {
		if v != "" {
			cmd.Env = append(cmd.Env, name+"="+v)
		}
	}
	if seq := lease.Sequencer(); seq != "" {
		cmd.Env = append(cmd.Env, "FENCE_SEQUENCER="+seq)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		release()
		return fmt.Errorf("lock: starting %s: %w", command[0], err)
	}
	group := cmd.Process.Pid // Setpgid: the group's id is the child's pid
	exitC := make(chan error, 1)
	go func() { exitC <- cmd.Wait() }()

	for {
		select {
		case err := <-exitC:
			release()
			return commandExit(err)
		case sig := <-sigC:
			syscall.Kill(-group, sig.(syscall.Signal))
		case <-lease.Done():
			fmt.Fprintf(std.err, "fence: lock %s: lease %d lost (%v); stopping the command\n", resource, lease.Token(), lease.Err())
			stopGroup(group, exitC, killGrace)
			return &exitError{code: exitLeaseLost}
		}
	}
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
