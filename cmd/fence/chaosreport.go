package main

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"maps"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fence-lock/fence/internal/support/buildinfo"
	"github.com/fence-lock/fence/internal/tools/chaos"
	"github.com/fence-lock/fence/internal/tools/chaos/check"
	"github.com/fence-lock/fence/internal/tools/chaos/history"
	htmlreport "github.com/fence-lock/fence/internal/tools/report" // main has a func report
)

// Bounds of the report of a run, whatever its length.
const (
	reportLanes     = 12      // resources drawn in the timeline: those that violations name first
	reportNamedOps  = 2000    // operations named by violations that the timeline keeps and highlights
	reportFaultRows = 500     // faults listed one by one
	reportEmbedMax  = 8 << 20 // bytes of porcupine's visualisation embedded in the report, at most
	reportValueMax  = 40      // bytes of a value in a tooltip
	reportErrorMax  = 240     // bytes of an error in a tooltip
)

// chaosReportInput is what the report of a run is made of.
type chaosReportInput struct {
	cfg    chaos.Config
	faults string // --faults, as given or defaulted
	res    *chaos.Result
	rep    *check.Report
	sum    chaosReport
	now    time.Time // when the report was written; zero: time.Now()
}

// writeChaosReport writes the HTML report of a run to w (--report). It
// reads the history from its file, twice, and holds no more of it than the
// timeline keeps.
func writeChaosReport(w io.Writer, in chaosReportInput) error {
	if in.now.IsZero() {
		in.now = time.Now()
	}
	named := namedOps(in.rep)
	resources, namedIn, err := historyResources(in.res.History, named)
	if err != nil {
		return err
	}
	lanes := pickLanes(resources, namedIn)
	var fencedSampled int
	tl, err := chaosTimeline(in, named, lanes, &fencedSampled)
	if err != nil {
		return err
	}

	p := htmlreport.Page{Title: "fence chaos report", Subtitle: reportSubtitle(in)}
	p.Section("Verdict", "verdict", verdictBlock(in, named, tl))
	if in.rep.Violations() > 0 {
		p.Section("Violations", "violations", violationsBlock(in.rep, tl))
	}
	timeline := []htmlreport.Block{htmlreport.Text(timelineText(in))}
	if len(lanes) < len(resources) {
		timeline = append(timeline, htmlreport.Text(fmt.Sprintf("The timeline draws %d of the %d resources of the run (those that violations name first); the summary counts them all.", len(lanes), len(resources))))
	}
	if fencedSampled > 0 {
		timeline = append(timeline, htmlreport.Text(fmt.Sprintf("%d fenced writes, the last of the run, are sampled like the other operations: the timeline keeps %d marks out of the sample at most, and the operations that violations name come first.", fencedSampled, htmlreport.DefaultMaxKept)))
	}
	p.Section("Timeline", "timeline", append(timeline, tl)...)
	if lin := in.rep.Linearizability; lin.HTML != "" || lin.HTMLError != "" {
		p.Section("Linearizability: porcupine's visualisation", "porcupine", porcupineBlocks(lin)...)
	}
	p.Section("Summary", "summary", summaryBlocks(in)...)
	p.Section("Faults", "faults", faultsBlocks(in.res.Faults)...)
	p.Section("Configuration", "configuration", configBlocks(in)...)
	_, err = p.WriteTo(w)
	return err
}

// namedOps returns the ids of the operations the violations name, at most
// reportNamedOps of them, the first of each violation first.
func namedOps(rep *check.Report) map[int64]bool {
	named := make(map[int64]bool)
	for i := 0; len(named) < reportNamedOps; i++ {
		more := false
		for _, c := range rep.Checkers {
			for _, v := range c.Violations {
				if i < len(v.Ops) {
					more = true
					if len(named) < reportNamedOps {
						named[v.Ops[i]] = true
					}
				}
			}
		}
		if !more {
			break
		}
	}
	return named
}

