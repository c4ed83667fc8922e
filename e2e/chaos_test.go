package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

type chaosJSON struct {
	OK              bool           `json:"ok"`
	Ops             int            `json:"ops"`
	Faults          map[string]int `json:"faults"`
	PausesPastTTL   int            `json:"pauses_past_ttl"`
	Accepted        int            `json:"accepted"`
	Fenced          int            `json:"fenced"`
	Violations      int            `json:"violations"`
	LostAckedWrites int            `json:"lost_acked_writes"`
	Checkers        map[string]int `json:"checkers"`
}

func runChaos(t *testing.T, args ...string) (chaosJSON, int, string) {
	t.Helper()
	hist := filepath.Join(t.TempDir(), "history.jsonl")
	cmd := exec.Command(binary, append([]string{"chaos", "-o", "json", "--history", hist}, args...)...)
	cmd.Env = append(os.Environ(), "FENCE_ADDR=")
	out, err := cmd.Output()
	var rep chaosJSON
	if jerr := json.Unmarshal(out, &rep); jerr != nil {
		t.Fatalf("fence chaos %v: %v; output %q", args, err, out)
	}
	return rep, cmd.ProcessState.ExitCode(), hist
}

// TestChaos runs the harness with every fault kind against the embedded
// server: fencing must hold (no violation, nothing acknowledged lost), and
// the faults must have bitten.
func TestChaos(t *testing.T) {
	rep, code, hist := runChaos(t, "--duration", "25s", "--seed", "1")
	t.Logf("%+v", rep)
	if code != 0 || !rep.OK || rep.Violations != 0 || rep.LostAckedWrites != 0 {
		t.Fatalf("exit %d, report %+v; history %s", code, rep, hist)
	}
	for _, kind := range []string{"pause", "kill", "net"} {
		if rep.Faults[kind] == 0 {
			t.Errorf("no %s fault was injected: %v", kind, rep.Faults)
		}
	}
	if rep.PausesPastTTL == 0 || rep.Accepted == 0 {
		t.Fatalf("the run proves nothing: %+v", rep)
	}
}

// TestChaos_Unsafe runs the same workload against storage that ignores
// fencing tokens: the checker must catch the stale writes.
func TestChaos_Unsafe(t *testing.T) {
	rep, code, _ := runChaos(t, "--duration", "12s", "--seed", "2", "--unsafe", "--faults", "pause")
	t.Logf("%+v", rep)
	if code != 7 || rep.Violations == 0 || rep.Checkers["stale-accepted"] == 0 {
		t.Fatalf("exit %d, report %+v: want violations found (exit 7)", code, rep)
	}
}
