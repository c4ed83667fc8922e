package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fence-lock/fence/internal/chaos"
	"github.com/fence-lock/fence/internal/chaos/check"
)

const chaosExamples = `  fence chaos --duration 1m                        # embedded server, every fault
  fence chaos --duration 5m --seed 42 --history run.jsonl -o json
  fence chaos --addr http://fence.internal:7700 --faults pause,net --duration 10m
  fence chaos --unsafe --duration 30s              # storage without fencing: must find violations
`

const chaosHelp = `Runs client processes that loop acquire -> read -> fenced write(s) derived from
what they read -> release (some as two-resource transactions) against a fence
server, while injecting faults on a schedule drawn from --seed:
  pause  SIGSTOP a client between its acquire and its write for longer than its
         TTL, then SIGCONT: it wakes with a stale token
  kill   kill -9 the embedded server and restart it on the same data
  net    latency, reset and refused connections, and black-holes, through a
         proxy on loopback between the clients and the server
Then it checks the history of every operation: accepted writes never go down
in token order; no stale token is accepted after a newer one was; tokens
strictly increase; no acknowledged write is lost; the key-value history is
linearizable (porcupine). A run fails if the checker finds a violation, or if
no fault bit (no pause outlasted a TTL and no operation was cut short).

Without --addr, an embedded fence serve runs in a temporary directory. With
--addr, the run targets your deployment (through a local proxy); kill is then
not available. It writes keys k0..k<keys-1> of resources r0..r<resources-1>.
--unsafe runs the same workload with the storage on a store that ignores
fencing tokens: the checker must report violations there.

-o json prints one object: ops, faults (by kind), accepted, fenced,
violations, lost_acked_writes, pauses_past_ttl, fenced_by_pauses, checkers,
linearizability, seed, duration_s, history, html, ok.`