// opResources returns the resources op is drawn in: its own, or a txn's
// (in the order of its writes, its own first).
func opResources(op *history.Op) []string {
	var rs []string
	if op.Resource != "" {
		rs = append(rs, op.Resource)
	}
	for _, w := range op.Writes {
		if !slices.Contains(rs, w.Resource) {
			rs = append(rs, w.Resource)
		}
	}
	return rs
}

// readEntries calls fn for each entry of the history file at path.
func readEntries(path string, fn func(*history.Entry)) error {
	return history.ReadFile(path, func(e *history.Entry) error { fn(e); return nil })
}

// historyResources returns the resources of the history at path, and those
// of them that the operations in named write or read.
func historyResources(path string, named map[int64]bool) (all []string, namedIn map[string]bool, err error) {
	seen := make(map[string]bool)
	namedIn = make(map[string]bool)
	err = readEntries(path, func(e *history.Entry) {
		if e.IsFault {
			return
		}
		for _, r := range opResources(&e.Op) {
			seen[r] = true
			if named[e.Op.ID] {
				namedIn[r] = true
			}
		}
	})
	return slices.SortedFunc(maps.Keys(seen), naturalOrder), namedIn, err
}

// pickLanes returns the resources the timeline draws: those that violations
// name, then the others, in natural order, reportLanes at most.
func pickLanes(resources []string, namedIn map[string]bool) map[string]bool {
	lanes := make(map[string]bool)
	for _, first := range []bool{true, false} {
		for _, r := range resources {
			if namedIn[r] == first && len(lanes) < reportLanes {
				lanes[r] = true
			}
		}
	}
	return lanes
}

// naturalOrder orders r2 before r10.
func naturalOrder(a, b string) int {
	ta, tb := strings.TrimLeft(a, "abcdefghijklmnopqrstuvwxyz"), strings.TrimLeft(b, "abcdefghijklmnopqrstuvwxyz")
	na, ea := strconv.Atoi(ta)
	nb, eb := strconv.Atoi(tb)
	if ea == nil && eb == nil && a[:len(a)-len(ta)] == b[:len(b)-len(tb)] {
		return cmp.Compare(na, nb)
	}
	return strings.Compare(a, b)
}

// opMark returns how op is drawn, and whether it is drawn at all: grants,
// writes and txns always (a sample of them), and every operation that a
// violation names.
func opMark(op *history.Op, named bool) (htmlreport.Mark, bool) {
	m := htmlreport.Mark{ID: opID(op.ID), Row: clientName(op.Client), Start: time.Duration(op.Call), End: time.Duration(op.Return), Title: opTitle(op)}
	if op.Outcome == history.Unknown || op.Return == 0 {
		m.End = m.Start
	}
	switch {
	case op.Kind == history.KindAcquire && op.Outcome == history.OK:
		m.Kind, m.Label = htmlreport.MarkGrant, strconv.FormatUint(op.Token, 10)
	case op.Mutates() && op.Outcome == history.OK:
		m.Kind = htmlreport.MarkAccepted
	case op.Mutates() && op.Outcome == history.Fenced:
		m.Kind, m.Keep = htmlreport.MarkFenced, true
	case (op.Mutates() || op.Kind == history.KindAcquire) && op.Outcome == history.Unknown:
		m.Kind = htmlreport.MarkUnknown
	case !named:
		return m, false // reads, releases, refusals: counted, not drawn
	}
	if named {
		m.Keep, m.Highlight = true, true
	}
	return m, true
}

// opID is the id of an operation's mark in the timeline.
func opID(id int64) string { return "op-" + strconv.FormatInt(id, 10) }

// clientName is the row of a client's operations.
func clientName(c int) string {
	if c < 0 {
		return "harness"
	}
	return "client " + strconv.Itoa(c)
}

