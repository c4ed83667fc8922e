// Command fence is the fence lock service and its tools.
//
//	fence serve [flags]    run the lock service and the fenced storage
//	fence version          print the version
//
// Every flag has an environment twin: --listen is FENCE_LISTEN, --read-timeout
// is FENCE_READ_TIMEOUT. A flag given on the command line wins over its twin.
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
	"syscall"
)

const usage = `fence: a lock service that issues fencing tokens, and storage that enforces them.

Usage:
  fence serve [flags]    run the lock service and the fenced storage (see fence serve --help)
  fence version          print the version

Every flag has an environment twin FENCE_<FLAG>, e.g. --listen and FENCE_LISTEN.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the process's exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "fence", version())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "fence: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "fence:", err)
		var usageErr *usageError
		if errors.As(err, &usageErr) {
			return 2
		}
		return 1
	}
	return 0
}

// usageError is a bad command line: exit code 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func version() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}
