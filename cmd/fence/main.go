// Command fence is the fence lock service and its tools: the server, a CLI
// for every API call, `fence lock` to run a command under a lock, `fence demo`
// and `fence bench`.
//
// Every flag has an environment twin: --addr is FENCE_ADDR, --read-timeout is
// FENCE_READ_TIMEOUT. A flag given on the command line wins over its twin.
// Exit codes are listed in exit.go and in `fence --help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
)

// command is one subcommand of fence.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdio stdio) error
	hidden  bool // internal: not listed in the usage
}

// stdio is a command's standard streams.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// commands lists every subcommand, in the order of the usage text.
var commands = []struct {
	name string
	command
}{
	{"serve", command{summary: "run the lock service and the fenced storage", run: serve}},
	{"keygen", command{summary: "write a new sequencer signing key for serve --signing-key", run: keygenCmd}},
	{"migrate", command{summary: "copy the embedded store into a shared one (etcd, PostgreSQL)", run: migrateCmd}},
	{"bump", command{summary: "raise every token and the revision of a store restored from a backup", run: bumpCmd}},
	{"lock", command{summary: "run a command under a lock, with its token in FENCE_TOKEN", run: lockCmd}},
	{"acquire", command{summary: "acquire a lock and print the lease", run: acquireCmd}},
	{"renew", command{summary: "renew a lease", run: renewCmd}},
	{"release", command{summary: "release a lease", run: releaseCmd}},
	{"revoke", command{summary: "take a lock from its holder and fence it (admin; unprotected for now)", run: revokeCmd}},
	{"status", command{summary: "print a lock's status", run: statusCmd}},
	{"ls", command{summary: "list the locks held now (under a prefix)", run: lsCmd}},
	{"watch", command{summary: "print lock and fence events as they happen (under a prefix)", run: watchCmd}},
	{"cluster", command{summary: "print who leads the servers' store, the epoch and the servers", run: clusterCmd}},
	{"put", command{summary: "write a value with a fencing token", run: putCmd}},
	{"get", command{summary: "read a value", run: getCmd}},
	{"delete", command{summary: "delete a key with a fencing token", run: deleteCmd}},
	{"fence", command{summary: "read a resource's fence, or claim it with --token", run: fenceCmd}},
	{"txn", command{summary: "apply a transaction read as JSON from stdin", run: txnCmd}},
	{"demo", command{summary: "show a stale holder fenced off, with and without fencing", run: demo}},
	{"bench", command{summary: "measure a fence deployment under load", run: bench}},
	{"chaos", command{summary: "inject faults (pauses, kill -9, network) and check that fencing held", run: chaosCmd}},
	{"chaos-worker", command{summary: "a client process of fence chaos", run: chaosWorkerCmd, hidden: true}},
	{"version", command{summary: "print the version", run: versionCmd}},
}

func usage() string {
	s := "fence: a lock service that issues fencing tokens, and storage that enforces them.\n\nUsage:\n  fence COMMAND [flags] [args]\n\nCommands:\n"
	for _, c := range commands {
		if !c.hidden {
			s += fmt.Sprintf("  %-9s %s\n", c.name, c.summary)
		}
	}
	return s + `
Every flag has an environment twin FENCE_<FLAG>, e.g. --addr and FENCE_ADDR.
Run 'fence COMMAND --help' for a command's flags and examples.

` + exitCodesHelp
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], stdio{os.Stdin, os.Stdout, os.Stderr}))
}

// run executes the command line args and returns the process's exit code.
func run(ctx context.Context, args []string, io stdio) int {
	if len(args) == 0 {
		fmt.Fprint(io.err, usage())
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(io.out, usage())
		return exitOK
	case "--version":
		args[0] = "version"
	}
	for _, c := range commands {
		if c.name == args[0] {
			return exitCode(io.err, c.run(ctx, args[1:], io))
		}
	}
	fmt.Fprintf(io.err, "fence: unknown command %q\n\n%s", args[0], usage())
	return exitUsage
}

// exitCode reports err on stderr and maps it to the process's exit code.
func exitCode(stderr io.Writer, err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	var exit *exitError
	if errors.As(err, &exit) {
		if exit.err != nil {
			report(stderr, exit.err)
		}
		return exit.code
	}
	report(stderr, err)
	var usageErr *usageError
	if errors.As(err, &usageErr) {
		return exitUsage
	}
	return exitFailure
}

// report prints err on stderr, prefixed with "fence:" once.
func report(stderr io.Writer, err error) {
	msg := err.Error()
	if !strings.HasPrefix(msg, "fence: ") {
		msg = "fence: " + msg
	}
	fmt.Fprintln(stderr, msg)
}

// usageError is a bad command line: exit code 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// exitError asks for a specific exit code; err, if not nil, is printed.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

func versionCmd(ctx context.Context, args []string, io stdio) error {
	if len(args) > 0 {
		return &usageError{fmt.Errorf("version: unexpected argument %q", args[0])}
	}
	fmt.Fprintln(io.out, "fence", version())
	return nil
}

func version() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}
