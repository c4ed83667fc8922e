// Command watchbench measures the fan-out of watch streams (GET /v1/watch):
// N watchers on one server, each on its own TCP connection, while a driver
// makes changes at a fixed rate of events per second, open loop (a ticker
// schedules every change; a late answer delays none of the next), with
// acquire/release cycles on a few resources: an acquire publishes two
// events (granted, fence_raised), a release one. For each measurement it
// reports
//
//   - the events published per second, as achieved against the target, and
//     the driver's answer times;
//   - the delay of every delivery (a watcher reading an event), from the
//     event's own server timestamp (its "time", which the server's hub sets
//     as Publish begins: after the change is durable, before the driver's
//     200) to the moment the watcher read the event: p50, p99 and max over
//     all watcher × event deliveries;
//   - every delivery that did not happen: streams that ended (the server
//     cuts off a watcher that falls 1,024 events behind; the watcher then
//     reconnects with Last-Event-ID after the stream's retry delay, as an
//     EventSource does, and resumes), events announced lost by a "lost"
//     event (the documented loss signal), events skipped without one (a
//     silent gap: a bug), and events still undelivered when the drain after
//     the run ends;
//   - the server's memory, VmRSS and VmHWM from /proc/PID/status, with no
//     watcher, with the N connected and idle, and at the end of the run;
//     its CPU per second of the run (/proc/PID/stat), this process's (the
//     watchers' and the driver's), and the rest of the machine's, which
//     says how much a shared machine took;
//   - the time to connect the N watchers, at most -connect-parallel
//     handshakes at once, so that the server's accept backlog (somaxconn)
//     cannot overflow; the kernel's ListenOverflows and ListenDrops
//     counters are reported to show it did not;
//   - at the middle of the run, the bytes waiting in the server's socket
//     send queues and in the watchers' receive queues: where a backlog
//     builds, the server or the readers.
//
// Each measurement starts `fence serve` (the binary given) anew, on its
// embedded store, on a loopback port below 32768 (out of the ephemeral
// range the watchers' connections take their ports from), data in a new
// temporary directory, with the caps on watch streams and connections
// lifted (--max-client-watchers 0 --max-total-watchers 0 --max-conns 0:
// their defaults, 64, 1024 and 4096, would refuse most watchers of one
// address). It raises its own open-file limit to the hard limit, which the
// server inherits, and checks that both have enough descriptors.
//
// -watchers takes a list of counts: each round measures every count, the
// order reversed every other round (the machine may be shared), and it
// prints each measurement, then a table of all and each count's medians.
//
//	go build -o /tmp/fence ./cmd/fence
//	go run ./internal/tools/watchbench -fence /tmp/fence
//	go run ./internal/tools/watchbench -fence /tmp/fence -watchers 1000,10000 -rounds 3
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// config is the run's settings, from the flags.
type config struct {
	fenceBin        string
	watchers        []int
	rate            float64 // events per second
	dur             time.Duration
	rounds          int
	resources       int
	connectParallel int
	drain           time.Duration
	verbose         bool
}

func main() {
	var cfg config
	flag.StringVar(&cfg.fenceBin, "fence", "", "the fence `binary` to serve from (required)")
	watchers := flag.String("watchers", "10000", "watch streams open at once: a `list` of counts separated by commas, each measured in every round (0: the driver alone, a baseline)")
	flag.Float64Var(&cfg.rate, "rate", 1000, "events published per second by the driver")
	flag.DurationVar(&cfg.dur, "dur", 10*time.Second, "how long the driver publishes events in each measurement")
	flag.IntVar(&cfg.rounds, "rounds", 3, "rounds of every watcher count")
	flag.IntVar(&cfg.resources, "resources", 16, "resources the driver cycles over (each one's acquires and releases are sequential)")
	flag.IntVar(&cfg.connectParallel, "connect-parallel", 64, "watcher handshakes (connect, request, response headers) in flight at once")
	flag.DurationVar(&cfg.drain, "drain", 30*time.Second, "how long after the last event the watchers may take to read every event")
	flag.BoolVar(&cfg.verbose, "v", false, "also print, for each measurement, the delay by second of the run (from a sample of 64 watchers)")
	flag.Parse()
	var err error
	if cfg.watchers, err = parseCounts(*watchers); err != nil {
		fmt.Fprintln(os.Stderr, "watchbench: -watchers:", err)
		os.Exit(2)
	}
	if cfg.fenceBin == "" || cfg.rate <= 0 || cfg.dur <= 0 || cfg.rounds < 1 || cfg.resources < 1 ||
		cfg.connectParallel < 1 || cfg.drain <= 0 || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "watchbench:", err)
		os.Exit(1)
	}
}

// parseCounts parses a list of counts separated by commas; 0 (no watcher)
// measures the driver and the server alone.
func parseCounts(s string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a count (0 or more)", f)
		}
		if slices.Contains(ns, n) {
			return nil, fmt.Errorf("%d is listed twice", n)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// fdSlack is the descriptors a process needs besides one per watcher: the
// driver's connections, the server's store files and listener, and some to
// spare.
const fdSlack = 512

func run(cfg config) error {
	soft, hard, err := raiseFileLimit()
	if err != nil {
		return err
	}
	most := slices.Max(cfg.watchers)
	if need := uint64(most + cfg.resources + fdSlack); soft < need {
		return fmt.Errorf("the open-file limit is %d (hard limit %d): %d watchers need about %d; raise the hard limit (ulimit -Hn, or LimitNOFILE in a unit)", soft, hard, most, need)
	}
	dir, err := os.MkdirTemp("", "watchbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	fmt.Printf("watchers %v, %.0f events/s for %s, %d resources, %d rounds; open-file limit %d (hard %d); delay = watcher's read - event's server \"time\"\n",
		cfg.watchers, cfg.rate, cfg.dur, cfg.resources, cfg.rounds, soft, hard)
	var all []*result
	for round := range cfg.rounds {
		order := slices.Clone(cfg.watchers)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, n := range order {
			r, err := measure(cfg, dir, round+1, n)
			if err != nil {
				return fmt.Errorf("round %d, %d watchers: %w", round+1, n, err)
			}
			r.print(os.Stdout, cfg.verbose)
			all = append(all, r)
		}
	}
	printTable(os.Stdout, cfg.watchers, all)
	return nil
}

// raiseFileLimit raises the soft limit on open files to the hard limit and
// returns both. The server, started later, inherits it: a Go program that
// calls Setrlimit itself passes its own limit on to its children.
func raiseFileLimit() (soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("read the open-file limit: %w", err)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("raise the open-file limit to %d: %w", lim.Max, err)
	}
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("read the open-file limit: %w", err)
	}
	return lim.Cur, lim.Max, nil
}
