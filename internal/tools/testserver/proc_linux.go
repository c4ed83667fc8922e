package testserver

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

func checkPlatform() error { return nil }

// sysProcAttr returns the attributes of every server child: killed when this
// process dies (see spawner), in a process group of its own so that a
// terminal's signals (^C) reach only this process, which then closes the
// servers itself, and run as cred when cred is not nil.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	// Go sets the parent-death signal after switching to cred (a credential
	// change clears it), and kills the child if the parent is already gone.
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true, Credential: cred}
}

// procID names a process that is not our child (a postmaster's child), by pid
// and start time, so that a pid reused by another process is not mistaken for
// it.
type procID struct {
	pid   int
	start uint64 // field 22 of /proc/pid/stat, in clock ticks since boot
}

// procStat reads the parent, state and start time of pid from /proc.
func procStat(pid int) (ppid int, state byte, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0, err
	}
	// pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, 0, fmt.Errorf("testserver: /proc/%d/stat: %q", pid, b)
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return 0, 0, 0, fmt.Errorf("testserver: /proc/%d/stat: %q", pid, b)
	}
	ppid, err = strconv.Atoi(string(f[1]))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("testserver: /proc/%d/stat: %w", pid, err)
	}
	start, err = strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("testserver: /proc/%d/stat: %w", pid, err)
	}
	return ppid, f[0][0], start, nil
}

// descendants returns the processes below pid, children first. The caller
// stops pid first, so that it forks no more while they are listed.
func descendants(pid int) ([]procID, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("testserver: list processes: %w", err)
	}
	children := map[int][]procID{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process
		}
		ppid, state, start, err := procStat(p)
		if err != nil || state == 'Z' || state == 'X' {
			continue // gone meanwhile, or dead
		}
		children[ppid] = append(children[ppid], procID{pid: p, start: start})
	}
	var out []procID
	queue := []int{pid}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
		queue = queue[1:]
	}
	return out, nil
}

// state returns p's state letter (R, S, T, ...), or 0 when p is gone, dead
// (a zombie holds no resources) or its pid now names another process.
func (p procID) state() byte {
	_, state, start, err := procStat(p.pid)
	if err != nil || start != p.start || state == 'Z' || state == 'X' {
		return 0
	}
	return state
}

// signal sends sig to p if p still exists.
func (p procID) signal(sig syscall.Signal) {
	if p.state() != 0 {
		syscall.Kill(p.pid, sig) // an error means it is gone: nothing to do
	}
}

// waitState waits until every process in ps is gone (want 0), or is stopped
// or gone (want 'T').
func waitState(ctx context.Context, ps []procID, want byte) error {
	for _, p := range ps {
		for {
			s := p.state()
			if s == 0 || s == want || (want == 'T' && s == 't') {
				break
			}
			if err := sleepCtx(ctx, 5*time.Millisecond); err != nil {
				return fmt.Errorf("testserver: pid %d still in state %c: %w", p.pid, s, err)
			}
		}
	}
	return nil
}
