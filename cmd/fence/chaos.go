package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fence-lock/fence/internal/tools/chaos"
	"github.com/fence-lock/fence/internal/tools/chaos/check"
	"github.com/fence-lock/fence/internal/tools/chaos/runreport"
)

const chaosExamples = `  fence chaos --duration 1m                        # embedded server, the default faults
  fence chaos --duration 10m --fault-every 300ms --seed 42 --history run.jsonl -o json
  fence chaos --addr http://fence.internal:7700 --faults pause,net --duration 10m
  FENCE_AUTH_TOKEN=... fence chaos --addr https://fence.internal:7700 --cacert ca.pem --faults pause,net
  FENCE_GUARD=postgres://app@db.internal/app fence chaos --duration 5m   # writes through the guard
  fence chaos --unsafe --duration 30s              # storage without fencing: must find violations
  fence chaos --unsafe-journal --faults bitflip,lose-unsynced --duration 20s   # a journal that loses: must find violations
  fence chaos --faults restore,pause,net --duration 30s   # backups restored and bumped under load
  fence chaos --faults clock-skew,kill --duration 30s      # a server's wall clock stepped and strobed
  fence chaos --faults clock-skew --unsafe-clock --duration 10s   # leases timed by that clock: must find violations
  fence chaos --duration 2m --seed 42 --report run.html   # a report to read offline, or attach to an issue
  fence chaos --cluster etcd --duration 2m         # 3 servers on 3 etcd members, the default cluster faults
  fence chaos --cluster postgres --faults leader-pause,engine-kill --duration 1m
  fence chaos --cluster etcd --unsafe-epoch --duration 30s   # no writer-epoch check: must find violations
`

