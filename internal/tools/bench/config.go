package bench

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Workload names what each client does in its loop.
type Workload string

// The workloads. Each measures what the perf anchors measure for the peers
// (etcd, Redis, ZooKeeper, PostgreSQL), so the figures compare.
const (
	// Cycle: each client loops acquire (wait_ms = Config.Wait) → fenced PUT
	// with the lease's token → release, on resource bench-<i mod M>. With
	// Resources >= Clients each client has a resource of its own. One
	// operation is one whole cycle.
	Cycle Workload = "cycle"

	// Write: each client acquires the resources it owns once (client i owns
	// every bench-j with j mod Clients == i; Resources must be >= Clients),
	// renews each lease every TTL/3, and loops fenced PUTs over them,
	// re-acquiring a resource whose write is fenced or whose lease is lost.
	// One operation is one accepted write.
	Write Workload = "write"

	// Contended: the Cycle loop with a blocking acquire (Config.Wait, e.g.
	// DefaultWait), typically with every client on one resource, so that the
	// lock is handed over from client to client. One operation is one cycle,
	// that is one acquisition; the acquire step is the wait for the lock.
	Contended Workload = "contended"
)

// Workloads lists the workloads, in the order of the help text.
var Workloads = []Workload{Cycle, Write, Contended}

// Defaults of Config and of `fence bench`.
const (
	DefaultTTL       = 10 * time.Second // lease TTL
	DefaultWait      = 10 * time.Second // acquire wait_ms of the contended workload
	DefaultValueSize = 64               // bytes per PUT
	DefaultWarmup    = time.Second      // run before measuring
	DefaultTimeout   = 10 * time.Second // per request
	DefaultKey       = "bench"          // key written in each resource

	// ResourcePrefix starts every resource name: bench-0, bench-1, ...
	ResourcePrefix = "bench-"

	// MaxWait is the longest wait_ms the API accepts.
	MaxWait = 300 * time.Second
)

// Config is one benchmark run. The zero value of each field is documented;
// Addr, Workload, Clients and Duration are required.
type Config struct {
	// Addr is the base URL of the fence server, e.g. http://127.0.0.1:7700.
	Addr string
	// AuthToken, if set, is sent as a bearer token with every request.
	AuthToken string

	// Workload is what each client does: Cycle, Write or Contended.
	Workload Workload

	// Clients is the number of concurrent clients, each a goroutine with an
	// HTTP connection of its own, in a closed loop: it sends its next request
	// when the previous one is answered. At least 1.
	Clients int

	// Resources is the number of resources, bench-0 ... bench-<M-1>. Client i
	// uses bench-<i mod M> in Cycle and Contended; in Write it owns every
	// bench-j with j mod Clients == i, so Write needs Resources >= Clients.
	// Zero means Clients.
	Resources int

	// Duration is how long the run is measured, after Warmup. It must be
	// positive. The run stops earlier if the context passed to Run is
	// cancelled; the Report then covers the time measured so far.
	Duration time.Duration

	// Warmup is run before the measurement starts; what happens in it is not
	// counted, except in the safety checks. Zero means no warm-up.
	Warmup time.Duration

	// TTL is the TTL of every lease (ttl_ms), 10 ms to 24 h. Zero means
	// DefaultTTL.
	TTL time.Duration

	// Wait is how long an acquire waits in the server's queue (wait_ms), up to
	// MaxWait. Zero means acquires do not wait: a held lock answers
	// lock_held at once. Contended wants a wait, e.g. DefaultWait.
	Wait time.Duration

	// ValueSize is the size in bytes of the value of every PUT. Zero means
	// empty values.
	ValueSize int

	// Timeout bounds each request; an acquire gets Timeout + Wait. A request
	// that runs out counts as a "timeout" error. Zero means DefaultTimeout.
	Timeout time.Duration

	// Key is the key written in each resource; it may contain '/'. Empty
	// means DefaultKey.
	Key string

	// Holder prefixes the holder names: client i is Holder + "-" + i. Empty
	// means "bench-" and a random suffix, so that two runs never share a
	// holder.
	Holder string

	// Progress, if not nil, is called about every ProgressInterval from one
	// goroutine while the run lasts, with the counts so far.
	Progress func(Progress)

	// ProgressInterval is the period of Progress. Zero means one second.
	ProgressInterval time.Duration
}

// Progress is a snapshot of a run, passed to Config.Progress.
type Progress struct {
	// Warmup is true while the run is warming up; Elapsed then counts from
	// the start of the warm-up, and Ops and Errors are zero.
	Warmup bool

	// Elapsed is the time measured so far.
	Elapsed time.Duration

	// Ops is the number of operations completed in the measured time.
	Ops int64

	// Errors is the number of errors counted in the measured time.
	Errors int64

	// Remaining is the time left until the end of the run: of the warm-up
	// and then Duration while Warmup, of Duration after.
	Remaining time.Duration

	// Rate is the number of operations per second since the previous
	// Progress (or the start of the measurement): the current throughput,
	// not the average. It is zero while Warmup.
	Rate float64
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Resources == 0 {
		c.Resources = c.Clients
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Key == "" {
		c.Key = DefaultKey
	}
	if c.ProgressInterval == 0 {
		c.ProgressInterval = time.Second
	}
	return c
}

// Validate reports the first setting of c that cannot work, naming it as
// the flag of `fence bench` does (--clients, not Clients).
func (c *Config) Validate() error {
	d := c.withDefaults()
	if d.Addr == "" {
		return errors.New("--addr is empty")
	}
	u, err := url.Parse(d.Addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %w", d.Addr, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--addr %q: want a base URL such as http://127.0.0.1:7700", d.Addr)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("--addr %q: want a base URL without query or fragment", d.Addr)
	}
	switch d.Workload {
	case Cycle, Write, Contended:
	default:
		return fmt.Errorf("--workload %q: want %s", d.Workload, workloadList())
	}
	switch {
	case d.Clients < 1:
		return fmt.Errorf("--clients %d: want at least 1", d.Clients)
	case d.Resources < 1:
		return fmt.Errorf("--resources %d: want at least 1", d.Resources)
	case d.Workload == Write && d.Resources < d.Clients:
		return fmt.Errorf("--resources %d: the write workload holds each resource's lease for the whole run, so it needs at least one resource per client (%d)", d.Resources, d.Clients)
	case d.Duration <= 0:
		return fmt.Errorf("--duration %s: want a positive duration", d.Duration)
	case d.Warmup < 0:
		return fmt.Errorf("--warmup %s: must not be negative", d.Warmup)
	case d.TTL < 10*time.Millisecond || d.TTL > 24*time.Hour:
		return fmt.Errorf("--ttl %s: want 10ms to 24h", d.TTL)
	case d.Wait < 0 || d.Wait > MaxWait:
		return fmt.Errorf("--wait %s: want 0 to %s", d.Wait, MaxWait)
	case d.ValueSize < 0:
		return fmt.Errorf("--value-size %d: must not be negative", d.ValueSize)
	case d.Timeout < 0:
		return fmt.Errorf("--timeout %s: want a positive duration", d.Timeout)
	case d.ProgressInterval < 0:
		return fmt.Errorf("progress interval %s: must not be negative", d.ProgressInterval)
	}
	for _, seg := range strings.Split(d.Key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("--key %q: empty, '.' and '..' segments are not allowed", d.Key)
		}
	}
	return nil
}

func workloadList() string {
	s := make([]string, len(Workloads))
	for i, w := range Workloads {
		s[i] = string(w)
	}
	return strings.Join(s, ", ")
}
