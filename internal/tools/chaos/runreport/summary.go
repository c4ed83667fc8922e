package runreport

import (
	"fmt"
	"io"
	"slices"

	"github.com/fence-lock/fence/internal/tools/chaos"
	"github.com/fence-lock/fence/internal/tools/chaos/check"
)

// Summary is the JSON form of a run's report.
type Summary struct {
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
	Takeovers       int                   `json:"takeovers"`
	UnnamedRefusals int                   `json:"unnamed_refusals"`
	UnsafeJournal   bool                  `json:"unsafe_journal,omitempty"`
	UnsafeClock     bool                  `json:"unsafe_clock,omitempty"`
	Cluster         string                `json:"cluster,omitempty"`
	Guard           bool                  `json:"guard,omitempty"`
	GuardStore      string                `json:"guard_store,omitempty"` // "PostgreSQL" or "S3", with Guard
	UnsafeEpoch     bool                  `json:"unsafe_epoch,omitempty"`
	Accepted        int                   `json:"accepted"`
	Fenced          int                   `json:"fenced"`
	StaleAttempts   int                   `json:"stale_attempts"` // writes invoked with a token below one already granted
	Violations      int                   `json:"violations"`
	LostAckedWrites int                   `json:"lost_acked_writes"`
	Checkers        map[string]int        `json:"checkers"`
	Linearizability check.Linearizability `json:"linearizability"`
	FaultsBit       bool                  `json:"faults_bit"`
	History         string                `json:"history,omitempty"`
	Report          string                `json:"report,omitempty"` // --report
}

func Summarize(cfg chaos.Config, res *chaos.Result, rep *check.Report, hist string) Summary {
	s := Summary{
		Unsafe: cfg.Unsafe, Seed: cfg.Seed, DurationS: res.Duration.Seconds(), Ops: res.Ops, Guard: cfg.Guard != "", GuardStore: chaos.GuardStore(cfg.Guard),
		OpsByOutcome: rep.Counts, Faults: map[string]int{}, PausesPastTTL: res.PausesPastTTL,
		FencedByPauses: res.FencedByPauses, ServerRestarts: res.ServerRestarts, Takeovers: res.Takeovers,
		UnnamedRefusals: res.UnnamedRefusals, UnsafeJournal: cfg.UnsafeJournal, UnsafeClock: cfg.UnsafeClock,
		Cluster: cfg.Cluster, UnsafeEpoch: cfg.UnsafeEpoch, Accepted: rep.Accepted,
		Fenced: rep.Fenced, StaleAttempts: rep.StaleAttempts, Violations: rep.Violations(), LostAckedWrites: rep.LostAckedWrites,
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
	s.OK = s.Violations == 0 && s.UnnamedRefusals == 0 && (s.FaultsBit || len(cfg.Faults) == 0)
	return s
}

func Print(w io.Writer, s Summary, rep *check.Report) {
	target := map[bool]string{true: ", UNSAFE storage"}[s.Unsafe]
	if s.Guard {
		target = ", through the " + s.GuardStore + " guard" + map[bool]string{true: ", UNSAFE: bypassing it"}[s.Unsafe]
	}
	if s.UnsafeJournal {
		target += ", UNSAFE journal"
	}
	if s.Cluster != "" {
		target = ", cluster " + s.Cluster + map[bool]string{true: ", writer-epoch check OFF"}[s.UnsafeEpoch]
	}
	if s.UnsafeClock {
		target += ", UNSAFE leases timed by the wall clock"
	}
	fmt.Fprintf(w, "fence chaos report (seed %d, %.1fs%s)\n", s.Seed, s.DurationS, target)
	fmt.Fprintf(w, "  operations  %d\n", s.Ops)
	keys := make([]string, 0, len(s.OpsByOutcome))
	for k := range s.OpsByOutcome {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "    %-18s %d\n", k, s.OpsByOutcome[k])
	}
	if s.Cluster == "" {
		fmt.Fprintf(w, "  faults      pause %d (past the TTL: %d, their writes fenced: %d), kill %d, net %d\n",
			s.Faults["pause"], s.PausesPastTTL, s.FencedByPauses, s.Faults["kill"], s.Faults["net"])
		fmt.Fprintf(w, "              bitflip %d (refused without naming the file: %d), lose-unsynced %d, restore %d, clock-skew %d\n",
			s.Faults[chaos.FaultBitflip], s.UnnamedRefusals, s.Faults[chaos.FaultLoseUnsynced], s.Faults[chaos.FaultRestore], s.Faults[chaos.FaultClockSkew])
	} else {
		fmt.Fprintf(w, "  faults      pause %d (past the TTL: %d, their writes fenced: %d), net %d, clock-skew %d\n",
			s.Faults["pause"], s.PausesPastTTL, s.FencedByPauses, s.Faults["net"], s.Faults[chaos.FaultClockSkew])
		fmt.Fprintf(w, "              leader-kill %d (restarted: %d), leader-pause %d (taken over meanwhile: %d), engine-kill %d, engine-net %d\n",
			s.Faults[chaos.FaultLeaderKill], s.ServerRestarts, s.Faults[chaos.FaultLeaderPause], s.Takeovers,
			s.Faults[chaos.FaultEngineKill], s.Faults[chaos.FaultEngineNet])
	}
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
	if s.Report != "" {
		fmt.Fprintf(w, "  report                    %s\n", s.Report)
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
