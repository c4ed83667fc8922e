package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	// Named load: the subcommand's function is bench, as in the commands table.
	load "github.com/fence-lock/fence/internal/tools/bench"
	"github.com/fence-lock/fence/internal/tools/embedded"
)

const benchSynopsis = `fence bench [--workload cycle|write|contended] [--clients N] [--resources M] [--duration D] [flags]

Measures a fence server: a closed-loop load generator (each client
sends its next request when the previous one is answered, each on its own
HTTP connection), then a report of operations per second, latency per step
(p50, p99, p99.9) and every error, counted by its problem code ("network" or
"timeout" when the request got no answer). Run it against a deployment, not
against a server that holds data you care about: it writes the key --key in
the resources bench-0 ... bench-<M-1>.

The server measured is the one at --addr (or FENCE_ADDR). Without either,
bench starts a fence server inside its own process, on the embedded store in
a temporary directory (removed after the run), with serve's defaults: every
change fsynced before it is answered. It shares this machine's CPUs with the
load generator. stderr says which server is measured.

Workloads:
  cycle      each client loops acquire → PUT with the token in Fencing-Token →
             release, on resource bench-<i mod M>; one operation is one cycle.
             With M >= N (the default) each client has a resource of its own.
  write      each client acquires the resources it owns (bench-j with
             j mod N == i; needs M >= N) once, renews them every ttl/3, and
             loops fenced PUTs, re-acquiring a resource whose write is fenced
             or whose lease is lost; one operation is one accepted write.
  contended  the cycle with a blocking acquire (--wait, default 10s), all
             clients on M resources (default 1): the lock changes hands. One
             operation is one acquisition; the acquire step is the wait for
             the lock.

Every run checks, in process, that the lock service and the storage kept
their promises: "overlaps" counts grants while another client of the run
still held an unexpired lease on the resource, "regressions" counts writes
accepted with a lower token than a write already accepted on it. Both must
be 0; "fenced" (writes rejected as stale) is 0 unless a lease expired.

The run lasts --warmup (not counted) plus --duration, or until SIGINT; the
report is printed either way. While it runs, stderr shows the time elapsed
and left, the operations and errors so far and the current rate (over the
last second): on a terminal one line rewritten in place, elsewhere a plain
line every 5s, and nothing with -o json (see --progress).

With --report FILE.html it also writes one self-contained HTML page (inline
SVG charts, nothing fetched: it reads offline and attaches to an issue): the
figures of the report, throughput and errors over time, the p50, p90 and p99
of each step over time, a latency histogram per step, the settings and the
command line to run it again, and this machine (os/arch, CPUs, Go, fence
version). It is written after the report, also when SIGINT ended the run.

Exit status 0 when the run completed, even with errors (they are in the
report); 1 when no operation succeeded or --report could not be written.

Report with -o json: one JSON object on stdout, with the members
  workload, addr, clients, resources, ttl_ms, wait_ms, value_size, key
                       the run's settings
  warmup_s, duration_s the warm-up and the time measured, in seconds
  interrupted          true if SIGINT ended the run early
  ops, ops_per_s       operations completed: cycles whose acquire was granted
                       in the measured time (cycle, contended; each such
                       acquisition is one cycle, an op or the error of its
                       write or release, so acquisitions = ops + those
                       errors; acquires refused are errors but no
                       acquisitions), or writes accepted in it (write)
  acquisitions, acquisitions_per_s
                       acquires granted in the measured time
  handoffs             acquisitions where the previous grant of the resource
                       went to another client
  client_ops_min, client_ops_max
                       the fewest and most operations of one client (fairness)
  latency_ms           per step: {"count", "mean", "p50", "p99", "p999", "max"}
                       in milliseconds (quantiles within 1%), for "acquire",
                       "write", "release" and "cycle" (cycle, contended) or
                       "acquire", "write" and "renew" (write)
  errors               {code: count} of failed requests in the measured time,
                       e.g. {"lock_held": 3, "timeout": 1}; {} if none
  errors_total         their sum
  error_samples        {code: the first error message of that code}
  fenced, overlaps, regressions
                       the checks above
  expired_leases       grants while another client had not released a lease
                       that may have expired: legitimate, the cause of fenced`

const benchExamples = `  fence bench                                    # an embedded server, started for the run
  fence bench --addr http://127.0.0.1:7700
  fence bench --workload cycle --clients 16 --duration 30s --report bench.html
  fence bench --workload contended --clients 16 --resources 1 -o json
  FENCE_ADDR=http://fence.internal:7700 fence bench --workload write --clients 8
`

