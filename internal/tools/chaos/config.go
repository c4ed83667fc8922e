package chaos

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Fault kinds.
const (
	FaultPause = "pause" // SIGSTOP a client between its acquire and its write, for longer than its TTL and until its resource was granted again
	FaultKill  = "kill"  // kill -9 the server and restart it on the same data (embedded server only)
	FaultNet   = "net"   // latency, resets, refused connections and black-holes through the proxy

	// The faults of the embedded server's journal.
	FaultBitflip      = "bitflip"       // kill -9, flip a byte of a log segment or snapshot, restart: refused (then the flip is undone) or intact
	FaultLoseUnsynced = "lose-unsynced" // kill -9 and lose what the journal wrote past its last sync, as a power cut would
	FaultRestore      = "restore"       // back the store up (kill -9, copy, restart); the next time restore that backup and fence bump it

	// FaultClockSkew steps one fence server's wall clock ahead, strobes it
	// and sets it right, through fence serve --test-clock-file.
	FaultClockSkew = "clock-skew"

	// The faults of a cluster (Config.Cluster).
	FaultLeaderKill  = "leader-kill"  // kill -9 the leading fence server; restart it on its port after a while
	FaultLeaderPause = "leader-pause" // SIGSTOP the leading fence server past the election TTL, then SIGCONT
	FaultEngineKill  = "engine-kill"  // kill -9 etcd's Raft leader and restart it; postgres: kill the primary, promote the standby (once)
	FaultEngineNet   = "engine-net"   // net's faults between the fence servers and the engine's nodes, through proxies
	FaultPartition   = "partition"    // partial partitions between fence servers and engine nodes: one server cut from a majority, one node cut from every server
)

// DefaultFaultEvery is the mean quiet gap between two faults, unless
// Config.FaultEvery says otherwise: each gap is drawn from 0.4 to 1.6 times
// it, 0.5 to 2 s.
const DefaultFaultEvery = 1250 * time.Millisecond

// AuthTokenEnv is the environment variable that carries Config.AuthToken to
// the client processes (not a flag: flags show in ps).
const AuthTokenEnv = "FENCE_CHAOS_AUTH_TOKEN"

// GuardEnv is the environment variable that carries Config.Guard to the
// client processes (it may hold a password).
const GuardEnv = "FENCE_CHAOS_GUARD"