// opTitle describes op, for its tooltip.
func opTitle(op *history.Op) string {
	var b strings.Builder
	fmt.Fprintf(&b, "op %d · %s · %s", op.ID, clientName(op.Client), op.Kind)
	switch op.Kind {
	case history.KindAcquire:
		fmt.Fprintf(&b, " %s", op.Resource)
	case history.KindRelease:
		fmt.Fprintf(&b, " %s with token %d", op.Resource, op.Token)
	case history.KindRead:
		fmt.Fprintf(&b, " %s/%s", op.Resource, op.Key)
	case history.KindWrite:
		fmt.Fprintf(&b, " %s/%s=%s with token %d", op.Resource, op.Key, clip(op.Value), op.Token)
	case history.KindTxn:
		for i, w := range op.Writes {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(&b, "%s %s/%s=%s with token %d", sep, w.Resource, w.Key, clip(w.Value), w.Token)
		}
	}
	fmt.Fprintf(&b, " → %s", op.Outcome)
	switch {
	case op.Kind == history.KindAcquire && op.Outcome == history.OK:
		fmt.Fprintf(&b, ", token %d", op.Token)
	case op.Kind == history.KindRead && op.Outcome == history.OK:
		fmt.Fprintf(&b, ", %s (rev %d)", clip(op.Value), op.Rev)
	case op.Mutates() && op.Outcome == history.OK:
		fmt.Fprintf(&b, ", rev %d", op.Rev)
	}
	fmt.Fprintf(&b, " · %s", seconds(op.Call))
	if op.Return != 0 && op.Outcome != history.Unknown {
		fmt.Fprintf(&b, " → %s (%s)", seconds(op.Return), time.Duration(op.Return-op.Call).Round(time.Microsecond*100))
	}
	if op.Error != "" {
		fmt.Fprintf(&b, " · %s", clipTo(op.Error, reportErrorMax))
	}
	return b.String()
}

// clip shortens a value for a tooltip.
func clip(s string) string { return clipTo(s, reportValueMax) }

// clipTo shortens s to n bytes and an ellipsis, if it is longer.
func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// seconds formats ns since the run's start.
func seconds(ns int64) string { return strconv.FormatFloat(float64(ns)/1e9, 'f', 3, 64) + "s" }

// faultSpan returns how a fault is drawn: a pause on the paused client's
// row in every resource; the others across every resource.
func faultSpan(i int, f history.Fault) htmlreport.Span {
	s := htmlreport.Span{ID: "fault-" + strconv.Itoa(i+1), Start: time.Duration(f.Start), End: time.Duration(f.End), Label: f.Kind, Title: faultTitle(i, f)}
	switch f.Kind {
	case chaos.FaultPause:
		s.Kind, s.Row = htmlreport.SpanPause, clientName(f.Client)
	case chaos.FaultLeaderPause:
		s.Kind = htmlreport.SpanPause
	case chaos.FaultKill, chaos.FaultBitflip, chaos.FaultLoseUnsynced, chaos.FaultRestore, chaos.FaultLeaderKill, chaos.FaultEngineKill:
		s.Kind = htmlreport.SpanKill
	case chaos.FaultNet, chaos.FaultEngineNet, chaos.FaultClockSkew:
		s.Kind = htmlreport.SpanNet
	}
	return s
}

// faultTitle describes the ith fault, for its tooltip.
func faultTitle(i int, f history.Fault) string {
	t := fmt.Sprintf("fault %d · %s", i+1, f.Kind)
	if f.Client >= 0 {
		t += " · " + clientName(f.Client)
	}
	t += " · " + seconds(f.Start)
	if f.End > f.Start {
		t += fmt.Sprintf(" → %s (%s)", seconds(f.End), time.Duration(f.End-f.Start).Round(time.Millisecond))
	}
	if f.Detail != "" {
		t += " · " + f.Detail
	}
	return t
}