const chaosHelp = `Runs client processes that loop acquire -> read -> fenced write(s) derived from
what they read -> release (some as two-resource transactions) against a fence
server, while injecting faults on a schedule drawn from --seed, after a quiet
gap of 0.4 to 1.6 times --fault-every (default 1.25s) before each:
  pause  SIGSTOP a client between its acquire and its write for longer than its
         TTL, and on until another client has been granted its resource (up
         to 6 TTLs), then SIGCONT: it wakes with a stale token
  kill   kill -9 the embedded server and restart it on the same data
  net    latency, reset and refused connections, and black-holes, through a
         proxy on loopback between the clients and the server
  bitflip
         kill -9 the embedded server, flip a byte of its journal (where a log
         segment holds records, or the newest snapshot), restart it: it must
         refuse to start, naming the file (the flip is then undone, as a
         restore of a backup taken at the kill, and it starts), or start with
         everything acknowledged intact
  lose-unsynced
         kill -9 the embedded server and lose what its journal wrote past its
         last sync, as a power cut would (the write in flight keeps 0-3 of its
         first sectors), then restart it: nothing acknowledged may be lost
  restore
         (not by default) back the embedded server's store up: kill -9, copy
         the journal, restart, read every key; the next restore puts that
         backup back and runs fence bump on it, as the backup guide says,
         with the clients stopped meanwhile. What was acknowledged after the
         backup is gone by design; the checkers hold the restored state to
         the backup's reads, and what follows to tokens above every one
         issued before
  clock-skew
         step a fence server's wall clock (through a hidden clock seam of
         fence serve; with --cluster the leader's, two times in three) ahead
         by 2-4 TTLs, and again every 20 ms for a TTL or two, strobe it
         between there and as far behind, then set it right: leases are
         timed by the monotonic clock, so none may end early
Then it checks the history of every operation: accepted writes never go down
in token order; no stale token is accepted after a newer one was; tokens
strictly increase; no acknowledged write is lost; the key-value history is
linearizable (porcupine's search, made to need memory linear in a resource's
history); with the TTL known, no grant returned while another client's
lease, at least a TTL from its acquire's call, could still run unreleased,
a shared hold beside no exclusive one, never more permits of a semaphore
than its limit, and a refused multi-acquire holding nothing
(lease-exclusive). The history goes to a file as the run goes, and is checked one
resource at a time, so that a long run needs memory for the largest
resource's history only. A run fails if the checker finds a violation, or if
no fault bit (no pause outlasted a TTL, no operation was cut short, no
server restarted or was taken over, and no grant came during a clock-skew).

Without --addr, an embedded fence serve runs in a temporary directory, even
if FENCE_ADDR is set: only --addr on the command line points the run at your
deployment (through a local proxy); kill, bitflip, lose-unsynced and restore are then
not available. It may be
https://, and take a bearer token (--auth-token, or FENCE_AUTH_TOKEN) with
lock, read and write on the resources, and --cacert, --client-cert and
--client-key, as the other commands do; without --addr they are errors on
the command line, and their environment twins are not read. The first line
on stderr says which servers the run uses. It writes keys
k0..k<keys-1> of resources r0..r<resources-1>; at --addr, which keeps what
earlier runs wrote, the keys carry a prefix of the run's own
(3f2a9c1b/k0 ...), logged at the start.
--unsafe runs the same workload with the storage on a store that ignores
fencing tokens: the checker must report violations there. --unsafe-journal is
the negative control of bitflip, lose-unsynced and restore: the embedded server
acknowledges before it syncs, a journal that bitflip damaged is cut at the
damage and served without a bump, as a journal that took damage for the end
of its log did, and a restored backup is served without a bump; the checker
must report violations. --unsafe-clock is clock-skew's: the servers time
their leases by the wall clock the fault skews, and the checker must report
the grants that came too early.

--guard URL (or FENCE_GUARD) tests fence's PostgreSQL guard instead of
fence's storage: the clients take their leases from fence (embedded, or
--addr) and write to that database through the guard with their leases'
tokens, each write a transaction that checks and raises the fence and then
writes (a transaction of two resources checks both). The run creates a fence
table, a data table and a sequence of its own, fence_chaos_<random>_..., and
drops them at the end; the clients reach the database through a proxy on
loopback, which net acts on. With --guard
's3://BUCKET[/PREFIX]?endpoint=http://HOST:PORT' it tests the S3 guard
instead: the run checks the endpoint's conditional writes first (as fence
guard-check does) and refuses one that fails, then each write is a commit
of a resource's manifest in that bucket, under PREFIX/fence-chaos-<random>/,
which it leaves behind; S3 commits one resource at a time, so the cycles
write one resource each (no --txn-percent, no multi workload). The checkers
judge that history the same way, except that a guard raises a fence only
when it accepts a write, not when a token is granted: a stale holder may
write until the newer one has. With --unsafe the writes bypass the guard:
the checker must report violations.

--cluster etcd|postgres starts a cluster and tests it: the engine (3 etcd
members, or a PostgreSQL primary with a synchronous standby, from Debian's
etcd-server and postgresql), 3 fence serve --store on it and the clients, all
on loopback, all stopped at the end. Client i talks to server i mod 3 only,
through a proxy of its own (net); a standby forwards to the leader. Its
faults (default: all of pause, net and these; kill is refused):
  leader-kill   kill -9 the leading server, restart it on its port after
                about the election TTL: it rejoins as a standby
  leader-pause  SIGSTOP the leading server for the election TTL + the TTL +
                1-3 s, then SIGCONT: another takes over meanwhile, and the
                old one wakes with its clients' requests queued on it; one
                of them, stopped before a write, sends that write with its
                now stale token once the new leader has granted the
                resource anew
  engine-kill   etcd: kill -9 the Raft leader, restart it after 0.5-2 s.
                postgres: kill -9 the primary and promote the synchronous
                standby, once per run (no synchronous standby is left)
  engine-net    net's faults between the servers and one or every engine
                node, through a proxy on each path, for up to twice the
                election TTL
  partition     (not by default) partial partitions of those paths, for half
                an election TTL to three, the engine's nodes still talking
                to each other: one server (the leader, two times in three)
                cut from a majority of the nodes; a ring (etcd), where each
                server reaches a majority, no two the same; one node cut
                from every server; or the leader's paths held back and
                delivered late, so that its commits arrive after another
                server took over
--election-ttl is passed to the servers (default theirs, 2s; etcd counts
whole seconds, at least 2). --unsafe-epoch starts them with the writer-epoch
check off, and favours leader-pause (two faults in three; without it, partition,
always with held-back paths): a deposed leader's
commits then go through, and the checker must report violations (a 30 s run
found them every time we tried).

While it runs, a progress line on stderr says how far it is: the time
elapsed and left, the operations, errors (failed or of unknown outcome) and
fenced writes so far, the current rate and the faults injected by kind;
then, while the checkers work, the resource being checked (n of m) and the
time taken. On a terminal it is one line, rewritten in place; elsewhere a
plain line every 5 s; with -o json none, unless --progress always. With
--progress never there is none. Each fault is logged as it is injected,
either way, in a line of its own: "fence chaos: fault net at 553ms for 1ms:
reset every connection". Every line on stderr starts with "fence chaos: "
(a warning or an error of the harness says so next); with --cluster the
servers' own logs go to files beside the history.

--report FILE.html writes the run as one self-contained HTML file (inline
styles and SVG: it fetches nothing), to read offline or attach to an issue:
the verdict of each checker; a timeline per resource of the grants (with
their tokens), accepted, fenced and ambiguous writes, one row per client,
with the faults drawn across it (the pauses on the paused client's row,
kills and network faults across every resource), so that a paused holder
is seen to wake up and be fenced; the operations and faults counted; the
faults one by one; the configuration, with the seed and a command line that
replays the schedule, and fence's version. When a checker fails, each
violation links to the operations it names in the timeline, and porcupine's
visualisation of the resources that are not linearizable is embedded. The
timeline draws up to 12 resources (those that violations name first) and,
of each, a sample of 600 operations besides every fenced write, every fault
and every operation that a violation names; it says what it left out. It is
drawn to the page's width, whatever the run's length, and labels a grant
with its token (a fault with its kind) where the label has room: every mark
and fault has its tooltip.

-o json prints one object: ops, faults (by kind), accepted, fenced,
stale_attempts (writes sent with a token below one already granted),
violations, lost_acked_writes, pauses_past_ttl, fenced_by_pauses,
server_restarts, takeovers, unnamed_refusals (bitflip's refused starts that
did not name the damaged file), checkers, linearizability, seed, duration_s,
history, report, cluster, unsafe_epoch, unsafe_journal, guard, ok. The last line on stderr
before the report says how long the check took and the peak RSS of the
harness and checker.`

