package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// On Linux, fence lock does not start its command itself: it starts
// `fence __supervise`, a copy of itself, which starts the command. The
// command must not outlive fence lock, even when fence lock is killed with
// SIGKILL and cannot act:
//
//   - the supervisor gets SIGTERM when fence lock dies (PR_SET_PDEATHSIG),
//     and also polls its parent, in case that signal was missed;
//   - the supervisor is a subreaper (PR_SET_CHILD_SUBREAPER): every process
//     the command starts that is orphaned (its parent died) becomes the
//     supervisor's child, not init's, so that all of them stay its
//     descendants;
//   - once fence lock is gone, the supervisor kills the command's process
//     group, then every descendant it has, again until none is left, and
//     exits.
//
// The command keeps a process group of its own, as without the supervisor:
// fence lock sends the signals it forwards, and its SIGTERM and SIGKILL when
// the lease is lost, to that group. The supervisor is in a group of its
// own too, so that none of those reach it. It reports the command's pid to
// fence lock on a pipe (its fd 3), and exits with the command's exit code,
// or 128+N if signal N killed the command.

// superviseName is the hidden command of the supervisor.
const superviseName = "__supervise"

// parentPoll is how often the supervisor checks that fence lock still runs.
const parentPoll = 200 * time.Millisecond

// startCommand starts the command argv (path, as exec.LookPath found
// argv[0]) with env and std, under a supervisor.
func startCommand(path string, argv, env []string, std stdio) (*child, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	// /proc/self/exe is this binary even if its file was replaced or
	// removed since it started (an upgrade while a cron job runs).
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       append([]string{os.Args[0], superviseName, "--parent", strconv.Itoa(os.Getpid()), path, "--"}, argv...),
		Env:        env,
		Stdin:      std.in,
		Stdout:     std.out,
		Stderr:     std.err,
		ExtraFiles: []*os.File{w},
		// Pdeathsig follows the thread that starts the child: a thread
		// of fence lock that exits signals the supervisor too, which
		// then finds its parent alive and goes on.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM},
	}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return nil, fmt.Errorf("starting its supervisor: %w", err)
	}
	waitC := make(chan error, 1)
	go func() { waitC <- cmd.Wait() }()
	line, _ := bufio.NewReader(r).ReadString('\n')
	word, rest, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	pid, perr := strconv.Atoi(rest)
	if word != "pid" || perr != nil || pid <= 0 {
		err := <-waitC
		if word == "error" && rest != "" {
			return nil, errors.New(rest)
		}
		return nil, fmt.Errorf("its supervisor ended before it started the command (%v)", err)
	}
	done := make(chan error, 1)
	go func() {
		err := <-waitC
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				// The supervisor was killed (it catches the other
				// signals): the command got SIGKILL (its Pdeathsig),
				// and what it started must go too.
				syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
		done <- err
	}()
	return &child{group: pid, done: done}, nil
}

// superviseCmd is `fence __supervise --parent PID PATH -- ARGV...`, started
// by fence lock (see startCommand): it runs ARGV and kills it, and all it
// started, if fence lock dies.
func superviseCmd(ctx context.Context, args []string, std stdio) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprint(std.out, superviseHelp)
		return flag.ErrHelp
	}
	if len(args) < 5 || args[0] != "--parent" || args[3] != "--" {
		return &usageError{errors.New(superviseName + ": internal to fence lock, which starts it")}
	}
	parent, err := strconv.Atoi(args[1])
	if err != nil {
		return &usageError{fmt.Errorf("%s: --parent %q: want a pid", superviseName, args[1])}
	}
	path, argv := args[2], args[4:]
	report := os.NewFile(3, "fence-lock-report")
	if report == nil {
		return &usageError{errors.New(superviseName + ": no report pipe (fd 3)")}
	}
	syscall.CloseOnExec(3)

	// Catch every signal that would stop the supervisor (the command gets
	// its own from fence lock): on each, see whether fence lock is gone.
	sigC := make(chan os.Signal, 16)
	signal.Notify(sigC, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE)
	orphaned := func() bool { return os.Getppid() != parent }
	if orphaned() {
		return &exitError{code: exitSignal + int(syscall.SIGKILL)} // fence lock died already
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(report, "error cannot become a subreaper: %v\n", err)
		return &exitError{code: exitFailure}
	}
	// The command's Pdeathsig (SIGKILL, should the supervisor itself be
	// killed) follows the thread that starts it: keep that thread for good.
	runtime.LockOSThread()
	proc, err := os.StartProcess(path, argv, &os.ProcAttr{
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		fmt.Fprintf(report, "error %v\n", err)
		return &exitError{code: 126}
	}
	fmt.Fprintf(report, "pid %d\n", proc.Pid)
	report.Close()
	group := proc.Pid

	exitC := make(chan syscall.WaitStatus, 1)
	go reap(proc.Pid, exitC)
	tick := time.NewTicker(parentPoll)
	defer tick.Stop()
	for {
		select {
		case ws := <-exitC:
			if ws.Signaled() {
				return &exitError{code: exitSignal + int(ws.Signal())}
			}
			return &exitError{code: ws.ExitStatus()}
		case <-sigC:
		case <-tick.C:
		}
		if orphaned() {
			killDescendants(group)
			return &exitError{code: exitSignal + int(syscall.SIGKILL)}
		}
	}
}

// reap waits for the children of the supervisor, the command and the
// orphans it adopts as a subreaper, and sends the command's status on exitC.
func reap(pid int, exitC chan<- syscall.WaitStatus) {
	for {
		var ws syscall.WaitStatus
		p, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return // ECHILD: no child left
		case p == pid && (ws.Exited() || ws.Signaled()):
			exitC <- ws
			return
		}
	}
}

// killDescendants kills process group group and every live descendant of
// this process with SIGKILL, until none is left. As a subreaper, this
// process adopts the orphans of the killed ones, so that each round finds
// what the last one left.
func killDescendants(group int) {
	syscall.Kill(-group, syscall.SIGKILL)
	for range 100 {
		pids := descendants(os.Getpid())
		if len(pids) == 0 {
			return
		}
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// descendants returns the live (not zombie) descendants of process root,
// read from /proc.
func descendants(root int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	children := map[int][]int{}
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 > len(b) {
			continue
		}
		fields := strings.Fields(string(b[i+2:]))
		if len(fields) < 2 || fields[0] == "Z" || fields[0] == "X" {
			continue
		}
		pid, err1 := strconv.Atoi(strings.Fields(string(b[:i]))[0])
		ppid, err2 := strconv.Atoi(fields[1])
		if err1 == nil && err2 == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