// chaosTimeline draws the history's grants, writes and the operations in
// named on the lanes, and the run's faults across them. It sets
// *fencedSampled to the number of fenced writes it had no room to keep out
// of the sample.
func chaosTimeline(in chaosReportInput, named map[int64]bool, lanes map[string]bool, fencedSampled *int) (*htmlreport.Timeline, error) {
	tl := &htmlreport.Timeline{}
	// The fenced writes are kept out of the sample until they would leave
	// no room for the operations that violations name (a txn's in two
	// lanes); those after that are sampled as the others.
	budget, kept := htmlreport.DefaultMaxKept-2*len(named), 0
	sampledFenced := 0
	err := readEntries(in.res.History, func(e *history.Entry) {
		if e.IsFault {
			return
		}
		op := &e.Op
		m, ok := opMark(op, named[op.ID])
		if !ok {
			return
		}
		var rs []string
		for _, r := range opResources(op) {
			if lanes[r] {
				rs = append(rs, r)
			}
		}
		if m.Keep && !m.Highlight {
			if kept+len(rs) > budget {
				m.Keep = false
				sampledFenced++
			} else {
				kept += len(rs)
			}
		}
		for _, r := range rs {
			tl.Add(r, m)
		}
	})
	if err != nil {
		return nil, err
	}
	*fencedSampled = sampledFenced
	for i, f := range in.res.Faults {
		tl.AddSpan(faultSpan(i, f))
	}
	return tl, nil
}

// resultLine is the run's verdict in a few words, as the text report's
// last line.
func resultLine(s chaosReport) string {
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

func reportSubtitle(in chaosReportInput) string {
	return fmt.Sprintf("%s · seed %d · %.1f s · %d clients, %d resources · %s · fence %s · %s",
		resultLine(in.sum), in.cfg.Seed, in.sum.DurationS, in.cfg.Clients, in.cfg.Resources, targetName(in.cfg),
		buildinfo.Get().Version, in.now.UTC().Format(time.RFC3339))
}

// targetName says what the run tested.
func targetName(cfg chaos.Config) string {
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
		t += ", writes through the PostgreSQL guard"
		if cfg.Unsafe {
			t += ", UNSAFE: bypassing it"
		}
	} else if cfg.Unsafe {
		t += ", UNSAFE storage"
	}
	return t
}

// htmlBlock is markup this file built, every text in it escaped.
type htmlBlock struct {
	html template.HTML
	css  string
}

// HTML implements htmlreport.Block.
func (b htmlBlock) HTML() template.HTML { return b.html }

// CSS implements report.Styled.
func (b htmlBlock) CSS() string { return b.css }

const chaosReportCSS = `
.verdict { font-size: 1.15em; font-weight: 600; padding: 0.4em 0.7em; border-radius: 4px; display: inline-block; }
.verdict.ok { background: #dcfce7; color: #14532d; }
.verdict.bad { background: #fee2e2; color: #7f1d1d; }
.verdict.weak { background: #fef3c7; color: #78350f; }
td.ok { color: #15803d; font-weight: 600; }
td.bad { color: #b91c1c; font-weight: 600; }
.violations h3 { font-size: 1em; margin: 1.2em 0 0.3em; }
.violations li { margin: 0.3em 0; }
.violations .ops { color: #5b6475; }
iframe.porcupine { width: 100%; height: 640px; border: 1px solid #d8dce4; }
`

func esc(s string) string { return template.HTMLEscapeString(s) }

// verdictBlock is the verdict, and each checker's.
func verdictBlock(in chaosReportInput, named map[int64]bool, tl *htmlreport.Timeline) htmlreport.Block {
	var b strings.Builder
	cls := "ok"
	switch {
	case in.sum.Violations > 0:
		cls = "bad"
	case !in.sum.OK:
		cls = "weak"
	}
	fmt.Fprintf(&b, `<p class="verdict %s">%s</p>`, cls, esc(resultLine(in.sum)))
	fmt.Fprintf(&b, "<p>%s</p>", esc(fmt.Sprintf("%d operations; %d faults (%s); writes accepted %d, fenced %d; pauses past the TTL %d, writes of the paused clients fenced after them %d.",
		in.sum.Ops, len(in.res.Faults), faultCounts(in.sum.Faults, in.cfg.Faults), in.sum.Accepted, in.sum.Fenced, in.sum.PausesPastTTL, in.sum.FencedByPauses)))
	b.WriteString(`<table><thead><tr><th>checker</th><th>verdict</th><th>checked</th><th>note</th></tr></thead><tbody>`)
	for _, c := range in.rep.Checkers {
		verdict, vcls := "ok", "ok"
		if !c.OK {
			verdict, vcls = fmt.Sprintf(`<a href="#violations-%s">%d violations</a>`, esc(c.Name), c.Count), "bad"
		}
		fmt.Fprintf(&b, `<tr><td>%s</td><td class="%s">%s</td><td>%d</td><td>%s</td></tr>`, esc(c.Name), vcls, verdict, c.Checked, esc(c.Note))
	}
	b.WriteString("</tbody></table>")
	return htmlBlock{template.HTML(b.String()), chaosReportCSS}
}