// Config configures a run.
type Config struct {
	Binary string // the fence binary: clients and the embedded server run it
	// Addr is a running fence server's base URL, http:// or https://; ""
	// runs an embedded one.
	Addr string
	// History is the file the run writes its history to, as JSON lines
	// (package history), as the operations arrive: the run holds none of
	// them in memory. Required.
	History    string
	Duration   time.Duration // how long the workload runs
	Clients    int           // client processes
	Resources  int           // resources
	Keys       int           // keys per resource
	TTL        time.Duration // lease TTL of the clients
	Seed       uint64        // the fault schedule and the workload derive from it
	Faults     []string      // kinds to inject: the Fault constants (see DefaultFaults)
	TxnPercent int           // share of client cycles that are two-resource transactions
	Workload   string        // WorkloadLock ("" too) or WorkloadSession
	Think      time.Duration // mean pause between a client's cycles (the checker's work grows fast with history size)
	// FaultEvery is the mean quiet gap between the end of a fault and the
	// start of the next; each gap is drawn uniformly from 0.4 to 1.6 times
	// it. 0 means DefaultFaultEvery.
	FaultEvery time.Duration
	// Unsafe runs the storage on a store that does not check fences; with
	// Guard, the clients write to PostgreSQL without the guard.
	Unsafe bool
	// UnsafeJournal is the negative control of the journal's faults (the
	// embedded server only): the server acknowledges before it syncs, so
	// lose-unsynced loses acknowledged changes, and a journal that
	// bitflip damaged is cut at the damage, without a bump, as a journal
	// that took damage for the end of its log did, and a restore is not
	// bumped. The checkers must find violations.
	UnsafeJournal bool
	// UnsafeClock is the negative control of clock-skew: the servers time
	// their leases by the wall clock that the fault skews, so that its step
	// ahead ends leases early. The checkers must find violations.
	UnsafeClock bool
	Log         *slog.Logger // progress: one line per fault; nil: none
	// Progress, when not nil, receives a snapshot of the run every
	// ProgressEvery, on a goroutine of Run's, from the start of the
	// workload until the history is complete (after the final reads);
	// never after Run returns. A slow Progress delays the next snapshot,
	// not the run.
	Progress func(Progress)
	// ProgressEvery is the interval between two snapshots; 0 means 1s.
	ProgressEvery time.Duration

	// AuthToken is the bearer token sent to the fence server at Addr by
	// the clients and the harness; "" sends none.
	AuthToken string
	// TLS is the harness's TLS configuration for an https Addr (its final
	// reads); nil: the system's roots. CACert, ClientCert and ClientKey are
	// the PEM files the clients load for theirs (the caller builds TLS from
	// the same files); "" each: none. The clients reach the server through
	// a proxy on loopback, and verify its certificate for Addr's host.
	TLS                           *tls.Config
	CACert, ClientCert, ClientKey string

	// Guard, a PostgreSQL connection string (pgx's: a URL or key=value
	// pairs), makes the clients write to that database through fence's
	// PostgreSQL guard (package postgres), with the tokens of the leases
	// they take from fence, instead of to fence's storage: the run creates
	// a fence table, a data table and a sequence of its own there, named
	// fence_chaos_<random>_..., and drops them at the end. An S3 location,
	// s3://BUCKET[/PREFIX]?endpoint=http://HOST:PORT (package guard/s3's
	// ParseLocation), makes them write to that bucket through the S3 guard,
	// each resource a manifest of the guard's, under PREFIX/fence-chaos-
	// <random>/, which the run leaves behind; the run checks the endpoint
	// first (Check), and its cycles write one resource each (S3 commits no
	// two manifests at once: TxnPercent is 0, and the multi workload is
	// refused). The clients reach the database or the endpoint through a
	// proxy on loopback, which the net fault acts on. "" (the default):
	// fence's storage.
	Guard string

	// Cluster, ClusterEtcd or ClusterPostgres, makes the run start that
	// engine and ClusterServers fence servers on it, all on loopback, and
	// test them; "" (the default) tests one server (embedded, or Addr).
	Cluster string
	// ElectionTTL is the servers' --election-ttl, with Cluster; 0 (the
	// default) leaves theirs (2s). leader-pause outlasts it.
	ElectionTTL time.Duration
	// UnsafeEpoch starts the servers with --unsafe-skip-epoch-check, with
	// Cluster: a deposed leader's commits go through, and the checker must
	// find violations. The schedule then favours leader-pause.
	UnsafeEpoch bool
	// LogDir, with Cluster, receives the servers' logs (fence1.log ...),
	// which stay there; "" (the default): in the run's temporary
	// directory, removed at the end.
	LogDir string
}

// electionTTL returns the servers' election TTL: etcd's leases count whole
// seconds, at least 2 (as etcd.Store rounds it).
func (c *Config) electionTTL() time.Duration {
	d := c.ElectionTTL
	if d <= 0 {
		d = defaultElectionTTL
	}
	if c.Cluster == ClusterEtcd {
		d = max(2*time.Second, (d+time.Second-1)/time.Second*time.Second)
	}
	return d
}

