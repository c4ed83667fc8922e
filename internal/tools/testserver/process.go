package testserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNotInstalled means a server's binaries are not installed (or cannot run
// here): the error wrapping it says what to install. Require skips a test on
// it.
var ErrNotInstalled = errors.New("testserver: server not installed")

// ErrNotRunning means the server process is not running: it was killed, or it
// exited.
var ErrNotRunning = errors.New("testserver: server not running")

// errClosed means Start was called after Close.
var errClosed = errors.New("closed")

// startTimeout bounds how long a server may take to start and answer.
const startTimeout = 60 * time.Second

// The spawner is the one goroutine that starts every child. A child's
// parent-death signal (Pdeathsig) fires when the OS thread that forked it
// exits, not when the process does, and the Go runtime may end threads; this
// goroutine locks its thread and never returns, so the thread lives as long as
// the process and the signal fires only when the process dies.
var (
	spawnOnce sync.Once
	spawnC    chan spawnReq
)

type spawnReq struct {
	cmd  *exec.Cmd
	errC chan error
}

func spawner(reqC <-chan spawnReq) {
	runtime.LockOSThread() // never unlocked: see spawnC
	for r := range reqC {
		r.errC <- r.cmd.Start()
	}
}

// process is a started child.
type process struct {
	cmd   *exec.Cmd
	pid   int
	doneC chan struct{} // closed when the child has exited and been reaped
	err   error         // cmd.Wait's result, set before doneC is closed
}

// StartChild starts cmd (setting its SysProcAttr) in a process group of
// its own, so that a terminal's ^C reaches only this process, and, on
// Linux, so that it is killed when this process dies, however it dies (kill
// -9 included). fence chaos starts its servers and clients with it.
func StartChild(cmd *exec.Cmd) error {
	cmd.SysProcAttr = sysProcAttr(nil)
	if checkPlatform() != nil {
		return cmd.Start() // no parent-death signal here: the child may outlive us
	}
	return startOnSpawner(cmd)
}

// startOnSpawner starts cmd on the spawner's thread.
func startOnSpawner(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnC = make(chan spawnReq)
		go spawner(spawnC)
	})
	r := spawnReq{cmd: cmd, errC: make(chan error, 1)}
	spawnC <- r
	return <-r.errC
}

// spawn starts cmd on the spawner's thread. cmd.SysProcAttr must come from
// sysProcAttr, for the parent-death signal.
func spawn(cmd *exec.Cmd) (*process, error) {
	if err := checkPlatform(); err != nil {
		return nil, err
	}
	if err := startOnSpawner(cmd); err != nil {
		return nil, fmt.Errorf("testserver: start %s: %w", cmd.Path, err)
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, doneC: make(chan struct{})}
	go func() { // ends when the child does; every owner kills its children in Close
		p.err = cmd.Wait()
		close(p.doneC)
	}()
	return p, nil
}

// exited reports whether the child has exited.
func (p *process) exited() bool {
	select {
	case <-p.doneC:
		return true
	default:
		return false
	}
}

// signal sends sig to the child unless it has already been reaped (then
// nothing: os.Process does not signal a reaped pid, which may be reused).
func (p *process) signal(sig syscall.Signal) error {
	err := p.cmd.Process.Signal(sig)
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("testserver: signal %v to pid %d: %w", sig, p.pid, err)
	}
	return nil
}

// kill sends SIGKILL and waits until the child has exited.
func (p *process) kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-p.doneC // SIGKILL cannot be caught, and works on a stopped process
	return nil
}

// run runs cmd to its end and returns its combined output.
func run(ctx context.Context, cmd *exec.Cmd) ([]byte, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	p, err := spawn(cmd)
	if err != nil {
		return nil, err
	}
	select {
	case <-p.doneC:
	case <-ctx.Done():
		p.kill()
		return out.Bytes(), fmt.Errorf("testserver: %s: %w", cmd.Path, ctx.Err())
	}
	if p.err != nil {
		return out.Bytes(), fmt.Errorf("testserver: %s: %w\n%s", cmd.Path, p.err, out.Bytes())
	}
	return out.Bytes(), nil
}

// childEnv returns this process's environment without the variables whose
// names start with one of prefixes: etcd reads its flags from ETCD_*, and
// libpq its connection defaults from PG*.
func childEnv(prefixes ...string) []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return env
}

// freePorts returns n distinct TCP ports that were free on 127.0.0.1. Another
// process may take one before the server binds it: callers retry.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("testserver: free port: %w", err)
		}
		defer l.Close() // held until all are chosen, so that they differ
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// listening reports whether something accepts TCP connections on
// 127.0.0.1:port.
func listening(port int) bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// logTail returns the last n lines of the file at path, for errors.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// openLog opens path for appending: a restarted server adds to its log.
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("testserver: %w", err)
	}
	return f, nil
}

// sleepCtx waits d, or less if ctx is done first; it returns ctx.Err().
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