// faultCounts lists the faults by kind, the run's kinds first.
func faultCounts(counts map[string]int, kinds []string) string {
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		if !slices.Contains(kinds, k) {
			parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// violationsBlock lists each failed checker's violations, with links to
// the operations they name in the timeline.
func violationsBlock(rep *check.Report, tl *htmlreport.Timeline) htmlreport.Block {
	var b strings.Builder
	b.WriteString(`<div class="violations">`)
	b.WriteString("<p>Each violation names the operations involved, the culprit first; a link scrolls the timeline to the operation, ringed in red.</p>")
	for _, c := range rep.Checkers {
		if c.OK {
			continue
		}
		fmt.Fprintf(&b, `<h3 id="violations-%s">%s: %d violations</h3><ol>`, esc(c.Name), esc(c.Name), c.Count)
		for _, v := range c.Violations {
			fmt.Fprintf(&b, "<li>%s", esc(v.Message))
			if len(v.Ops) > 0 {
				b.WriteString(` <span class="ops">(ops `)
				for i, id := range v.Ops {
					if i > 0 {
						b.WriteString(", ")
					}
					if tl.Has(opID(id)) {
						fmt.Fprintf(&b, `<a href="#%s">%d</a>`, opID(id), id)
					} else {
						fmt.Fprintf(&b, `%d (not drawn)`, id)
					}
				}
				b.WriteString(")</span>")
			}
			b.WriteString("</li>")
		}
		b.WriteString("</ol>")
		if c.Count > len(c.Violations) {
			fmt.Fprintf(&b, "<p>… and %d more: the checker lists the first %d.</p>", c.Count-len(c.Violations), len(c.Violations))
		}
	}
	b.WriteString("</div>")
	return htmlBlock{template.HTML(b.String()), chaosReportCSS}
}

// timelineText explains the timeline.
func timelineText(in chaosReportInput) string {
	t := "One lane per resource, one row per client; time in seconds since the run started. " +
		"A blue bar is a lock granted, with its token; a green dot a write accepted; a red cross a write fenced (its token was stale); " +
		"a hollow dot an operation whose outcome is unknown (a timeout, a reset connection). " +
		"An amber band is a client stopped with SIGSTOP, on its own row: its next write carries a token that a newer holder has superseded. " +
		"Kills and network faults run across every resource. Hover over a mark for the operation."
	if in.cfg.Cluster != "" {
		t += " With a cluster, an amber band across every resource is the leading fence server stopped (leader-pause); leader-kill and engine-kill are kills, engine-net is a network fault between the servers and the engine."
	}
	if in.cfg.Guard != "" {
		t += " Through the guard, a fence rises when a write is accepted, not when a token is granted: a stale holder's write is accepted until a newer holder has written."
	}
	return t
}

// svgNamespace is the one URL in the code of porcupine's visualisation:
// the name of SVG's namespace, which no browser fetches.
const svgNamespace = "http://www.w3.org/2000/svg"

// codeURL matches a URL in styles or a script.
var codeURL = regexp.MustCompile(`\bhttps?://[^\s"'<>)]+`)

// porcupineData starts the history that porcupine's visualisation draws:
// JSON, after its styles and its script.
const porcupineData = "const data = "

// fetchesOutside returns what in porcupine's visualisation, doc, would make
// a browser fetch something: in its markup, styles and script, any
// reference or URL but the SVG namespace; in its data, which it shows with innerHTML, any markup
// (an escaped '<'). The URLs in the data, in the errors of operations, are
// text, and fetch nothing.
func fetchesOutside(doc []byte) []string {
	code, data := doc, []byte(nil)
	if i := bytes.Index(doc, []byte(porcupineData)); i >= 0 {
		code, data = doc[:i], doc[i:]
	}
	refs := htmlreport.ExternalReferences(code)
	// And any URL in the code but the namespace's: its script could fetch it.
	for _, u := range codeURL.FindAllString(string(code), -1) {
		if u != svgNamespace {
			refs = append(refs, u)
		}
	}
	if data != nil {
		end := bytes.Index(data, []byte("render(data)"))
		if end < 0 {
			end = len(data)
		}
		if json := data[:end]; bytes.Contains(json, []byte(`\u003c`)) || bytes.Contains(json, []byte("<")) {
			refs = append(refs, "the markup in its data")
		}
		refs = append(refs, fetchesOutside(data[end:])...) // the rest of its script
	}
	return refs
}

// porcupineBlocks embeds porcupine's visualisation of the partitions that
// failed, when it fetches nothing (its script and styles are inline) and
// is small enough, and names its file otherwise.
func porcupineBlocks(lin check.Linearizability) []htmlreport.Block {
	var blocks []htmlreport.Block
	if lin.HTML != "" {
		doc, err := readSmall(lin.HTML, reportEmbedMax)
		switch outside := fetchesOutside(doc); {
		case err != nil:
			blocks = append(blocks, htmlreport.Text(fmt.Sprintf("Porcupine's visualisation is in %s, not embedded here: %v.", lin.HTML, err)))
		case len(outside) > 0:
			blocks = append(blocks, htmlreport.Text(fmt.Sprintf("Porcupine's visualisation is in %s, not embedded here: it would fetch %s.", lin.HTML, strings.Join(outside, ", "))))
		default:
			blocks = append(blocks, htmlreport.Text("Porcupine's own view of the resources that are not linearizable, with the faults as annotations: the longest linearizable prefix, and the operation that cannot follow it (in red). It is embedded from "+lin.HTML+"."),
				htmlBlock{template.HTML(`<iframe class="porcupine" title="porcupine's visualisation" src="data:text/html;base64,` +
					base64.StdEncoding.EncodeToString(doc) + `"></iframe>`), chaosReportCSS})
		}
	}
	if lin.HTMLError != "" {
		blocks = append(blocks, htmlreport.Text("Visualisation: "+lin.HTMLError))
	}
	return blocks
}

// readSmall reads the file at path, unless it is larger than limit.
func readSmall(path string, limit int64) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("it has %d MB, over the %d MB embedded at most", fi.Size()>>20, limit>>20)
	}
	return os.ReadFile(path)
}