// The workloads of the clients.
const (
	// WorkloadLock: each lease is kept alive by its own TTL (the cycles are
	// shorter than it).
	WorkloadLock = "lock"
	// WorkloadSession: each client keeps one session open, renewed every
	// TTL/3 and opened again once lost, and acquires every lease in it, so
	// that a paused client's session, and every lease in it, expires at
	// once.
	WorkloadSession = "session"
	// WorkloadSemaphore: each cycle takes one of the SemaphoreLimit permits
	// of its resource, and reads and writes the keys of the permit's slot
	// resource with the slot's token.
	WorkloadSemaphore = "semaphore"
	// WorkloadShared: half of the cycles hold their resource shared and
	// write, with the group's token, the client's own key of it (so that
	// holders writing at once write different keys); the others hold it
	// exclusively, as WorkloadLock does.
	WorkloadShared = "shared"
	// WorkloadMulti: every cycle takes two resources at once, all or
	// nothing (POST /v1/locks), and writes both in one txn; after a refused
	// multi-acquire the client looks at both locks, which it must not hold.
	WorkloadMulti = "multi"
)

// SemaphoreLimit is the limit of the semaphores of WorkloadSemaphore.
const SemaphoreLimit = 2

// Workloads are the workloads a run may have.
var Workloads = []string{WorkloadLock, WorkloadSession, WorkloadSemaphore, WorkloadShared, WorkloadMulti}