// chaosCmd is fence chaos.
func chaosCmd(ctx context.Context, args []string, std stdio) error {
	var (
		cfg                      chaos.Config
		addr, faults, hist, out  string
		seed                     uint64
		clients, resources, keys int
	)
	fs := newFlagSet("chaos", "fence chaos [--addr URL] [--duration D] [--clients N] [--resources M] [--seed S] [--faults pause,kill,net] [--unsafe] [--history FILE] [-o json]\n\n"+chaosHelp, chaosExamples, std.err)
	fs.StringVar(&addr, "addr", "", "base `URL` of a fence server to test (default: an embedded one)")
	fs.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long the workload runs")
	fs.IntVar(&clients, "clients", 6, "client processes")
	fs.IntVar(&resources, "resources", 4, "resources (fewer than clients, so that they contend)")
	fs.IntVar(&keys, "keys", 2, "keys per resource")
	fs.DurationVar(&cfg.TTL, "ttl", time.Second, "the clients' lease TTL")
	fs.Uint64Var(&seed, "seed", 0, "seed of the fault schedule and the workload (default: random, printed)")
	fs.StringVar(&faults, "faults", "pause,kill,net", "fault kinds to inject: pause, kill, net (comma-separated; empty for none)")
	fs.IntVar(&cfg.TxnPercent, "txn-percent", 20, "percent of client cycles that are two-resource transactions")
	fs.DurationVar(&cfg.Think, "think", 25*time.Millisecond, "mean pause between a client's cycles; less load makes a history porcupine can check in minutes")
	fs.BoolVar(&cfg.Unsafe, "unsafe", false, "storage on a store that does not check fences (the checker must find violations)")
	fs.StringVar(&hist, "history", "", "write the history as JSON lines to `FILE` (and the linearizability HTML next to it on failure)")
	fs.StringVar(&out, "o", "text", "output `format`: text or json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if out != "text" && out != "json" {
		return &usageError{fmt.Errorf("chaos: -o %q: want text or json", out)}
	}
	if seed == 0 {
		seed = rand.Uint64()
	}
	if strings.TrimSpace(faults) != "" {
		cfg.Faults = strings.Split(faults, ",")
	}
	binary, err := os.Executable()
	if err != nil {
		return fmt.Errorf("chaos: finding the fence binary: %w", err)
	}
	cfg.Binary, cfg.Addr, cfg.Seed, cfg.Clients, cfg.Resources, cfg.Keys = binary, addr, seed, clients, resources, keys
	cfg.Log = slog.New(slog.NewTextHandler(std.err, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	if err := cfg.Validate(); err != nil {
		return &usageError{err}
	}
	fmt.Fprintf(std.err, "fence chaos: %s, %d clients, %d resources, ttl %s, faults %q, seed %d%s\n",
		cfg.Duration, cfg.Clients, cfg.Resources, cfg.TTL, faults, seed, map[bool]string{true: ", UNSAFE storage"}[cfg.Unsafe])
	res, err := chaos.Run(ctx, cfg)
	if err != nil {
		return err
	}
	htmlDir := ""
	if hist != "" {
		if err := res.WriteHistory(hist); err != nil {
			return err
		}
		htmlDir = filepath.Dir(hist)
	}
	rep := check.Check(res.Ops, res.Faults, check.Options{HTMLDir: htmlDir})
	if hist == "" && rep.Violations() > 0 {
		// Keep the evidence: the history and its visualisation.
		if dir, err := os.MkdirTemp("", "fence-chaos-failed-"); err == nil {
			hist = filepath.Join(dir, "history.jsonl")
			if res.WriteHistory(hist) == nil {
				rep = check.Check(res.Ops, res.Faults, check.Options{HTMLDir: dir})
			}
		}
	}
	summary := chaosSummary(cfg, res, &rep, hist)
	if out == "json" {
		enc := json.NewEncoder(std.out)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(summary); err != nil {
			return err
		}
	} else {
		printChaos(std.out, summary, &rep)
	}
	switch {
	case rep.Violations() > 0:
		return &exitError{code: exitViolation, err: fmt.Errorf("chaos: %d violations (history %s)", rep.Violations(), hist)}
	case !res.FaultsBit() && len(cfg.Faults) > 0:
		return &exitError{code: exitNoBite, err: fmt.Errorf("chaos: no fault bit: the run proves nothing; run longer")}
	}
	return nil
}

// chaosReport is the JSON form of a run's report.
type chaosReport struct {
	OK              bool                  `json:"ok"`
	Unsafe          bool                  `json:"unsafe"`
	Seed            uint64                `json:"seed"`
	DurationS       float64               `json:"duration_s"`
	Ops             int                   `json:"ops"`
	OpsByOutcome    map[string]int        `json:"ops_by_outcome"`
	Faults          map[string]int        `json:"faults"`
	PausesPastTTL   int                   `json:"pauses_past_ttl"`
	FencedByPauses  int                   `json:"fenced_by_pauses"`
	ServerRestarts  int                   `json:"server_restarts"`
	Accepted        int                   `json:"accepted"`
	Fenced          int                   `json:"fenced"`
	Violations      int                   `json:"violations"`
	LostAckedWrites int                   `json:"lost_acked_writes"`
	Checkers        map[string]int        `json:"checkers"`
	Linearizability check.Linearizability `json:"linearizability"`
	FaultsBit       bool                  `json:"faults_bit"`
	History         string                `json:"history,omitempty"`
}

func chaosSummary(cfg chaos.Config, res *chaos.Result, rep *check.Report, hist string) chaosReport {
	s := chaosReport{
		Unsafe: cfg.Unsafe, Seed: cfg.Seed, DurationS: res.Duration.Seconds(), Ops: len(res.Ops),
		OpsByOutcome: rep.Counts, Faults: map[string]int{}, PausesPastTTL: res.PausesPastTTL,
		FencedByPauses: res.FencedByPauses, ServerRestarts: res.ServerRestarts, Accepted: rep.Accepted,
		Fenced: rep.Fenced, Violations: rep.Violations(), LostAckedWrites: rep.LostAckedWrites,
		Checkers: map[string]int{}, Linearizability: rep.Linearizability, FaultsBit: res.FaultsBit(), History: hist,
	}
	for _, k := range cfg.Faults {
		s.Faults[k] = 0
	}
	for _, f := range res.Faults {
		s.Faults[f.Kind]++
	}
	for _, c := range rep.Checkers {
		s.Checkers[c.Name] = c.Count
	}
	s.OK = s.Violations == 0 && (s.FaultsBit || len(cfg.Faults) == 0)
	return s
}

func printChaos(w io.Writer, s chaosReport, rep *check.Report) {
	fmt.Fprintf(w, "fence chaos report (seed %d, %.1fs%s)\n", s.Seed, s.DurationS, map[bool]string{true: ", UNSAFE storage"}[s.Unsafe])
	fmt.Fprintf(w, "  operations  %d\n", s.Ops)
	keys := make([]string, 0, len(s.OpsByOutcome))
	for k := range s.OpsByOutcome {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "    %-18s %d\n", k, s.OpsByOutcome[k])
	}
	fmt.Fprintf(w, "  faults      pause %d (past the TTL: %d, their writes fenced: %d), kill %d, net %d\n",
		s.Faults["pause"], s.PausesPastTTL, s.FencedByPauses, s.Faults["kill"], s.Faults["net"])
	fmt.Fprintf(w, "  writes      accepted %d, fenced %d\n", s.Accepted, s.Fenced)
	fmt.Fprintf(w, "  checkers\n")
	for _, c := range rep.Checkers {
		verdict := "ok"
		if !c.OK {
			verdict = fmt.Sprintf("%d VIOLATIONS", c.Count)
		}
		fmt.Fprintf(w, "    %-16s %s\n", c.Name, verdict)
		for i, v := range c.Violations {
			if i == 5 {
				fmt.Fprintf(w, "      ... %d more\n", len(c.Violations)-5)
				break
			}
			fmt.Fprintf(w, "      - %s (ops %v)\n", v.Message, v.Ops)
		}
	}
	fmt.Fprintf(w, "  lost acknowledged writes  %d\n", s.LostAckedWrites)
	fmt.Fprintf(w, "  linearizability           %s (%d ops in %d partitions, %d ms)\n",
		s.Linearizability.Result, s.Linearizability.Ops, len(s.Linearizability.Partitions), s.Linearizability.DurationMS)
	if s.Linearizability.HTML != "" {
		fmt.Fprintf(w, "  visualisation             %s\n", s.Linearizability.HTML)
	}
	if s.History != "" {
		fmt.Fprintf(w, "  history                   %s\n", s.History)
	}
	switch {
	case s.Violations > 0:
		fmt.Fprintf(w, "result: %d VIOLATIONS\n", s.Violations)
	case !s.FaultsBit:
		fmt.Fprintln(w, "result: no fault bit; the run proves nothing")
	default:
		fmt.Fprintln(w, "result: ok, fencing held under every fault")
	}
}

// chaosWorkerCmd is one client process of fence chaos (internal).
func chaosWorkerCmd(ctx context.Context, args []string, std stdio) error {
	var cfg chaos.WorkerConfig
	var seed uint64
	fs := newFlagSet("chaos-worker", "fence chaos-worker (internal: a client process of fence chaos)", "", std.err)
	fs.IntVar(&cfg.Client, "client", 0, "client index")
	fs.StringVar(&cfg.LockAddr, "lock-addr", "", "lock service URL")
	fs.StringVar(&cfg.StoreAddr, "store-addr", "", "storage URL")
	fs.IntVar(&cfg.Resources, "resources", 1, "resources")
	fs.IntVar(&cfg.Keys, "keys", 1, "keys per resource")
	fs.DurationVar(&cfg.TTL, "ttl", time.Second, "lease TTL")
	fs.DurationVar(&cfg.Timeout, "timeout", 3*time.Second, "request timeout")
	fs.IntVar(&cfg.TxnPercent, "txn-percent", 0, "percent of transactions")
	fs.DurationVar(&cfg.Think, "think", 0, "mean pause between cycles")
	fs.Uint64Var(&seed, "seed", 0, "seed")
	fs.Int64Var(&cfg.Start, "start", 0, "run start, Unix ns")
	if err := fs.Parse(args); err != nil {
		return &usageError{err}
	}
	cfg.Seed = seed
	return chaos.RunWorker(ctx, cfg, std.out)
}
