//go:build !linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os/exec"
	"syscall"
)

// superviseName is the hidden command of the supervisor, which only Linux
// has: elsewhere fence lock starts its command itself, and the command can
// outlive a fence lock killed with SIGKILL.
const superviseName = "__supervise"

// startCommand starts the command argv (path, as exec.LookPath found
// argv[0]) with env and std, in a process group of its own.
func startCommand(path string, argv, env []string, std stdio) (*child, error) {
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Stdin: std.in, Stdout: std.out, Stderr: std.err,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return &child{group: cmd.Process.Pid, done: done}, nil
}

// superviseCmd is not available off Linux.
func superviseCmd(ctx context.Context, args []string, std stdio) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprint(std.out, superviseHelp)
		return flag.ErrHelp
	}
	return &usageError{errors.New(superviseName + ": only on Linux")}
}