// Validate checks c and fills defaults.
func (c *Config) Validate() error {
	if c.FaultEvery == 0 {
		c.FaultEvery = DefaultFaultEvery
	}
	switch {
	case c.Binary == "":
		return errors.New("chaos: no fence binary")
	case c.History == "":
		return errors.New("chaos: no history file")
	case c.Duration <= 0:
		return fmt.Errorf("chaos: duration must be positive, not %s", c.Duration)
	case c.Clients < 1 || c.Clients > 64:
		return fmt.Errorf("chaos: clients must be 1..64, not %d", c.Clients)
	case c.Resources < 1 || c.Resources > 1000:
		return fmt.Errorf("chaos: resources must be 1..1000, not %d", c.Resources)
	case c.TTL < 100*time.Millisecond || c.TTL > time.Minute:
		return fmt.Errorf("chaos: ttl must be 100ms..1m, not %s", c.TTL)
	case c.FaultEvery < 10*time.Millisecond || c.FaultEvery > time.Hour:
		return fmt.Errorf("chaos: fault-every must be 10ms..1h, not %s", c.FaultEvery)
	case c.Workload != "" && !slices.Contains(Workloads, c.Workload):
		return fmt.Errorf("chaos: unknown workload %q (want one of %s)", c.Workload, strings.Join(Workloads, ", "))
	case c.Workload == WorkloadMulti && c.Resources < 2:
		return fmt.Errorf("chaos: the %s workload takes two resources at once: it needs --resources 2 or more", c.Workload)
	case (c.Workload == WorkloadSemaphore || c.Workload == WorkloadShared) && c.Guard != "":
		return fmt.Errorf("chaos: the %s workload writes fence's own storage: it does not run with a guard", c.Workload)
	case c.FaultEvery*2/5 >= c.Duration && len(c.Faults) > 0:
		return fmt.Errorf("chaos: fault-every %s: its shortest gap, %s, is not shorter than the duration %s, so no fault would come (--faults '' runs none)", c.FaultEvery, c.FaultEvery*2/5, c.Duration)
	}
	if err := c.validateCluster(); err != nil {
		return err
	}
	if err := c.validateTarget(); err != nil {
		return err
	}
	for _, f := range c.Faults {
		switch {
		case f == FaultPause, f == FaultNet, f == FaultClockSkew:
		case f == FaultKill && c.Cluster != "":
			return errors.New("chaos: the kill fault restarts the embedded server, and --cluster has none; leader-kill is its twin in a cluster")
		case f == FaultKill, f == FaultBitflip, f == FaultLoseUnsynced, f == FaultRestore:
			if c.Addr != "" || c.Cluster != "" {
				return fmt.Errorf("chaos: the %s fault needs the embedded server (it kills and restarts it); drop it with --faults pause,net", f)
			}
		case isClusterFault(f):
			if c.Cluster == "" {
				return fmt.Errorf("chaos: the %s fault needs a cluster: add --cluster etcd or --cluster postgres", f)
			}
		default:
			return fmt.Errorf("chaos: unknown fault %q (want pause, kill, net, bitflip, lose-unsynced, restore, clock-skew; with --cluster pause, net, clock-skew, leader-kill, leader-pause, engine-kill, engine-net, partition)", f)
		}
	}
	if c.UnsafeJournal && (c.Addr != "" || c.Cluster != "" || !slices.Contains(c.Faults, FaultBitflip) && !slices.Contains(c.Faults, FaultLoseUnsynced) && !slices.Contains(c.Faults, FaultRestore)) {
		return errors.New("chaos: --unsafe-journal is the negative control of the embedded server's bitflip, lose-unsynced and restore faults: run it with one of them, without --addr and --cluster")
	}
	switch {
	case slices.Contains(c.Faults, FaultRestore) && (c.Guard != "" || c.Unsafe):
		return errors.New("chaos: the restore fault backs up and restores fence's own store, which --guard and --unsafe do not write to: drop restore")
	case slices.Contains(c.Faults, FaultClockSkew) && c.Addr != "":
		return errors.New("chaos: the clock-skew fault skews the clock of a server the run starts: drop --addr, or drop clock-skew")
	case c.UnsafeClock && !slices.Contains(c.Faults, FaultClockSkew):
		return errors.New("chaos: --unsafe-clock is the negative control of the clock-skew fault: run it with --faults clock-skew")
	}
	if c.Keys < 1 {
		c.Keys = 2
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// validateCluster checks the settings of a cluster run.
func (c *Config) validateCluster() error {
	switch {
	case c.Cluster != "" && c.Cluster != ClusterEtcd && c.Cluster != ClusterPostgres:
		return fmt.Errorf("chaos: cluster %q: want etcd or postgres", c.Cluster)
	case c.Cluster != "" && c.Addr != "":
		return errors.New("chaos: --cluster starts the servers it tests; drop --addr")
	case c.Cluster != "" && c.Unsafe:
		return errors.New("chaos: --unsafe replaces the storage that --cluster tests; the cluster's negative control is --unsafe-epoch")
	case c.Cluster == "" && c.UnsafeEpoch:
		return errors.New("chaos: --unsafe-epoch needs --cluster etcd or --cluster postgres")
	case c.Cluster == "" && c.ElectionTTL != 0:
		return errors.New("chaos: --election-ttl needs --cluster etcd or --cluster postgres")
	case c.ElectionTTL != 0 && (c.ElectionTTL < time.Second || c.ElectionTTL > time.Minute):
		return fmt.Errorf("chaos: election ttl must be 1s..1m, not %s", c.ElectionTTL)
	}
	return nil
}

// validateTarget checks Addr, the credentials and Guard.
func (c *Config) validateTarget() error {
	if c.Addr != "" {
		u, err := url.Parse(c.Addr)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("chaos: --addr %q: want http://host:port or https://host:port", c.Addr)
		}
	}
	remote := c.Addr != ""
	switch {
	case !remote && (c.AuthToken != "" || c.TLS != nil || c.CACert != "" || c.ClientCert != "" || c.ClientKey != ""):
		return errors.New("chaos: --auth-token, --cacert, --client-cert and --client-key are for a server at --addr; the embedded server and --cluster have no authentication and no TLS")
	case c.Guard != "" && c.Cluster != "":
		return errors.New("chaos: --guard takes the leases from one fence server (embedded, or --addr), not from --cluster")
	}
	switch {
	case isS3Guard(c.Guard):
		if _, _, err := parseS3Guard(c.Guard); err != nil {
			return err
		}
		if c.Workload == WorkloadMulti {
			return errors.New("chaos: the multi workload writes two resources in one transaction, which the S3 guard cannot (it commits one resource's manifest at a time)")
		}
		c.TxnPercent = 0 // no commit across two manifests
	case c.Guard != "":
		if _, err := pgxpool.ParseConfig(c.Guard); err != nil {
			return fmt.Errorf("chaos: --guard: %w", err)
		}
	}
	return nil
}
