// Command fence is the fence lock service and its tools: the server, a CLI
// for every API call, `fence lock` to run a command under a lock, `fence demo`
// and `fence bench`.
//
// Every flag has an environment twin: --addr is FENCE_ADDR, --read-timeout is
// FENCE_READ_TIMEOUT, -o and --output are FENCE_OUTPUT. A flag given on the
// command line wins over its twin. The --addr of fence demo and fence chaos
// has none: they use a server of their own unless given --addr. Exit codes
// are listed in exit.go and in `fence --help`; `fence completion bash|zsh|fish`
// prints a shell completion script.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
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

// namedCommand is a subcommand and its name.
type namedCommand struct {
	name string
	command
}

// commands lists every subcommand, in the order of the usage text. It is
// filled in init: help and completion read it.
var commands []namedCommand

func init() {
	commands = []namedCommand{
		{"serve", command{summary: "run the lock service and the fenced storage", run: serve}},
		{"keygen", command{summary: "write a new sequencer signing key for serve --signing-key", run: keygenCmd}},
		{"migrate", command{summary: "copy the embedded store into a shared one (etcd, PostgreSQL)", run: migrateCmd}},
		{"bump", command{summary: "raise every token and the revision of a store restored from a backup", run: bumpCmd}},
		{"lock", command{summary: "run a command under a lock, with its token in FENCE_TOKEN", run: lockCmd}},
		{"acquire", command{summary: "acquire a lock and print the lease", run: acquireCmd}},
		{"renew", command{summary: "renew a lease", run: renewCmd}},
		{"release", command{summary: "release a lease", run: releaseCmd}},
		{"revoke", command{summary: "take a lock from its holder and fence it (needs admin when auth is on)", run: revokeCmd}},
		{"status", command{summary: "print a lock's status", run: statusCmd}},
		{"ls", command{summary: "list the locks held now (under a prefix)", run: lsCmd}},
		{"fences", command{summary: "list every resource's last token and last fence (under a prefix)", run: fencesCmd}},
		{"watch", command{summary: "print lock and fence events as they happen (under a prefix)", run: watchCmd}},
		{"healthz", command{summary: "exit 0 if the server answers GET /readyz with 200 (a health check)", run: healthzCmd}},
		{"cluster", command{summary: "print who leads the servers' store, the epoch and the servers", run: clusterCmd}},
		{"put", command{summary: "write a value with a fencing token", run: putCmd}},
		{"get", command{summary: "read a value", run: getCmd}},
		{"delete", command{summary: "delete a key with a fencing token", run: deleteCmd}},
		{"fence", command{summary: "read a resource's fence, or claim it with --token", run: fenceCmd}},
		{"txn", command{summary: "apply a transaction read as JSON from stdin", run: txnCmd}},
		{"demo", command{summary: "show a stale holder fenced off, with and without fencing", run: demo}},
		{"bench", command{summary: "measure a fence deployment under load", run: bench}},
		{"chaos", command{summary: "inject faults (pauses, kill -9, network) and check that fencing held", run: chaosCmd}},
		{"guard-check", command{summary: "check that an S3 endpoint's conditional writes can be trusted to fence", run: guardCheckCmd}},
		{"chaos-worker", command{summary: "a client process of fence chaos", run: chaosWorkerCmd, hidden: true}},
		{superviseName, command{summary: "the process between fence lock and its command", run: superviseCmd, hidden: true}},
		{"version", command{summary: "print the version, commit, build date and Go version", run: versionCmd}},
		{"completion", command{summary: "print a shell completion script: bash, zsh or fish", run: completionCmd}},
		{"help", command{summary: "print the commands, or a command's flags and examples", run: helpCmd}},
	}
}

// lookup returns the command called name.
func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c.command, true
		}
	}
	return command{}, false
}

func usage() string {
	s := "fence: a lock service that issues fencing tokens, and storage that enforces them.\n\nUsage:\n  fence COMMAND [flags] [args]\n\nCommands:\n"
	for _, c := range commands {
		if !c.hidden {
			s += fmt.Sprintf("  %-11s %s\n", c.name, c.summary)
		}
	}
	return s + `
Every flag has an environment twin FENCE_<FLAG>, e.g. --addr and FENCE_ADDR,
which fills in a flag not given on the command line (demo's and chaos's
--addr have none: they use a server of their own unless given --addr).
Run 'fence help COMMAND' (or 'fence COMMAND --help') for a command's flags and examples.
'fence completion bash|zsh|fish' prints a shell completion script.

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
	args = slices.Clone(args)
	switch args[0] {
	case "-h", "-help", "--help":
		args[0] = "help"
	case "-version", "--version":
		args[0] = "version"
	}
	c, ok := lookup(args[0])
	if !ok {
		fmt.Fprintln(io.err, unknownCommand(args[0]))
		return exitUsage
	}
	return exitCode(io.err, c.run(ctx, args[1:], io))
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

// report prints err on stderr, prefixed with "fence:" once, without the
// prefixes of the layers it passed through.
func report(stderr io.Writer, err error) {
	fmt.Fprintln(stderr, "fence: "+tidy(err.Error()))
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
