package main

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence/internal/tools/chaos"
	"github.com/fence-lock/fence/internal/tools/chaos/check"
	"github.com/fence-lock/fence/internal/tools/chaos/history"
	htmlreport "github.com/fence-lock/fence/internal/tools/report"
)

var (
	crMarkRE       = regexp.MustCompile(`<g class="m (grant|ok|fenced|unknown|other)( hl)?" id="op-(\d+)"><title>([^<]*)</title>`)
	crAnyMarkRE    = regexp.MustCompile(`<g class="m (grant|ok|fenced|unknown|other)( hl)?"[ >]`)
	crSpanRE       = regexp.MustCompile(`<g class="span s-(pause|kill|net|other)" id="fault-(\d+)"><title>([^<]*)</title>`)
	crIDRE         = regexp.MustCompile(`\bid="([^"]+)"`)
	crHrefRE       = regexp.MustCompile(`\bhref="#([^"]+)"`)
	crCountRowRE   = regexp.MustCompile(`<tr><td>([a-z-]+(?:/[a-z]+)?)</td><td>(\d+)</td></tr>`)
	crViolationsRE = regexp.MustCompile(`<h3 id="violations-([a-z-]+)">[a-z-]+: (\d+) violations</h3>`)
	crIframeRE     = regexp.MustCompile(`<iframe class="porcupine"[^>]* src="data:text/html;base64,([A-Za-z0-9+/=]+)"`)
)

// readChaosReport reads the report at path and checks what every report must
// be: self-contained, with unique ids, and links that resolve.
func readChaosReport(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if refs := htmlreport.ExternalReferences(b); len(refs) > 0 {
		t.Errorf("the report refers outside itself: %q", refs)
	}
	doc := string(b)
	ids := make(map[string]bool)
	for _, m := range crIDRE.FindAllStringSubmatch(doc, -1) {
		if ids[m[1]] {
			t.Errorf("id %q twice", m[1])
		}
		ids[m[1]] = true
	}
	for _, m := range crHrefRE.FindAllStringSubmatch(doc, -1) {
		if !ids[m[1]] {
			t.Errorf("the link #%s leads nowhere", m[1])
		}
	}
	return doc
}

// chaosCountRows returns the counts of the report's two-column tables of
// counts: operations by kind/outcome ("all" for the total) and faults by
// kind.
func chaosCountRows(doc string) map[string]int {
	got := make(map[string]int)
	for _, m := range crCountRowRE.FindAllStringSubmatch(doc, -1) {
		n, _ := strconv.Atoi(m[2])
		got[m[1]] = n
	}
	return got
}

// chaosHistoryOps reads the ops of a history file, by id, and its faults.
func chaosHistoryOps(t *testing.T, path string) (map[int64]history.Op, []history.Fault) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ops, faults, err := history.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	byID := make(map[int64]history.Op, len(ops))
	for _, op := range ops {
		byID[op.ID] = op
	}
	return byID, faults
}

// wantChaosMark is the class of the mark that an op is drawn with.
func wantChaosMark(op history.Op) string {
	switch {
	case op.Kind == history.KindAcquire && op.Outcome == history.OK:
		return "grant"
	case op.Mutates() && op.Outcome == history.OK:
		return "ok"
	case op.Mutates() && op.Outcome == history.Fenced:
		return "fenced"
	case op.Outcome == history.Unknown && (op.Mutates() || op.Kind == history.KindAcquire):
		return "unknown"
	}
	return "other"
}

