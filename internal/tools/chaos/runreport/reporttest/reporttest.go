// Package reporttest reads the HTML report of a fence chaos run back, for
// the tests of the report and of fence chaos --report: the checks every
// report must pass, and the marks, faults, counts and links in it.
package reporttest

import (
	"encoding/base64"
	"fmt"
	"html/template"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fence-lock/fence/internal/tools/chaos"
	"github.com/fence-lock/fence/internal/tools/chaos/history"
	"github.com/fence-lock/fence/internal/tools/report"
)

var (
	markRE       = regexp.MustCompile(`<g class="m (grant|ok|fenced|unknown|other)( hl)?" id="op-(\d+)"><title>([^<]*)</title>`)
	anyMarkRE    = regexp.MustCompile(`<g class="m (grant|ok|fenced|unknown|other)( hl)?"[ >]`)
	spanRE       = regexp.MustCompile(`<g class="span s-(pause|kill|net|other)" id="fault-(\d+)"><title>([^<]*)</title>`)
	idRE         = regexp.MustCompile(`\bid="([^"]+)"`)
	hrefRE       = regexp.MustCompile(`\bhref="#([^"]+)"`)
	countRowRE   = regexp.MustCompile(`<tr><td>([a-z-]+(?:/[a-z]+)?)</td><td>(\d+)</td></tr>`)
	violationsRE = regexp.MustCompile(`<h3 id="violations-([a-z-]+)">[a-z-]+: (\d+) violations</h3>`)
	iframeRE     = regexp.MustCompile(`<iframe class="porcupine"[^>]* src="data:text/html;base64,([A-Za-z0-9+/=]+)"`)
)

// ReadPage reads the report at path and checks what every report must be:
// self-contained, with unique ids, and links that resolve.
func ReadPage(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if refs := report.ExternalReferences(b); len(refs) > 0 {
		t.Errorf("the report refers outside itself: %q", refs)
	}
	doc := string(b)
	ids := make(map[string]bool)
	for _, m := range idRE.FindAllStringSubmatch(doc, -1) {
		if ids[m[1]] {
			t.Errorf("id %q twice", m[1])
		}
		ids[m[1]] = true
	}
	for _, m := range hrefRE.FindAllStringSubmatch(doc, -1) {
		if !ids[m[1]] {
			t.Errorf("the link #%s leads nowhere", m[1])
		}
	}
	return doc
}

// CountRows returns the counts of the report's two-column tables of
// counts: operations by kind/outcome ("all" for the total) and faults by
// kind.
func CountRows(doc string) map[string]int {
	got := make(map[string]int)
	for _, m := range countRowRE.FindAllStringSubmatch(doc, -1) {
		n, _ := strconv.Atoi(m[2])
		got[m[1]] = n
	}
	return got
}

// ViolationHeads returns the number of violations that each checker's
// heading in the report's Violations section gives.
func ViolationHeads(doc string) map[string]int {
	heads := make(map[string]int)
	for _, m := range violationsRE.FindAllStringSubmatch(doc, -1) {
		heads[m[1]], _ = strconv.Atoi(m[2])
	}
	return heads
}

// OpLinks returns the ids of the operations that the report links to.
func OpLinks(doc string) []string {
	var ids []string
	for _, m := range hrefRE.FindAllStringSubmatch(doc, -1) {
		if id, ok := strings.CutPrefix(m[1], "op-"); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// Embedded returns porcupine's visualisation as the report embeds it, and
// whether it does.
func Embedded(t testing.TB, doc string) ([]byte, bool) {
	t.Helper()
	m := iframeRE.FindStringSubmatch(doc)
	if m == nil {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(m[1])
	if err != nil {
		t.Fatalf("the embedded visualisation: %v", err)
	}
	return b, true
}

// HistoryOps reads the ops of a history file, by id, and its faults.
func HistoryOps(t testing.TB, path string) (map[int64]history.Op, []history.Fault) {
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

// wantMark is the class of the mark that an op is drawn with.
func wantMark(op history.Op) string {
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

// rowName is the timeline's row of a client: "client N", or "harness".
func rowName(c int) string {
	if c < 0 {
		return "harness"
	}
	return fmt.Sprintf("client %d", c)
}

// CheckMarks checks that every mark of the report is an op of the history,
// drawn as its kind and outcome say, with a tooltip that names it; that
// every fenced write of the lanes drawn (nil: all) is drawn; and that the
// marks are a bounded sample: lanes times the timeline's bound, and a few.
// It returns the class of each op drawn.
func CheckMarks(t testing.TB, doc string, ops map[int64]history.Op, lanes []string) (drawn map[int64]string) {
	t.Helper()
	drawn = make(map[int64]string)
	for _, m := range markRE.FindAllStringSubmatch(doc, -1) {
		id, _ := strconv.ParseInt(m[3], 10, 64)
		op, ok := ops[id]
		if !ok {
			t.Errorf("mark op-%d: no such op in the history", id)
			continue
		}
		if want := wantMark(op); m[1] != want {
			t.Errorf("op %d (%s %s) drawn as %q, want %q", id, op.Kind, op.Outcome, m[1], want)
		}
		if !strings.HasPrefix(m[4], fmt.Sprintf("op %d · %s · %s", id, rowName(op.Client), op.Kind)) {
			t.Errorf("op %d: tooltip %q", id, m[4])
		}
		if op.Kind == history.KindAcquire && op.Outcome == history.OK && !strings.Contains(m[4], fmt.Sprintf("token %d", op.Token)) {
			t.Errorf("grant %d: the tooltip %q does not name token %d", id, m[4], op.Token)
		}
		drawn[id] = m[1]
	}
	for id, op := range ops {
		inLane := lanes == nil || slices.ContainsFunc(op.Resources(), func(r string) bool { return slices.Contains(lanes, r) })
		if op.Mutates() && op.Outcome == history.Fenced && inLane && drawn[id] != "fenced" {
			t.Errorf("the fenced write op %d is not drawn", id)
		}
	}
	n, most := len(anyMarkRE.FindAllString(doc, -1)), 4*(report.DefaultMaxMarks+50)
	if lanes != nil {
		most = len(lanes) * (report.DefaultMaxMarks + 50)
	}
	if n == 0 || n > most {
		t.Errorf("%d marks drawn, want 1 to %d", n, most)
	}
	return drawn
}

// CheckFaults checks that the report draws and lists every fault of the
// history, and counts them as byKind (the JSON summary's) does.
func CheckFaults(t testing.TB, doc string, faults []history.Fault, byKind map[string]int) {
	t.Helper()
	spans := spanRE.FindAllStringSubmatch(doc, -1)
	if len(spans) != len(faults) {
		t.Fatalf("%d faults drawn, %d in the history", len(spans), len(faults))
	}
	class := map[string]string{chaos.FaultPause: "pause", chaos.FaultKill: "kill", chaos.FaultNet: "net", chaos.FaultBitflip: "kill", chaos.FaultLoseUnsynced: "kill"}
	for i, m := range spans {
		f := faults[i]
		if m[1] != class[f.Kind] || m[2] != strconv.Itoa(i+1) || !strings.Contains(m[3], f.Kind) || !strings.Contains(m[3], template.HTMLEscapeString(f.Detail)) {
			t.Errorf("fault %d (%+v) drawn as %q", i+1, f, m[0])
		}
	}
	rows := CountRows(doc)
	for kind, n := range byKind {
		if rows[kind] != n {
			t.Errorf("the report counts %d %s faults, the JSON %d", rows[kind], kind, n)
		}
	}
}
