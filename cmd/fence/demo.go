package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	// Named story: the subcommand's function is demo, as in the commands table.
	story "github.com/fence-lock/fence/internal/tools/demo"
)

const demoSynopsis = `fence demo [--addr URL] [--ttl D] [--pause D] [--mermaid FILE|-] [-o json]

Runs the stale-holder story for real, in one command and with no set-up.
A acquires a lock with a short TTL, then freezes (GC, swap, a partition: it
stops renewing and sleeps past its TTL). The lock service lets the lease
expire; B acquires, with the next fencing token, and writes. A wakes up,
still believing it holds the lock, and writes with its old token.

The story runs twice, with locks from fence both times:
  1. against a last-writer-wins store (a tiny HTTP key-value server on
     127.0.0.1 that ignores the Fencing-Token): A's stale value wins;
  2. against fence storage: A's write is answered 409 fenced (presented N,
     last_fence N+1), and B's value stands.
Each step is printed on a timeline with its measured time offset.

Without --addr the locks and the storage come from an embedded fence server
in a temporary directory, removed afterwards, even if FENCE_ADDR is set: only
--addr on the command line points the demo at a running server. Then each
run uses a resource of its own, demo-<random>-unsafe and demo-<random>-fenced,
so that demos never collide. The first line on stderr says which server the
demo uses.

--mermaid FILE writes a Mermaid sequenceDiagram of both runs to FILE;
--mermaid - writes it to stdout instead of the timeline, which then goes to
stderr (so that stdout is the diagram alone), and cannot go with -o json.

With -o json the output is one JSON object: addr, embedded, ttl_ms,
pause_ms, ok, and "unsafe" and "fenced", each with resource, key, token_a,
token_b, write_a and write_b (holder, value, token, status, revision, code,
presented, last_fence, error), final, final_found, outcome
(stale_write_won, stale_write_rejected or other), summary and events (at_ms,
actor, to, kind, message, reply).

Exit status 0 when the fenced run rejected A's write as fenced and B's value
stood; 1 otherwise. The unsafe run is expected to let A's stale write win,
but that depends on timing, and the exit status does not.`

const demoExamples = `  fence demo
  fence demo --ttl 200ms
  fence demo --ttl 2s --pause 5s
  fence demo --addr http://127.0.0.1:7700 --mermaid demo.mmd
  fence demo --mermaid - > demo.mmd   # the timeline stays on the terminal
  fence demo -o json | jq '.fenced.write_a'
`

// demoConfig is the command line of fence demo.
type demoConfig struct {
	clientConfig
	story.Config
	mermaid string // --mermaid: where to write the diagram; "-" stdout, "" none
}

func demoFlags(cfg *demoConfig, out io.Writer) *flag.FlagSet {
	fs := newFlagSet("demo", demoSynopsis, demoExamples, out)
	// Not addClientFlags: here an empty --addr means an embedded server,
	// and an exported FENCE_ADDR must not point the demo at a real one.
	fs.Var(cmdLineOnly{&cfg.clientConfig.Addr}, "addr", "base `URL` of a running fence server (default: an embedded server in a temporary directory; FENCE_ADDR is not read)")
	addOutputFlag(fs, &cfg.Output)
	fs.DurationVar(&cfg.TTL, "ttl", story.DefaultTTL, "TTL of A's lease, and of B's (at least 5s)")
	fs.DurationVar(&cfg.Pause, "pause", 0, "how long A pauses after it acquires; longer than --ttl (default: --ttl + 500ms)")
	fs.StringVar(&cfg.mermaid, "mermaid", "", "write a Mermaid sequenceDiagram of both runs to `FILE`; - for stdout (the timeline then goes to stderr)")
	fs.StringVar(&cfg.Config.AuthToken, "auth-token", "", "bearer `token` for a server with authentication on (needs lock, write, read on demo-*)")
	return fs
}

// validate checks cfg and fills story.Config from the command line.
func (cfg *demoConfig) validate() error {
	if err := cfg.validateOutput(); err != nil {
		return err
	}
	if cfg.mermaid == "-" && cfg.Output == "json" {
		return &usageError{errors.New("demo: --mermaid - and -o json both write to stdout: give --mermaid a file")}
	}
	if cfg.clientConfig.Addr != "" {
		addr, err := cleanAddr(cfg.clientConfig.Addr)
		if err != nil {
			return err
		}
		cfg.clientConfig.Addr = addr
	}
	cfg.Config.Addr = cfg.clientConfig.Addr
	if err := cfg.Config.Validate(); err != nil {
		return &usageError{err}
	}
	return nil
}

// demo runs the stale-holder story without and with fencing, and prints it.
func demo(ctx context.Context, args []string, io stdio) error {
	var cfg demoConfig
	fs := demoFlags(&cfg, io.out)
	positional, _, dashdash, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if dashdash {
		return &usageError{errors.New("demo: unexpected --")}
	}
	if err := wantArgs("demo", positional); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}

	fmt.Fprintln(io.err, "fence demo: "+demoTarget(cfg.Config.Addr))
	if cfg.Output == "text" {
		fmt.Fprintf(io.err, "fence demo: two runs of about %s each...\n", demoPause(cfg.Config))
	}
	res, runErr := story.Run(ctx, cfg.Config)
	if runErr != nil && len(res.Unsafe.Events) == 0 {
		return commandError("demo", runErr) // nothing happened worth printing
	}
	// With --mermaid - stdout is the diagram's: the timeline goes to stderr.
	text := io.out
	if cfg.mermaid == "-" {
		text = io.err
	}
	if cfg.Output == "json" {
		err = printJSON(io.out, res)
	} else {
		err = res.WriteText(text)
	}
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if cfg.mermaid != "" {
		var b bytes.Buffer
		res.WriteMermaid(&b) // a bytes.Buffer does not fail
		if cfg.mermaid == "-" {
			_, err = io.out.Write(b.Bytes())
		} else {
			err = os.WriteFile(cfg.mermaid, b.Bytes(), 0o644)
		}
		if err != nil {
			return fmt.Errorf("demo: --mermaid: %w", err)
		}
	}
	switch {
	case runErr != nil:
		return commandError("demo", runErr)
	case !res.OK:
		return &exitError{code: exitFailure, err: fmt.Errorf("demo: fencing did not stop the stale holder: %s", res.Fenced.Summary)}
	}
	return nil
}

// demoTarget says which server a demo (or chaos run) with --addr addr
// uses, and that an exported FENCE_ADDR is not it.
func demoTarget(addr string) string {
	if addr != "" {
		return "using the fence server at " + addr + " (--addr)"
	}
	msg := "using an embedded fence server in a temporary directory"
	if env := os.Getenv("FENCE_ADDR"); env != "" {
		msg += fmt.Sprintf(" (FENCE_ADDR=%s is not read: give --addr for that server)", env)
	}
	return msg
}

// demoPause returns the pause a run will use, for the progress line.
func demoPause(c story.Config) time.Duration {
	if c.Pause != 0 {
		return c.Pause
	}
	return c.TTL + story.DefaultPauseMargin
}