// checkChaosMarks checks that every mark of the report is an op of the history,
// drawn as its kind and outcome say, with a tooltip that names it; that
// every fenced write of the lanes drawn (nil: all) is drawn; and that the
// marks are a bounded sample: lanes times the timeline's bound, and a few.
func checkChaosMarks(t *testing.T, doc string, ops map[int64]history.Op, lanes []string) (drawn map[int64]string) {
	t.Helper()
	drawn = make(map[int64]string)
	for _, m := range crMarkRE.FindAllStringSubmatch(doc, -1) {
		id, _ := strconv.ParseInt(m[3], 10, 64)
		op, ok := ops[id]
		if !ok {
			t.Errorf("mark op-%d: no such op in the history", id)
			continue
		}
		if want := wantChaosMark(op); m[1] != want {
			t.Errorf("op %d (%s %s) drawn as %q, want %q", id, op.Kind, op.Outcome, m[1], want)
		}
		if !strings.HasPrefix(m[4], fmt.Sprintf("op %d · %s · %s", id, clientName(op.Client), op.Kind)) {
			t.Errorf("op %d: tooltip %q", id, m[4])
		}
		if op.Kind == history.KindAcquire && op.Outcome == history.OK && !strings.Contains(m[4], fmt.Sprintf("token %d", op.Token)) {
			t.Errorf("grant %d: the tooltip %q does not name token %d", id, m[4], op.Token)
		}
		drawn[id] = m[1]
	}
	for id, op := range ops {
		inLane := lanes == nil || slices.ContainsFunc(opResources(&op), func(r string) bool { return slices.Contains(lanes, r) })
		if op.Mutates() && op.Outcome == history.Fenced && inLane && drawn[id] != "fenced" {
			t.Errorf("the fenced write op %d is not drawn", id)
		}
	}
	n, most := len(crAnyMarkRE.FindAllString(doc, -1)), 4*(htmlreport.DefaultMaxMarks+50)
	if lanes != nil {
		most = len(lanes) * (htmlreport.DefaultMaxMarks + 50)
	}
	if n == 0 || n > most {
		t.Errorf("%d marks drawn, want 1 to %d", n, most)
	}
	return drawn
}

// checkChaosFaults checks that the report draws and lists every fault of the
// history, and counts them as the JSON report does.
func checkChaosFaults(t *testing.T, doc string, faults []history.Fault, byKind map[string]int) {
	t.Helper()
	spans := crSpanRE.FindAllStringSubmatch(doc, -1)
	if len(spans) != len(faults) {
		t.Fatalf("%d faults drawn, %d in the history", len(spans), len(faults))
	}
	class := map[string]string{chaos.FaultPause: "pause", chaos.FaultKill: "kill", chaos.FaultNet: "net", chaos.FaultBitflip: "kill", chaos.FaultLoseUnsynced: "kill"}
	for i, m := range spans {
		f := faults[i]
		if m[1] != class[f.Kind] || m[2] != strconv.Itoa(i+1) || !strings.Contains(m[3], f.Kind) || !strings.Contains(m[3], esc(f.Detail)) {
			t.Errorf("fault %d (%+v) drawn as %q", i+1, f, m[0])
		}
	}
	rows := chaosCountRows(doc)
	for kind, n := range byKind {
		if rows[kind] != n {
			t.Errorf("the report counts %d %s faults, the JSON %d", rows[kind], kind, n)
		}
	}
}