// chaosCmd is fence chaos.
func chaosCmd(ctx context.Context, args []string, std stdio) error {
	var (
		cfg                      chaos.Config
		ccfg                     clientConfig // --auth-token and the TLS flags
		addr, hist, out          string
		progress, reportPath     string
		seed                     uint64
		clients, resources, keys int
	)
	var faults faultsFlag
	fs := newFlagSet("chaos", "fence chaos [--addr URL [--auth-token T] [--cacert F] | --cluster etcd|postgres [--unsafe-epoch]] [--guard POSTGRES-URL|S3-LOCATION] [--duration D] [--fault-every D] [--clients N] [--resources M] [--seed S] [--faults KINDS] [--unsafe] [--history FILE] [--report FILE.html] [--progress MODE] [-o json]\n\n"+chaosHelp, chaosExamples, std.out)
	fs.Var(cmdLineOnly{&addr}, "addr", "base `URL` of a fence server to test, http:// or https:// (default: an embedded one; FENCE_ADDR is not read)")
	addAuthTokenFlag(fs, &ccfg)
	addTLSClientFlags(fs, &ccfg)
	fs.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long the workload runs")
	fs.DurationVar(&cfg.FaultEvery, "fault-every", chaos.DefaultFaultEvery, "mean quiet `duration` between the end of a fault and the next; each gap is drawn from 0.4 to 1.6 times it (10ms..1h; 0.4 times it must be under --duration)")
	fs.IntVar(&clients, "clients", 6, "client processes")
	fs.IntVar(&resources, "resources", 4, "resources (fewer than clients, so that they contend)")
	fs.IntVar(&keys, "keys", 2, "keys per resource")
	fs.DurationVar(&cfg.TTL, "ttl", time.Second, "the clients' lease TTL")
	fs.Uint64Var(&seed, "seed", 0, "seed of the fault schedule and the workload (default: random, printed)")
	fs.Var(&faults, "faults", "fault `kinds` to inject, comma-separated, empty for none: pause, kill, net, bitflip, lose-unsynced, restore, clock-skew (default all but restore and clock-skew); with --cluster pause, net, clock-skew, leader-kill, leader-pause, engine-kill, engine-net, partition (default all but clock-skew and partition)")
	fs.IntVar(&cfg.TxnPercent, "txn-percent", 20, "percent of client cycles that are two-resource transactions")
	fs.StringVar(&cfg.Workload, "workload", chaos.WorkloadLock, "`kind` of holds: lock (each lease alone), session (each client keeps one session and takes every lease in it, so that a paused client's session and all its leases expire at once), semaphore (each cycle holds one of 2 permits of its resource and writes its slot's keys), shared (half the cycles hold their resource shared and write the client's own key; the others exclusively) or multi (each cycle takes two resources at once, all or nothing, and writes both in a txn)")
	fs.DurationVar(&cfg.Think, "think", 25*time.Millisecond, "mean pause between a client's cycles; less load makes a shorter history to check")
	fs.BoolVar(&cfg.Unsafe, "unsafe", false, "storage on a store that does not check fences; with --guard, writes that bypass the guard (the checker must find violations)")
	fs.StringVar(&cfg.Guard, "guard", "", "the clients write to the PostgreSQL database at this connection `URL`, or to the S3 bucket at this s3:// location, through fence's guard, with their leases' tokens, instead of to fence's storage (prefer FENCE_GUARD: flags show in ps)")
	fs.StringVar(&cfg.Cluster, "cluster", "", "start a cluster and test it: `engine` etcd (3 members) or postgres (primary and synchronous standby), with 3 fence servers on it")
	fs.DurationVar(&cfg.ElectionTTL, "election-ttl", 0, "with --cluster: the servers' --election-ttl (default theirs, 2s); leader-pause outlasts it")
	fs.BoolVar(&cfg.UnsafeClock, "unsafe-clock", false, "with clock-skew: the servers time their leases by the wall clock that the fault skews, so that its step ahead ends leases early (the checker must find violations)")
	fs.BoolVar(&cfg.UnsafeJournal, "unsafe-journal", false, "with bitflip, lose-unsynced or restore: the embedded server acknowledges before it syncs, a damaged journal is cut at the damage without a bump, and a restore is not bumped (the checker must find violations)")
	fs.BoolVar(&cfg.UnsafeEpoch, "unsafe-epoch", false, "with --cluster: the servers skip the writer-epoch check, and two faults in three are leader-pauses (the checker must find violations)")
	fs.StringVar(&hist, "history", "", "write the history to `FILE` as JSON lines, as the run goes (and the linearizability HTML next to it on failure; with --cluster, the servers' logs fence1.log ... too); without it, they go to a temporary directory, kept only on failure")
	fs.StringVar(&reportPath, "report", "", "write the run as one self-contained HTML `FILE` (a timeline of grants, writes and faults per resource, the checkers' verdicts, the configuration), to read offline or attach to an issue")
	fs.StringVar(&progress, "progress", "auto", "`mode` of the progress on stderr: auto (a line rewritten in place on a terminal, a plain line every 5s elsewhere, none with -o json), always or never")
	addOutputFlag(fs, &out)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if out != "text" && out != "json" {
		return &usageError{fmt.Errorf("chaos: --output %q: want text or json", out)}
	}
	if progress != "auto" && progress != "always" && progress != "never" {
		return &usageError{fmt.Errorf("chaos: --progress %q: want auto, always or never", progress)}
	}
	if addr != "" {
		var err error
		if addr, err = cleanAddr(addr); err != nil {
			return err
		}
		if strings.Contains(addr, ",") {
			return &usageError{errors.New("chaos: --addr: one server, not a list (with several, use --cluster)")}
		}
		if err := chaosClientTLS(&cfg, &ccfg); err != nil {
			return err
		}
	} else {
		// Without --addr there is nothing to authenticate to: the flags
		// are an error, their environment twins are not read.
		for _, name := range []string{"auth-token", "cacert", "client-cert", "client-key"} {
			if setOnCommandLine(fs, name) {
				return &usageError{fmt.Errorf("chaos: --%s is for a server at --addr: the embedded server and --cluster have no authentication and no TLS", name)}
			}
		}
	}
	if cfg.FaultEvery <= 0 { // 0 would be chaos.Config's default
		return &usageError{fmt.Errorf("chaos: fault-every must be 10ms..1h, not %s", cfg.FaultEvery)}
	}
	if seed == 0 {
		seed = rand.Uint64()
	}
	if !faults.set {
		faults.value = strings.Join(chaos.DefaultFaults(cfg.Cluster), ",")
	}
	if strings.TrimSpace(faults.value) != "" {
		cfg.Faults = strings.Split(faults.value, ",")
	}
	binary, err := os.Executable()
	if err != nil {
		return fmt.Errorf("chaos: finding the fence binary: %w", err)
	}
	cfg.Binary, cfg.Addr, cfg.Seed, cfg.Clients, cfg.Resources, cfg.Keys = binary, addr, seed, clients, resources, keys
	// The log lines go through the progress line, which a terminal shows
	// under them, and read as fence chaos's other lines do.
	prog := newChaosProgress(std.err, progress == "always" || progress == "auto" && out == "text", cfg.Faults)
	cfg.Log = slog.New(&chaosLog{w: prog})
	// The history goes to --history, or into the directory that keeps the
	// evidence if the checker finds violations, removed otherwise; the
	// visualisation and, with --cluster, the servers' logs go next to it.
	cfg.History = hist
	evidence := ""
	if hist == "" {
		dir, err := os.MkdirTemp("", "fence-chaos-failed-")
		if err != nil {
			return fmt.Errorf("chaos: %w", err)
		}
		cfg.History, evidence = filepath.Join(dir, "history.jsonl"), dir
		defer func() {
			if evidence != "" {
				os.RemoveAll(evidence)
			}
		}()
	}
	if cfg.Cluster != "" {
		cfg.LogDir = filepath.Dir(cfg.History)
	}
	if err := cfg.Validate(); err != nil {
		return &usageError{err}
	}
	var reportFile *pendingFile
	if reportPath != "" {
		// Now, not after a run of ten minutes: a report that cannot be
		// written is an error on the command line.
		if reportFile, err = createPending(reportPath); err != nil {
			return &usageError{fmt.Errorf("chaos: --report: %w", err)}
		}
		defer reportFile.abandon()
	}
	cfg.Progress, cfg.ProgressEvery = prog.run(cfg.Duration), prog.every
	target := map[bool]string{true: ", UNSAFE storage"}[cfg.Unsafe]
	if cfg.Guard != "" {
		target = ", writes through the " + chaos.GuardStore(cfg.Guard) + " guard" + map[bool]string{true: ", UNSAFE: bypassing it"}[cfg.Unsafe]
	}
	if cfg.UnsafeJournal {
		target += ", UNSAFE journal"
	}
	if cfg.Cluster != "" {
		target = fmt.Sprintf(", cluster %s (%d fence servers)", cfg.Cluster, chaos.ClusterServers)
		if cfg.UnsafeEpoch {
			target += ", writer-epoch check OFF"
		}
	}
	if cfg.UnsafeClock {
		target += ", UNSAFE leases timed by the wall clock"
	}
	if cfg.Cluster != "" {
		fmt.Fprintf(std.err, "fence chaos: using a cluster of %d fence servers on %s, started here\n", chaos.ClusterServers, cfg.Cluster)
	} else {
		fmt.Fprintln(std.err, "fence chaos: "+demoTarget(addr))
	}
	fmt.Fprintf(std.err, "fence chaos: %s, %d clients, %d resources, ttl %s, faults %q every %s, seed %d%s\n",
		cfg.Duration, cfg.Clients, cfg.Resources, cfg.TTL, faults.value, cfg.FaultEvery, seed, target)
	res, err := chaos.Run(ctx, cfg)
	prog.finish()
	if err != nil {
		return err
	}
	began := time.Now()
	stopCheck := prog.check(began)
	rep, err := check.CheckFile(res.History, check.Options{HTMLDir: filepath.Dir(res.History), FenceOnWrite: cfg.Guard != "", Progress: prog.checked, TTL: cfg.TTL})
	stopCheck()
	if err != nil {
		return err
	}
	fmt.Fprintf(std.err, "fence chaos: checked %d operations in %s%s\n", rep.Ops, time.Since(began).Round(time.Millisecond), peakRSS())
	if hist == "" && rep.Violations() > 0 {
		// Keep the evidence: the history and its visualisation (and the
		// servers' logs, with --cluster).
		evidence, hist = "", res.History
	}
	summary := runreport.Summarize(cfg, res, &rep, hist)
	if reportFile != nil {
		summary.Report = reportPath
		in := runreport.Input{Config: cfg, Faults: faults.value, Result: res, Check: &rep, Summary: summary}
		if err := runreport.WriteHTML(reportFile, in); err != nil {
			return fmt.Errorf("chaos: --report %s: %w", reportPath, err)
		}
		if err := reportFile.commit(); err != nil {
			return fmt.Errorf("chaos: --report: %w", err)
		}
	}
	if out == "json" {
		enc := json.NewEncoder(std.out)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(summary); err != nil {
			return err
		}
	} else {
		runreport.Print(std.out, summary, &rep)
	}
	switch {
	case rep.Violations() > 0:
		return &exitError{code: exitViolation, err: fmt.Errorf("chaos: %d violations (history %s)", rep.Violations(), hist)}
	case !res.FaultsBit() && len(cfg.Faults) > 0:
		return &exitError{code: exitNoBite, err: fmt.Errorf("chaos: no fault bit: the run proves nothing; run longer")}
	}
	return nil
}