// benchConfig is the command line of fence bench.
type benchConfig struct {
	clientConfig
	load.Config
	resourcesSet bool   // --resources was given
	waitSet      bool   // --wait was given
	progress     string // --progress: auto, always or never
	report       string // --report: the HTML report's file, "" for none
}

// benchPlainEvery is how often the progress goes to stderr as a plain line
// when stderr is not a terminal.
const benchPlainEvery = 5 * time.Second

func benchFlags(cfg *benchConfig, out io.Writer) *flag.FlagSet {
	fs := newFlagSet("bench", benchSynopsis, benchExamples, out)
	addClientFlags(fs, &cfg.clientConfig)
	// Here no address means a server of bench's own, not the default one.
	addr := fs.Lookup("addr")
	addr.Usage = "base `URL` of the fence server to measure (host:port means http://host:port), or of a cluster's servers separated by commas (default: an embedded server started for the run)"
	addr.DefValue, cfg.clientConfig.Addr = "", ""
	fs.Func("workload", "`name` of the workload: cycle, write or contended (default cycle)", func(s string) error {
		if !slices.Contains(load.Workloads, load.Workload(s)) {
			return errors.New("want cycle, write or contended")
		}
		cfg.Workload = load.Workload(s)
		return nil
	})
	cfg.Workload = load.Cycle
	fs.IntVar(&cfg.Clients, "clients", 1, "number `N` of concurrent clients, each on its own connection")
	fs.Func("resources", "number `M` of resources bench-0..bench-<M-1> (default: --clients; 1 for contended)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil {
			return errors.New("want an integer")
		}
		if n < 1 {
			return errors.New("want at least 1")
		}
		cfg.Resources, cfg.resourcesSet = n, true
		return nil
	})
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to measure, after the warm-up")
	fs.DurationVar(&cfg.Warmup, "warmup", load.DefaultWarmup, "how long to run before measuring (not counted)")
	fs.DurationVar(&cfg.TTL, "ttl", load.DefaultTTL, "TTL of every lease")
	fs.Var(&setDuration{d: &cfg.Wait, set: &cfg.waitSet}, "wait", "`duration` an acquire waits for a held lock, wait_ms (default 0; 10s for contended)")
	fs.IntVar(&cfg.ValueSize, "value-size", load.DefaultValueSize, "size in `bytes` of the value of every PUT")
	fs.DurationVar(&cfg.Timeout, "timeout", load.DefaultTimeout, "time limit of each request (an acquire gets --wait on top)")
	fs.StringVar(&cfg.Key, "key", load.DefaultKey, "`key` written in each resource (may contain '/')")
	fs.StringVar(&cfg.progress, "progress", "auto", "`mode` of the live progress on stderr: auto (a line rewritten in place on a terminal, a plain line every 5s elsewhere, nothing with -o json), always (also with -o json) or never")
	fs.StringVar(&cfg.report, "report", "", "also write an HTML report of the run (charts over time, histograms, settings) to `FILE`, e.g. bench.html")
	return fs
}

// validate completes cfg with the defaults that depend on the workload and
// checks it.
func (cfg *benchConfig) validate() error {
	if err := cfg.validateOutput(); err != nil {
		return err
	}
	if !cfg.resourcesSet {
		cfg.Resources = cfg.Clients
		if cfg.Workload == load.Contended {
			cfg.Resources = 1
		}
	}
	if !cfg.waitSet && cfg.Workload == load.Contended {
		cfg.Wait = load.DefaultWait
	}
	switch {
	case cfg.progress != "auto" && cfg.progress != "always" && cfg.progress != "never":
		return &usageError{fmt.Errorf("bench: --progress %q: want auto, always or never", cfg.progress)}
	case cfg.Timeout <= 0: // load.Config would take 0 for its default
		return &usageError{fmt.Errorf("bench: --timeout %s: want a positive duration", cfg.Timeout)}
	case cfg.TTL <= 0:
		return &usageError{fmt.Errorf("bench: --ttl %s: want 10ms to 24h", cfg.TTL)}
	case cfg.Key == "":
		return &usageError{errors.New("bench: --key is empty")}
	case cfg.CACert != "" || cfg.ClientCert != "" || cfg.ClientKey != "":
		// internal/tools/bench builds its own transports, without a TLS hook yet.
		return &usageError{errors.New("bench: --cacert, --client-cert and --client-key are not supported yet")}
	}
	if cfg.clientConfig.Addr != "" {
		addr, err := cleanAddr(cfg.clientConfig.Addr)
		if err != nil {
			return err
		}
		cfg.Config.Addr = addr
	}
	cfg.Config.AuthToken = cfg.clientConfig.AuthToken
	check := cfg.Config
	if check.Addr == "" {
		check.Addr = "http://127.0.0.1:1" // the embedded server's, once it runs
	}
	if err := check.Validate(); err != nil {
		return &usageError{fmt.Errorf("bench: %w", err)}
	}
	if cfg.report != "" {
		// Found out now rather than after the run.
		if fi, err := os.Stat(filepath.Dir(cfg.report)); err != nil || !fi.IsDir() {
			return &usageError{fmt.Errorf("bench: --report %s: no such directory %s", cfg.report, filepath.Dir(cfg.report))}
		}
	}
	return nil
}