// TestChaos_Report runs fence chaos --report: the report draws the run's
// grants, writes and faults, counts them as -o json does, and refers to
// nothing outside itself. Seed 2 with these settings draws two pauses,
// kills and a net fault in 4 s, and the paused clients' writes fenced.
func TestChaos_Report(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.html")
	rep, code, stderr := runChaos(t, "--duration", "4s", "--ttl", "300ms", "--fault-every", "300ms", "--seed", "2", "--report", path)
	if code != 0 || !rep.OK {
		t.Fatalf("exit %d, report %+v", code, rep)
	}
	if rep.Report != path {
		t.Errorf("report %q in the JSON, want %q", rep.Report, path)
	}
	if strings.Contains(stderr, "fence chaos: checking") || strings.Contains(stderr, "ops/s") {
		t.Errorf("progress on stderr with -o json:\n%s", stderr)
	}
	doc := readChaosReport(t, path)
	ops, faults := chaosHistoryOps(t, rep.History)

	rows := chaosCountRows(doc)
	if rows["all"] != rep.Ops || rep.Ops != len(ops) {
		t.Errorf("the report counts %d ops, the JSON %d, the history %d", rows["all"], rep.Ops, len(ops))
	}
	for k, n := range rep.OpsByOutcome {
		if rows[k] != n {
			t.Errorf("the report counts %d %s, the JSON %d", rows[k], k, n)
		}
	}
	drawn := checkChaosMarks(t, doc, ops, nil)
	classes := make(map[string]int)
	for _, c := range drawn {
		classes[c]++
	}
	if classes["grant"] == 0 || classes["ok"] == 0 || classes["fenced"] != rep.Fenced {
		t.Errorf("marks drawn by class %v; want grants, accepted writes and the %d fenced", classes, rep.Fenced)
	}
	checkChaosFaults(t, doc, faults, rep.Faults)
	for _, want := range []string{
		`<p class="verdict ok">ok: fencing held under every fault</p>`,
		`<section id="timeline">`, `>r0</text>`, `>r3</text>`, `>client 5</text>`,
		"fence chaos --duration 4s --seed 2 --faults pause,kill,net,bitflip,lose-unsynced --fault-every 300ms --clients 6 --resources 4 --keys 2 --ttl 300ms",
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
	rep, code, _ := runChaos(t, "--duration", "5s", "--seed", "2", "--unsafe", "--faults", "pause", "--fault-every", "300ms", "--report", path)
	if code != exitViolation || rep.Violations == 0 {
		t.Fatalf("exit %d, report %+v: want violations", code, rep)
	}
	doc := readChaosReport(t, path) // every link resolves
	ops, faults := chaosHistoryOps(t, rep.History)
	drawn := checkChaosMarks(t, doc, ops, nil)
	checkChaosFaults(t, doc, faults, rep.Faults)
	if !strings.Contains(doc, fmt.Sprintf(`<p class="verdict bad">%d VIOLATIONS</p>`, rep.Violations)) {
		t.Error("the report's verdict is not the violations")
	}
	heads := make(map[string]int)
	for _, m := range crViolationsRE.FindAllStringSubmatch(doc, -1) {
		heads[m[1]], _ = strconv.Atoi(m[2])
	}
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
	for _, m := range crHrefRE.FindAllStringSubmatch(doc, -1) {
		id, ok := strings.CutPrefix(m[1], "op-")
		if !ok {
			continue
		}
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
		m := crIframeRE.FindStringSubmatch(doc)
		if m == nil {
			section := doc[strings.Index(doc, `<section id="porcupine">`)+1:]
			t.Fatalf("the linearizable checker failed (visualisation %s) and the report embeds no visualisation:\n%.2000s", rep.Linearizability.HTML, section)
		}
		embedded, err := base64.StdEncoding.DecodeString(m[1])
		if err != nil {
			t.Fatal(err)
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

// TestChaosProgress_LogUnderLine: on a terminal, a log line blanks the
// progress line out, and the progress line comes back under it.
func TestChaosProgress_LogUnderLine(t *testing.T) {
	var b bytes.Buffer
	p := &chaosProgress{w: &b, line: &progressLine{w: &b, terminal: true}, every: time.Second}
	io.WriteString(p, "before\n") // no progress yet: written as it is
	p.show("fence chaos: 1.0s")
	io.WriteString(p, "level=INFO msg=fault\n")
	p.finish()
	want := "before\n" + "\rfence chaos: 1.0s" + "\r                 \r" + "level=INFO msg=fault\n" + "\rfence chaos: 1.0s" + "\r                 \r"
	if b.String() != want {
		t.Fatalf("wrote %q\nwant  %q", b.String(), want)
	}
}

// TestWriteChaosReport builds the report of a history made up for it: more
// resources than the timeline draws, a violation on the last one, and
// more operations than it keeps.
func TestWriteChaosReport(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "history.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := history.NewWriter(f)
	const resources = 15
	id := int64(1)
	add := func(op history.Op) int64 {
		op.ID = id
		id++
		if err := w.WriteOp(op); err != nil {
			t.Fatal(err)
		}
		return op.ID
	}
	ms := func(n int) int64 { return int64(n) * int64(time.Millisecond) }
	var stale int64
	for r := range resources {
		res := fmt.Sprintf("r%d", r)
		tok := uint64(0)
		cycles := 20
		if r == 0 {
			cycles = 400 // more than the timeline draws of a lane
		}
		for i := range cycles {
			tok++
			at := ms(10 * i * 400 / cycles)
			add(history.Op{Client: i % 3, Kind: history.KindAcquire, Resource: res, Token: tok, Call: at, Return: at + ms(1), Outcome: history.OK})
			add(history.Op{Client: i % 3, Kind: history.KindWrite, Resource: res, Key: "k0", Value: fmt.Sprint(i), Token: tok, Rev: uint64(i + 1), Call: at + ms(2), Return: at + ms(3), Outcome: history.OK})
			add(history.Op{Client: i % 3, Kind: history.KindRelease, Resource: res, Token: tok, Call: at + ms(4), Return: at + ms(5), Outcome: history.OK})
		}
		if r == resources-1 {
			// A write with a stale token, accepted: stale-accepted and
			// token-order must name it.
			stale = add(history.Op{Client: 7, Kind: history.KindWrite, Resource: res, Key: "k0", Value: "stale", Token: 1, Rev: 21, Call: ms(4100), Return: ms(4101), Outcome: history.OK})
		}
		add(history.Op{Client: 4, Kind: history.KindWrite, Resource: res, Key: "k0", Value: "late", Token: 2, Call: ms(4200), Return: ms(4201), Outcome: history.Fenced, Error: "fenced"})
		add(history.Op{Client: 5, Kind: history.KindWrite, Resource: res, Key: "k1", Value: "lost?", Token: 3, Call: ms(4300), Outcome: history.Unknown,
			Error: `Put "http://127.0.0.1:1/v1/resources/` + res + `/keys/k1": context deadline exceeded`})
	}
	faults := []history.Fault{
		{Kind: chaos.FaultPause, Client: 4, Start: ms(100), End: ms(4150), Detail: "SIGSTOP client-4 holding r0 token 2"},
		{Kind: chaos.FaultKill, Client: -1, Start: ms(1000), End: ms(1400), Detail: "kill -9 fence serve"},
		{Kind: chaos.FaultNet, Client: -1, Start: ms(2000), End: ms(2500), Detail: `black-hole "all" & more`},
	}
	for _, fl := range faults {
		if err := w.WriteFault(fl); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := check.CheckFile(path, check.Options{HTMLDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Result(check.StaleAccepted).Count == 0 || rep.Linearizability.HTML == "" {
		t.Fatalf("the made-up history has no stale-accepted violation: %+v", rep.Checkers)
	}
	cfg := chaos.Config{Duration: 4 * time.Second, Clients: 8, Resources: resources, Keys: 1, TTL: time.Second, Seed: 9,
		Faults: []string{"pause", "kill", "net"}, FaultEvery: time.Second, Unsafe: true, UnsafeClock: true}
	res := &chaos.Result{History: path, Ops: int(id - 1), Faults: faults, Duration: 4300 * time.Millisecond}
	in := chaosReportInput{cfg: cfg, faults: "pause,kill,net", res: res, rep: &rep, sum: chaosSummary(cfg, res, &rep, path)}
	out := filepath.Join(dir, "report.html")
	var b bytes.Buffer
	if err := writeChaosReport(&b, in); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := readChaosReport(t, out)
	// 12 lanes of 15: the one with the violation, and the first 11.
	lanes := regexp.MustCompile(`<text class="lane-name" x="4" y="[0-9.]+">(r\d+)</text>`).FindAllStringSubmatch(doc, -1)
	var names []string
	for _, m := range lanes {
		names = append(names, m[1])
	}
	want := []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r14"}
	if !slices.Equal(names, want) {
		t.Errorf("lanes %q, want %q", names, want)
	}
	ops, _ := chaosHistoryOps(t, path)
	drawn := checkChaosMarks(t, doc, ops, want)
	if !strings.Contains(doc, "The timeline draws 12 of the 15 resources of the run") {
		t.Error("the report does not say that it left resources out")
	}
	if drawn[stale] != "ok" || !strings.Contains(doc, fmt.Sprintf(`<a href="#op-%d">%d</a>`, stale, stale)) ||
		!strings.Contains(doc, fmt.Sprintf(`<g class="m ok hl" id="op-%d">`, stale)) {
		t.Errorf("the stale write op %d is not drawn highlighted and linked", stale)
	}
	// Each of the 12 drawn lanes has its fenced write; the 3 not drawn, not.
	if n := len(regexp.MustCompile(`<g class="m fenced"`).FindAllString(doc, -1)); n != 12 {
		t.Errorf("%d fenced writes drawn, want 12 (one per lane drawn)", n)
	}
	if !strings.Contains(doc, "Drawn, a uniform sample of the ordinary events: r0: 600 of 801; besides them") {
		t.Errorf("no note on the sample")
	}
	for _, want := range []string{"<td>black-hole &#34;all&#34; &amp; more</td>", "fence chaos --duration 4s --seed 9 --faults pause,kill,net", "--think 0s --unsafe --unsafe-clock</pre>"} {
		if !strings.Contains(doc, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	// Porcupine's visualisation, whose data has the errors' URLs, is
	// embedded.
	if m := crIframeRE.FindStringSubmatch(doc); m == nil {
		t.Errorf("porcupine's visualisation is not embedded: %.500s", doc[strings.Index(doc, `<section id="porcupine">`):])
	} else if b, err := base64.StdEncoding.DecodeString(m[1]); err != nil || !bytes.Contains(b, []byte("http://127.0.0.1:1/v1/resources/r14/keys/k1")) {
		t.Errorf("the embedded visualisation is not the history's (%v)", err)
	}
	// A history that cannot be read fails the report.
	in.res = &chaos.Result{History: filepath.Join(dir, "missing.jsonl")}
	if err := writeChaosReport(io.Discard, in); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing history: %v", err)
	}
}

func TestFetchesOutside(t *testing.T) {
	head := `<!doctype html><html><head><style>svg { fill: red }</style></head><body>` +
		`<svg xmlns="http://www.w3.org/2000/svg"></svg><script>const SVG_NS = 'http://www.w3.org/2000/svg'
      const data = `
	tail := "\n      render(data)\n    </script></body></html>"
	for _, tc := range []struct {
		name, doc string
		fetches   bool
	}{
		{"Porcupine", head + `[{"Metadata":"op 1: Put \"http://127.0.0.1:1/v1\": timeout"}]` + tail, false},
		{"MarkupInData", head + `[{"Metadata":"\u003cimg src=http://x.example/a.png\u003e"}]` + tail, true},
		{"ScriptFetch", strings.Replace(head, "<script>", `<script>fetch("https://x.example/d.json");`, 1) + `[]` + tail, true},
		{"ScriptSrc", strings.Replace(head, "<body>", `<body><script src="x.js"></script>`, 1) + `[]` + tail, true},
		{"AfterData", head + `[]` + strings.Replace(tail, "render(data)", `render(data); new Image().src = "http://x.example/p"`, 1), true},
		{"NoData", `<script src="http://x.example/x.js"></script>`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fetchesOutside([]byte(tc.doc))
			if (len(got) > 0) != tc.fetches {
				t.Errorf("fetchesOutside=%q, want fetches %v", got, tc.fetches)
			}
		})
	}
}

// TestChaosTimeline_FencedOverflow: when the fenced writes would take all
// the room kept out of the sample, the last of them are sampled, and the
// operation that a violation names is still drawn.
func TestChaosTimeline_FencedOverflow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := history.NewWriter(f)
	const fenced = htmlreport.DefaultMaxKept + 100
	for i := range fenced + 1 {
		op := history.Op{ID: int64(i + 1), Client: i % 4, Kind: history.KindWrite, Resource: "r0", Key: "k0", Token: 1, Call: int64(i) * 1000, Return: int64(i)*1000 + 500, Outcome: history.Fenced}
		if i == fenced {
			op.Outcome = history.OK // the last op, which a violation names
		}
		if err := w.WriteOp(op); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	named := map[int64]bool{fenced + 1: true}
	var sampled int
	tl, err := chaosTimeline(chaosReportInput{res: &chaos.Result{History: path}}, named, map[string]bool{"r0": true}, &sampled)
	if err != nil {
		t.Fatal(err)
	}
	if want := fenced - (htmlreport.DefaultMaxKept - 2); sampled != want {
		t.Errorf("%d fenced writes sampled, want %d", sampled, want)
	}
	if !tl.Has(opID(fenced+1)) || !tl.Has("op-1") || !tl.Has(opID(htmlreport.DefaultMaxKept-2)) {
		t.Error("the named op, or the first fenced writes, are not drawn")
	}
}