// chaosClientTLS fills cfg's credentials and TLS settings for a server at
// --addr from the client flags, as the other client commands read them: the
// harness's TLS configuration, and the files, made absolute, for its
// clients.
func chaosClientTLS(cfg *chaos.Config, c *clientConfig) error {
	tc, err := c.tlsConfig()
	if err != nil {
		return &usageError{fmt.Errorf("chaos: %w", err)}
	}
	cfg.TLS = tc
	cfg.AuthToken = c.AuthToken
	for _, f := range []struct {
		dst *string
		src string
	}{
		{&cfg.CACert, c.CACert}, {&cfg.ClientCert, c.ClientCert}, {&cfg.ClientKey, c.ClientKey},
	} {
		if f.src == "" {
			continue
		}
		abs, err := filepath.Abs(f.src)
		if err != nil {
			return fmt.Errorf("chaos: %w", err)
		}
		*f.dst = abs
	}
	return nil
}

// peakRSS returns ", peak RSS N MB": this process's peak resident set size
// so far (Linux's VmHWM), the harness and the checker; "" where unknown.
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return ""
			}
			return fmt.Sprintf(", peak RSS %d MB", kb>>10)
		}
	}
	return ""
}

// faultsFlag is --faults: its value, and whether the command line or the
// environment set it (else the default depends on --cluster).
type faultsFlag struct {
	value string
	set   bool
}