// summaryBlocks count the operations and faults.
func summaryBlocks(in chaosReportInput) []htmlreport.Block {
	s := in.sum
	counts := htmlreport.Table{Header: []string{"operations", "count"}}
	counts.Rows = append(counts.Rows, []string{"all", strconv.Itoa(s.Ops)})
	for _, k := range slices.Sorted(maps.Keys(s.OpsByOutcome)) {
		counts.Rows = append(counts.Rows, []string{k, strconv.Itoa(s.OpsByOutcome[k])})
	}
	faults := htmlreport.Table{Header: []string{"faults", "count"}}
	kinds := slices.Clone(in.cfg.Faults)
	for _, k := range slices.Sorted(maps.Keys(s.Faults)) {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	for _, k := range kinds {
		faults.Rows = append(faults.Rows, []string{k, strconv.Itoa(s.Faults[k])})
	}
	lin := s.Linearizability
	effects := htmlreport.Table{Header: []string{"what the faults did", ""}, Rows: [][]string{
		{"pauses past the TTL", strconv.Itoa(s.PausesPastTTL)},
		{"writes of paused clients fenced", strconv.Itoa(s.FencedByPauses)},
		{"server restarts", strconv.Itoa(s.ServerRestarts)},
		{"takeovers (leader-pause)", strconv.Itoa(s.Takeovers)},
		{"writes accepted", strconv.Itoa(s.Accepted)},
		{"writes fenced", strconv.Itoa(s.Fenced)},
		{"stale write attempts (of which fenced)", fmt.Sprintf("%d (%d)", in.rep.StaleAttempts, in.rep.StaleRejected)},
		{"acknowledged writes lost", strconv.Itoa(s.LostAckedWrites)},
		{"linearizability", fmt.Sprintf("%s: %d ops in %d partitions (largest %d), %d ms", lin.Result, lin.Ops, len(lin.Partitions), lin.MaxOps, lin.DurationMS)},
	}}
	return []htmlreport.Block{counts, faults, effects}
}

// faultsBlocks list the faults one by one.
func faultsBlocks(faults []history.Fault) []htmlreport.Block {
	t := htmlreport.Table{Header: []string{"#", "fault", "client", "at", "for", "detail"}}
	for i, f := range faults {
		if i == reportFaultRows {
			break
		}
		client := "all"
		if f.Client >= 0 {
			client = strconv.Itoa(f.Client)
		}
		d := "instant"
		if f.End > f.Start {
			d = time.Duration(f.End - f.Start).Round(time.Millisecond).String()
		}
		t.Rows = append(t.Rows, []string{strconv.Itoa(i + 1), f.Kind, client, seconds(f.Start), d, f.Detail})
	}
	blocks := []htmlreport.Block{t}
	if len(faults) == 0 {
		blocks = []htmlreport.Block{htmlreport.Text("No fault was injected.")}
	}
	if len(faults) > reportFaultRows {
		blocks = append(blocks, htmlreport.Text(fmt.Sprintf("… and %d more, in the history and in the timeline.", len(faults)-reportFaultRows)))
	}
	return blocks
}

// configBlocks say how the run was made, and how to make it again.
func configBlocks(in chaosReportInput) []htmlreport.Block {
	cfg := in.cfg
	info := buildinfo.Get()
	commit := cmp.Or(info.Commit, "unknown")
	if info.Modified {
		commit += "+modified"
	}
	t := htmlreport.Table{Header: []string{"setting", "value"}, Rows: [][]string{
		{"target", targetName(cfg)},
		{"seed", strconv.FormatUint(cfg.Seed, 10)},
		{"duration", cfg.Duration.String()},
		{"clients", strconv.Itoa(cfg.Clients)},
		{"resources", strconv.Itoa(cfg.Resources)},
		{"keys per resource", strconv.Itoa(cfg.Keys)},
		{"ttl", cfg.TTL.String()},
		{"faults", cmp.Or(in.faults, "none")},
		{"fault every", cfg.FaultEvery.String()},
		{"txn percent", strconv.Itoa(cfg.TxnPercent)},
		{"think", cfg.Think.String()},
	}}
	if cfg.Cluster != "" {
		t.Rows = append(t.Rows, []string{"election ttl", cmp.Or(map[bool]string{true: cfg.ElectionTTL.String()}[cfg.ElectionTTL != 0], "the servers' default")})
	}
	if in.sum.History != "" {
		t.Rows = append(t.Rows, []string{"history", in.sum.History})
	}
	t.Rows = append(t.Rows,
		[]string{"fence", fmt.Sprintf("%s, commit %s, %s", info.Version, commit, info.GoVersion)},
		[]string{"system", runtime.GOOS + "/" + runtime.GOARCH + ", " + strconv.Itoa(runtime.NumCPU()) + " CPUs"},
		[]string{"report written", in.now.UTC().Format(time.RFC3339)},
	)
	return []htmlreport.Block{t,
		htmlreport.Text("The same seed draws the same fault schedule and the same workload; the timing of processes and of the network still differs from run to run:"),
		htmlreport.Pre(replayCommand(in)),
	}
}

// replayCommand is a command line that runs the same schedule again. It
// records no secret: the guard's connection string and the bearer token
// are left to their environment variables.
func replayCommand(in chaosReportInput) string {
	cfg := in.cfg
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
		"--faults", shellQuote(in.faults), "--fault-every", cfg.FaultEvery.String(),
		"--clients", strconv.Itoa(cfg.Clients), "--resources", strconv.Itoa(cfg.Resources), "--keys", strconv.Itoa(cfg.Keys),
		"--ttl", cfg.TTL.String(), "--txn-percent", strconv.Itoa(cfg.TxnPercent), "--think", cfg.Think.String())
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
