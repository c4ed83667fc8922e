package runreport

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fence-lock/fence/internal/tools/chaos"
)

// Verdict is the run's verdict in a few words, as the text report's
// last line.
func Verdict(s Summary) string {
	switch {
	case s.Violations > 0:
		return fmt.Sprintf("%d VIOLATIONS", s.Violations)
	case !s.FaultsBit && len(s.Faults) > 0:
		return "no fault bit: the run proves nothing"
	case !s.FaultsBit:
		return "ok, without faults"
	}
	return "ok: fencing held under every fault"
}

// Target says what the run tested.
func Target(cfg chaos.Config) string {
	var t string
	switch {
	case cfg.Cluster != "":
		t = fmt.Sprintf("cluster on %s (%d fence servers)", cfg.Cluster, chaos.ClusterServers)
		if cfg.UnsafeEpoch {
			t += ", writer-epoch check OFF"
		}
		return t
	case cfg.Addr != "":
		t = "the fence server at " + cfg.Addr
	default:
		t = "an embedded fence server"
	}
	if cfg.Guard != "" {
		t += ", writes through the " + chaos.GuardStore(cfg.Guard) + " guard"
		if cfg.Unsafe {
			t += ", UNSAFE: bypassing it"
		}
	} else if cfg.Unsafe {
		t += ", UNSAFE storage"
	}
	return t
}

// ReplayCommand is a command line that runs the same schedule again. It
// records no secret: the guard's connection string and the bearer token
// are left to their environment variables.
func ReplayCommand(in Input) string {
	cfg := in.Config
	var env []string
	args := []string{"fence", "chaos"}
	if cfg.Addr != "" {
		args = append(args, "--addr", cfg.Addr)
		if cfg.AuthToken != "" {
			env = append(env, "FENCE_AUTH_TOKEN=…")
		}
		for _, f := range []struct{ flag, file string }{{"--cacert", cfg.CACert}, {"--client-cert", cfg.ClientCert}, {"--client-key", cfg.ClientKey}} {
			if f.file != "" {
				args = append(args, f.flag, shellQuote(f.file))
			}
		}
	}
	if cfg.Guard != "" {
		env = append(env, "FENCE_GUARD=…")
	}
	if cfg.Cluster != "" {
		args = append(args, "--cluster", cfg.Cluster)
		if cfg.ElectionTTL != 0 {
			args = append(args, "--election-ttl", cfg.ElectionTTL.String())
		}
		if cfg.UnsafeEpoch {
			args = append(args, "--unsafe-epoch")
		}
	}
	args = append(args, "--duration", cfg.Duration.String(), "--seed", strconv.FormatUint(cfg.Seed, 10),
		"--faults", shellQuote(in.Faults), "--fault-every", cfg.FaultEvery.String(),
		"--clients", strconv.Itoa(cfg.Clients), "--resources", strconv.Itoa(cfg.Resources), "--keys", strconv.Itoa(cfg.Keys),
		"--ttl", cfg.TTL.String(), "--txn-percent", strconv.Itoa(cfg.TxnPercent), "--think", cfg.Think.String())
	if cfg.Workload != "" && cfg.Workload != chaos.WorkloadLock {
		args = append(args, "--workload", cfg.Workload)
	}
	for _, f := range []struct {
		on   bool
		flag string
	}{{cfg.Unsafe, "--unsafe"}, {cfg.UnsafeJournal, "--unsafe-journal"}, {cfg.UnsafeClock, "--unsafe-clock"}} {
		if f.on {
			args = append(args, f.flag)
		}
	}
	return strings.Join(append(env, args...), " ")
}

// shellQuote quotes s for a POSIX shell, if it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,/:=+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