func (f *faultsFlag) String() string { return f.value }

func (f *faultsFlag) Set(v string) error {
	f.value, f.set = v, true
	return nil
}

// chaosWorkerCmd is one client process of fence chaos (internal).
func chaosWorkerCmd(ctx context.Context, args []string, std stdio) error {
	var cfg chaos.WorkerConfig
	var tlsFiles clientConfig
	var seed uint64
	fs := newFlagSet("chaos-worker", "fence chaos-worker (internal: a client process of fence chaos)", "", std.out)
	fs.IntVar(&cfg.Client, "client", 0, "client index")
	fs.StringVar(&cfg.LockAddr, "lock-addr", "", "lock service URL")
	fs.StringVar(&cfg.StoreAddr, "store-addr", "", "storage URL")
	fs.IntVar(&cfg.Resources, "resources", 1, "resources")
	fs.IntVar(&cfg.Keys, "keys", 1, "keys per resource")
	fs.StringVar(&cfg.KeyPrefix, "key-prefix", "", "prefix of the keys")
	fs.DurationVar(&cfg.TTL, "ttl", time.Second, "lease TTL")
	fs.DurationVar(&cfg.Timeout, "timeout", 3*time.Second, "request timeout")
	fs.IntVar(&cfg.TxnPercent, "txn-percent", 0, "percent of transactions")
	fs.StringVar(&cfg.Workload, "workload", chaos.WorkloadLock, "lock, session, semaphore, shared or multi")
	fs.DurationVar(&cfg.Think, "think", 0, "mean pause between cycles")
	fs.Uint64Var(&seed, "seed", 0, "seed")
	fs.Int64Var(&cfg.Start, "start", 0, "run start, Unix ns")
	fs.StringVar(&cfg.ServerName, "server-name", "", "name the server's certificate is verified for")
	addTLSClientFlags(fs, &tlsFiles)
	fs.StringVar(&cfg.GuardAddr, "guard-addr", "", "host:port that reaches the guard's database (the guard's connection string is in "+chaos.GuardEnv+")")
	fs.StringVar(&cfg.GuardPrefix, "guard-prefix", "", "prefix of the run's tables")
	fs.BoolVar(&cfg.Unsafe, "unsafe", false, "write without the guard")
	// No environment twins: fence chaos gives every flag, and the user's
	// FENCE_* variables are not for its workers. The secrets come in
	// variables of their own.
	if err := parseOnce(fs, args); err != nil {
		return err
	}
	cfg.Seed = seed
	cfg.AuthToken = os.Getenv(chaos.AuthTokenEnv)
	if cfg.GuardAddr != "" {
		cfg.Guard = os.Getenv(chaos.GuardEnv)
	}
	tc, err := tlsFiles.tlsConfig()
	if err != nil {
		return &usageError{fmt.Errorf("chaos-worker: %w", err)}
	}
	cfg.TLS = tc
	return chaos.RunWorker(ctx, cfg, std.out)
}
