package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence/internal/tools/chaos"
	"github.com/fence-lock/fence/internal/tools/chaos/check"
	"github.com/fence-lock/fence/internal/tools/chaos/history"
	"github.com/fence-lock/fence/internal/tools/chaos/runreport/reporttest"
)

// TestChaos_Report runs fence chaos --report: the report draws the run's
// grants, writes and faults, counts them as -o json does, and refers to
// nothing outside itself. Seed 2 with these settings draws two pauses,
// kills and a net fault in 4 s on an idle machine, and the paused
// clients' writes fenced.
func TestChaos_Report(t *testing.T) {
	// A fault can take seconds on a loaded machine (a damaged record found
	// and repaired): a run that wrote nothing through it runs again, longer.
	var (
		path, dur, stderr, doc string
		rep                    chaosResult
		ops                    map[int64]history.Op
		faults                 []history.Fault
		classes                map[string]int
	)
	for _, dur = range []string{"4s", "8s", "16s"} {
		path = filepath.Join(t.TempDir(), "run.html")
		var code int
		rep, code, stderr = runChaos(t, "--duration", dur, "--ttl", "300ms", "--fault-every", "300ms", "--seed", "2", "--report", path)
		if code != 0 || !rep.OK {
			t.Fatalf("exit %d, report %+v", code, rep)
		}
		doc = reporttest.ReadPage(t, path)
		ops, faults = reporttest.HistoryOps(t, rep.History)
		classes = make(map[string]int)
		for _, c := range reporttest.CheckMarks(t, doc, ops, nil) {
			classes[c]++
		}
		if classes["grant"] > 0 && classes["ok"] > 0 {
			break
		}
	}
	if rep.Report != path {
		t.Errorf("report %q in the JSON, want %q", rep.Report, path)
	}
	if strings.Contains(stderr, "fence chaos: checking") || strings.Contains(stderr, "ops/s") {
		t.Errorf("progress on stderr with -o json:\n%s", stderr)
	}
	rows := reporttest.CountRows(doc)
	if rows["all"] != rep.Ops || rep.Ops != len(ops) {
		t.Errorf("the report counts %d ops, the JSON %d, the history %d", rows["all"], rep.Ops, len(ops))
	}
	for k, n := range rep.OpsByOutcome {
		if rows[k] != n {
			t.Errorf("the report counts %d %s, the JSON %d", rows[k], k, n)
		}
	}
	if classes["grant"] == 0 || classes["ok"] == 0 || classes["fenced"] != rep.Fenced {
		t.Errorf("marks drawn by class %v; want grants, accepted writes and the %d fenced", classes, rep.Fenced)
	}
	reporttest.CheckFaults(t, doc, faults, rep.Faults)
	for _, want := range []string{
		`<p class="verdict ok">ok: fencing held under every fault</p>`,
		`<section id="timeline">`, `>r0</text>`, `>r3</text>`, `>client 5</text>`,
		"fence chaos --duration " + dur + " --seed 2 --faults pause,kill,net,bitflip,lose-unsynced --fault-every 300ms --clients 6 --resources 4 --keys 2 --ttl 300ms",
		"<td>seed</td><td>2</td>", "<td>fence</td><td>" + version(),
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	for _, c := range []string{"token-order", "stale-accepted", "token-monotonic", "lost-writes", "linearizable"} {
		if !strings.Contains(doc, "<tr><td>"+c+`</td><td class="ok">ok</td>`) {
			t.Errorf("the report does not say that %s passed", c)
		}
	}
	if strings.Contains(doc, `<section id="violations">`) || strings.Contains(doc, `<section id="porcupine">`) {
		t.Error("a run without violations reports some")
	}
}

// TestChaos_ReportUnsafe: with storage that ignores tokens, the checkers
// fail, and the report lists their violations with links to the
// operations they name, drawn in the timeline, and embeds porcupine's
// visualisation.
func TestChaos_ReportUnsafe(t *testing.T) {
	path := filepath.Join(t.TempDir(), "unsafe.html")
	// A paused client's stale write may come after the run's end on a
	// loaded machine, or get no answer before it (then it is not accepted,
	// and not a violation): run longer until one is accepted, and then the
	// checkers must have found it. With --unsafe nothing refuses a stale
	// write, so every one answered is a violation.
	var rep chaosResult
	var code int
	for _, d := range []string{"5s", "10s", "20s", "40s"} {
		rep, code, _ = runChaos(t, "--duration", d, "--seed", "2", "--unsafe", "--faults", "pause", "--fault-every", "300ms", "--report", path)
		if rep.Violations > 0 {
			break
		}
		t.Logf("a run of %s: %d stale writes sent, none accepted before the end: running longer", d, rep.StaleAttempts)
	}
	if rep.StaleAttempts == 0 {
		t.Fatalf("no stale write was sent in 75 s of pauses: %+v", rep)
	}
	if code != exitViolation || rep.Violations == 0 {
		t.Fatalf("exit %d, report %+v: want violations", code, rep)
	}
	doc := reporttest.ReadPage(t, path) // every link resolves
	ops, faults := reporttest.HistoryOps(t, rep.History)
	drawn := reporttest.CheckMarks(t, doc, ops, nil)
	reporttest.CheckFaults(t, doc, faults, rep.Faults)
	if !strings.Contains(doc, fmt.Sprintf(`<p class="verdict bad">%d VIOLATIONS</p>`, rep.Violations)) {
		t.Error("the report's verdict is not the violations")
	}
	heads := reporttest.ViolationHeads(doc)
	for name, n := range rep.Checkers {
		if n > 0 && heads[name] != n {
			t.Errorf("%s: %d violations in the report, %d in the JSON", name, heads[name], n)
		}
		if n > 0 && !strings.Contains(doc, fmt.Sprintf(`<a href="#violations-%s">%d violations</a>`, name, n)) {
			t.Errorf("%s: no link from the verdict to its violations", name)
		}
	}
	// The links to operations: each leads to a highlighted mark, and the
	// culprits are there.
	links := 0
	for _, id := range reporttest.OpLinks(doc) {
		links++
		n, _ := strconv.ParseInt(id, 10, 64)
		if _, ok := drawn[n]; !ok {
			t.Errorf("the link to op %d leads to no mark", n)
		}
		if !strings.Contains(doc, `hl" id="op-`+id+`"`) {
			t.Errorf("op %d, named by a violation, is not highlighted", n)
		}
	}
	if links < rep.Checkers["stale-accepted"] {
		t.Errorf("%d links to operations for %d stale-accepted violations", links, rep.Checkers["stale-accepted"])
	}
	if strings.Contains(doc, "(not drawn)") {
		t.Error("an operation that a violation names is not drawn")
	}
	if rep.Checkers["linearizable"] > 0 {
		embedded, ok := reporttest.Embedded(t, doc)
		if !ok {
			section := doc[strings.Index(doc, `<section id="porcupine">`)+1:]
			t.Fatalf("the linearizable checker failed (visualisation %s) and the report embeds no visualisation:\n%.2000s", rep.Linearizability.HTML, section)
		}
		file, err := os.ReadFile(rep.Linearizability.HTML)
		if err != nil || !bytes.Equal(embedded, file) {
			t.Fatalf("the embedded visualisation is not porcupine's file %s (%v)", rep.Linearizability.HTML, err)
		}
	}
}

// TestChaos_Progress: fence chaos shows its progress on stderr with
// --progress always, even with -o json, the run's and then the check's;
// not with -o json alone, nor with --progress never.
func TestChaos_Progress(t *testing.T) {
	fenceBinary(t)
	args := []string{"chaos", "--duration", "1500ms", "--faults", "", "--clients", "1", "--resources", "1", "--keys", "1", "-o", "json"}
	progressLine := regexp.MustCompile(`(?m)^fence chaos: \d+\.\ds of 1\.5s \(the workload is over\)  \d+ ops  \d+ ops/s  errors \d+  fenced \d+  faults none$`)
	for _, tc := range []struct {
		mode string
		want bool
	}{{"always", true}, {"auto", false}, {"never", false}} {
		code, stdout, stderr := runFence(t.Context(), "", append(args, "--progress", tc.mode)...)
		if code != 0 || !strings.HasPrefix(stdout, "{") {
			t.Fatalf("--progress %s: exit %d, stdout %q\n%s", tc.mode, code, stdout, stderr)
		}
		got := progressLine.MatchString(stderr) && strings.Contains(stderr, "fence chaos: checking")
		if got != tc.want {
			t.Errorf("--progress %s -o json: progress shown %v, want %v:\n%s", tc.mode, got, tc.want, stderr)
		}
		if tc.want {
			// The check's progress comes before the line that sums it up.
			if i, j := strings.Index(stderr, "fence chaos: checking"), strings.Index(stderr, "fence chaos: checked "); i < 0 || j < i {
				t.Errorf("the check's progress is not before its summary:\n%s", stderr)
			}
		}
	}
}

// TestChaos_StderrOneFormat: everything fence chaos writes on stderr, its
// own lines, the progress and the log of the faults, is in one format:
// lines for people that start with "fence chaos: ", not logfmt.
func TestChaos_StderrOneFormat(t *testing.T) {
	fenceBinary(t)
	// kill restarts the server, which counts as a fault that bit.
	code, stdout, stderr := runFence(t.Context(), "", "chaos", "--duration", "2s", "--faults", "kill,net", "--fault-every", "200ms",
		"--seed", "2", "--clients", "2", "--resources", "1", "--keys", "1", "--progress", "always", "-o", "json",
		"--history", filepath.Join(t.TempDir(), "history.jsonl"))
	if code != 0 || !strings.HasPrefix(stdout, "{") {
		t.Fatalf("exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	faults := 0
	for i, line := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		if !strings.HasPrefix(line, "fence chaos: ") || strings.Contains(line, "level=") || strings.Contains(line, "msg=") {
			t.Errorf("stderr line %d is not a line of fence chaos: %q", i+1, line)
		}
		if strings.HasPrefix(line, "fence chaos: fault ") {
			faults++
		}
	}
	if faults == 0 {
		t.Errorf("no fault logged on stderr:\n%s", stderr)
	}
}

func TestRunProgress(t *testing.T) {
	s := chaos.Progress{Elapsed: 12340 * time.Millisecond, Remaining: 17660 * time.Millisecond, Ops: 4210, Errors: 12, Fenced: 3,
		Faults: map[string]int{"pause": 2, "net": 3}, Rate: 312.4}
	want := "fence chaos: 12.3s of 30s (17.7s left)  4210 ops  312 ops/s  errors 12  fenced 3  faults pause 2 kill 0 net 3"
	if got := runProgress(s, 30*time.Second, []string{"pause", "kill", "net"}); got != want {
		t.Errorf("runProgress=%q\nwant        %q", got, want)
	}
	for _, tc := range []struct {
		p       check.Progress
		elapsed time.Duration
		want    string
	}{
		{check.Progress{Ops: 65536}, 1500 * time.Millisecond, "fence chaos: checking: reading the history (65536 ops so far)  1.5s"},
		{check.Progress{Resource: "r2", Done: 2, Total: 4, Ops: 812}, 0, "fence chaos: checking r2 (3 of 4 resources, 812 ops)"},
		{check.Progress{Done: 4, Total: 4}, 2 * time.Second, "fence chaos: checked 4 of 4 resources, summing up  2.0s"},
	} {
		if got := checkProgress(tc.p, tc.elapsed); got != tc.want {
			t.Errorf("checkProgress(%+v)=%q\nwant %q", tc.p, got, tc.want)
		}
	}
}

// TestChaosLog: the harness's log reads as fence chaos's other lines: one
// line a record, the level said only when above INFO, the attributes in
// parentheses and the error last.
func TestChaosLog(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(&chaosLog{w: &b})
	log.Info("fault net at 553ms for 1ms: reset every connection")
	log.Debug("not shown")
	log.Warn("leader-pause skipped", "error", errors.New("no fence server leads"))
	log.Error("restarting a fence server failed", "server", "fence-2", "error", errors.New("exit status 1"))
	log.With("server", "fence-1").WithGroup("g").Info("stepped down, epoch 3", "reason", "lost the key", slog.Group("sub", "n", 2))
	log.Error("bitflip: the server refused to start without naming the damaged file", "said", "line 1\nline 2")
	want := `fence chaos: fault net at 553ms for 1ms: reset every connection
fence chaos: warning: leader-pause skipped: no fence server leads
fence chaos: error: restarting a fence server failed (server fence-2): exit status 1
fence chaos: stepped down, epoch 3 (server fence-1, g.reason lost the key, g.sub.n 2)
fence chaos: error: bitflip: the server refused to start without naming the damaged file (said "line 1\nline 2")
`
	if b.String() != want {
		t.Errorf("logged\n%s\nwant\n%s", b.String(), want)
	}
}

// TestChaosProgress_LogUnderLine: on a terminal, a log line blanks the
// progress line out, and the progress line comes back under it.
func TestChaosProgress_LogUnderLine(t *testing.T) {
	var b bytes.Buffer
	p := &chaosProgress{w: &b, line: &progressLine{w: &b, terminal: true}, every: time.Second}
	io.WriteString(p, "before\n") // no progress yet: written as it is
	p.show("fence chaos: 1.0s")
	io.WriteString(p, "fence chaos: fault kill at 1s for 10ms\n")
	p.finish()
	want := "before\n" + "\rfence chaos: 1.0s" + "\r                 \r" + "fence chaos: fault kill at 1s for 10ms\n" + "\rfence chaos: 1.0s" + "\r                 \r"
	if b.String() != want {
		t.Fatalf("wrote %q\nwant  %q", b.String(), want)
	}
}