// bench runs a load against a fence server and prints the report.
func bench(ctx context.Context, args []string, io stdio) error {
	var cfg benchConfig
	fs := benchFlags(&cfg, io.out)
	positional, _, dashdash, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if dashdash {
		return &usageError{errors.New("bench: unexpected --")}
	}
	if err := wantArgs("bench", positional); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}

	if cfg.Config.Addr == "" {
		srv, err := embedded.Start(ctx)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer srv.Close()
		cfg.Config.Addr = srv.URL
		fmt.Fprintln(io.err, "fence bench: measuring an embedded fence server started for this run, in this process (the embedded store in a temporary directory, fsynced as fence serve's default); give --addr to measure a deployment")
	} else {
		fmt.Fprintf(io.err, "fence bench: measuring the fence server at %s\n", cfg.Config.Addr)
	}
	var line *progressLine
	if cfg.progress == "always" || cfg.progress == "auto" && cfg.Output != "json" {
		line = &progressLine{w: io.err, terminal: isTerminal(io.err), plainEvery: benchPlainEvery}
		cfg.Config.Progress = func(p load.Progress) { line.show(benchProgress(p, cfg.Duration)) }
	}
	started := time.Now()
	rep, err := load.Run(ctx, cfg.Config)
	line.finish()
	if err != nil {
		return commandError("bench", err)
	}
	if cfg.Output == "json" {
		err = printJSON(io.out, rep)
	} else {
		err = rep.WriteText(io.out)
	}
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if cfg.report != "" {
		var page bytes.Buffer
		if err := load.WriteHTML(&page, cfg.Config, rep, started); err != nil {
			return fmt.Errorf("bench: --report: %w", err)
		}
		if err := os.WriteFile(cfg.report, page.Bytes(), 0o644); err != nil {
			return fmt.Errorf("bench: --report: %w", err)
		}
	}
	if rep.Ops == 0 {
		return fmt.Errorf("bench: no operation succeeded%s", firstError(rep))
	}
	return nil
}

// firstError describes the most frequent error of rep, if any.
func firstError(rep *load.Report) string {
	code, most := "", int64(0)
	for c, n := range rep.Errors {
		if n > most || n == most && c < code {
			code, most = c, n
		}
	}
	if code == "" {
		return ""
	}
	return fmt.Sprintf(" (%d errors; %d %s, e.g. %s)", rep.ErrorsTotal, most, code, rep.ErrorSamples[code])
}

// benchProgress is the text of the progress line of a bench run that
// measures for duration: time elapsed and left, operations and errors so
// far, and the current rate.
func benchProgress(s load.Progress, duration time.Duration) string {
	if s.Warmup {
		return fmt.Sprintf("warming up %s, %s left", clock(s.Elapsed), clock(s.Remaining))
	}
	return fmt.Sprintf("%s of %s, %s left  %d ops  %d errors  %.0f ops/s now",
		clock(s.Elapsed), clock(duration), clock(s.Remaining), s.Ops, s.Errors, s.Rate)
}

// clock formats d for a progress line: 4.2s, 1m05s, 2h03m10s.
func clock(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	d = d.Round(time.Second)
	h, m, sec := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	if h > 0 {
		return fmt.Sprintf("%dh%02dm%02ds", h, m, sec)
	}
	return fmt.Sprintf("%dm%02ds", m, sec)
}
