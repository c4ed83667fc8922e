package runreport

import (
	"cmp"
	"fmt"
	"html/template"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fence-lock/fence/internal/support/buildinfo"
	"github.com/fence-lock/fence/internal/tools/chaos"
	"github.com/fence-lock/fence/internal/tools/chaos/check"
	"github.com/fence-lock/fence/internal/tools/chaos/history"
	"github.com/fence-lock/fence/internal/tools/report"
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

// Input is what the HTML report of a run is made of.
type Input struct {
	Config  chaos.Config
	Faults  string // --faults, as given or defaulted
	Result  *chaos.Result
	Check   *check.Report
	Summary Summary
	Now     time.Time // when the report was written; zero: time.Now()
}

// WriteHTML writes the HTML report of a run to w (--report). It
// reads the history from its file, twice, and holds no more of it than the
// timeline keeps.
func WriteHTML(w io.Writer, in Input) error {
	if in.Now.IsZero() {
		in.Now = time.Now()
	}
	named := namedOps(in.Check)
	resources, namedIn, err := historyResources(in.Result.History, named)
	if err != nil {
		return err
	}
	lanes := pickLanes(resources, namedIn)
	var fencedSampled int
	tl, err := drawTimeline(in, named, lanes, &fencedSampled)
	if err != nil {
		return err
	}

	p := report.Page{Title: "fence chaos report", Subtitle: reportSubtitle(in)}
	p.Section("Verdict", "verdict", verdictBlock(in, named, tl))
	if in.Check.Violations() > 0 {
		p.Section("Violations", "violations", violationsBlock(in.Check, tl))
	}
	timeline := []report.Block{report.Text(timelineText(in))}
	if len(lanes) < len(resources) {
		timeline = append(timeline, report.Text(fmt.Sprintf("The timeline draws %d of the %d resources of the run (those that violations name first); the summary counts them all.", len(lanes), len(resources))))
	}
	if fencedSampled > 0 {
		timeline = append(timeline, report.Text(fmt.Sprintf("%d fenced writes, the last of the run, are sampled like the other operations: the timeline keeps %d marks out of the sample at most, and the operations that violations name come first.", fencedSampled, report.DefaultMaxKept)))
	}
	p.Section("Timeline", "timeline", append(timeline, tl)...)
	if lin := in.Check.Linearizability; lin.HTML != "" || lin.HTMLError != "" {
		p.Section("Linearizability: porcupine's visualisation", "porcupine", porcupineBlocks(lin)...)
	}
	p.Section("Summary", "summary", summaryBlocks(in)...)
	p.Section("Faults", "faults", faultsBlocks(in.Result.Faults)...)
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
		for _, r := range e.Op.Resources() {
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

func reportSubtitle(in Input) string {
	return fmt.Sprintf("%s · seed %d · %.1f s · %d clients, %d resources · %s · fence %s · %s",
		Verdict(in.Summary), in.Config.Seed, in.Summary.DurationS, in.Config.Clients, in.Config.Resources, Target(in.Config),
		buildinfo.Get().Version, in.Now.UTC().Format(time.RFC3339))
}

// htmlBlock is markup this file built, every text in it escaped.
type htmlBlock struct {
	html template.HTML
	css  string
}

// HTML implements report.Block.
func (b htmlBlock) HTML() template.HTML { return b.html }

// CSS implements report.Styled.
func (b htmlBlock) CSS() string { return b.css }

const pageCSS = `
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
func verdictBlock(in Input, named map[int64]bool, tl *report.Timeline) report.Block {
	var b strings.Builder
	cls := "ok"
	switch {
	case in.Summary.Violations > 0:
		cls = "bad"
	case !in.Summary.OK:
		cls = "weak"
	}
	fmt.Fprintf(&b, `<p class="verdict %s">%s</p>`, cls, esc(Verdict(in.Summary)))
	fmt.Fprintf(&b, "<p>%s</p>", esc(fmt.Sprintf("%d operations; %d faults (%s); writes accepted %d, fenced %d; pauses past the TTL %d, writes of the paused clients fenced after them %d.",
		in.Summary.Ops, len(in.Result.Faults), faultCounts(in.Summary.Faults, in.Config.Faults), in.Summary.Accepted, in.Summary.Fenced, in.Summary.PausesPastTTL, in.Summary.FencedByPauses)))
	b.WriteString(`<table><thead><tr><th>checker</th><th>verdict</th><th>checked</th><th>note</th></tr></thead><tbody>`)
	for _, c := range in.Check.Checkers {
		verdict, vcls := "ok", "ok"
		if !c.OK {
			verdict, vcls = fmt.Sprintf(`<a href="#violations-%s">%d violations</a>`, esc(c.Name), c.Count), "bad"
		}
		fmt.Fprintf(&b, `<tr><td>%s</td><td class="%s">%s</td><td>%d</td><td>%s</td></tr>`, esc(c.Name), vcls, verdict, c.Checked, esc(c.Note))
	}
	b.WriteString("</tbody></table>")
	return htmlBlock{template.HTML(b.String()), pageCSS}
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
func violationsBlock(rep *check.Report, tl *report.Timeline) report.Block {
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
	return htmlBlock{template.HTML(b.String()), pageCSS}
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
func summaryBlocks(in Input) []report.Block {
	s := in.Summary
	counts := report.Table{Header: []string{"operations", "count"}}
	counts.Rows = append(counts.Rows, []string{"all", strconv.Itoa(s.Ops)})
	for _, k := range slices.Sorted(maps.Keys(s.OpsByOutcome)) {
		counts.Rows = append(counts.Rows, []string{k, strconv.Itoa(s.OpsByOutcome[k])})
	}
	faults := report.Table{Header: []string{"faults", "count"}}
	kinds := slices.Clone(in.Config.Faults)
	for _, k := range slices.Sorted(maps.Keys(s.Faults)) {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	for _, k := range kinds {
		faults.Rows = append(faults.Rows, []string{k, strconv.Itoa(s.Faults[k])})
	}
	lin := s.Linearizability
	effects := report.Table{Header: []string{"what the faults did", ""}, Rows: [][]string{
		{"pauses past the TTL", strconv.Itoa(s.PausesPastTTL)},
		{"writes of paused clients fenced", strconv.Itoa(s.FencedByPauses)},
		{"server restarts", strconv.Itoa(s.ServerRestarts)},
		{"takeovers (leader-pause)", strconv.Itoa(s.Takeovers)},
		{"writes accepted", strconv.Itoa(s.Accepted)},
		{"writes fenced", strconv.Itoa(s.Fenced)},
		{"stale write attempts (of which fenced)", fmt.Sprintf("%d (%d)", in.Check.StaleAttempts, in.Check.StaleRejected)},
		{"acknowledged writes lost", strconv.Itoa(s.LostAckedWrites)},
		{"linearizability", fmt.Sprintf("%s: %d ops in %d partitions (largest %d), %d ms", lin.Result, lin.Ops, len(lin.Partitions), lin.MaxOps, lin.DurationMS)},
	}}
	return []report.Block{counts, faults, effects}
}

// faultsBlocks list the faults one by one.
func faultsBlocks(faults []history.Fault) []report.Block {
	t := report.Table{Header: []string{"#", "fault", "client", "at", "for", "detail"}}
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
	blocks := []report.Block{t}
	if len(faults) == 0 {
		blocks = []report.Block{report.Text("No fault was injected.")}
	}
	if len(faults) > reportFaultRows {
		blocks = append(blocks, report.Text(fmt.Sprintf("… and %d more, in the history and in the timeline.", len(faults)-reportFaultRows)))
	}
	return blocks
}

// configBlocks say how the run was made, and how to make it again.
func configBlocks(in Input) []report.Block {
	cfg := in.Config
	info := buildinfo.Get()
	commit := cmp.Or(info.Commit, "unknown")
	if info.Modified {
		commit += "+modified"
	}
	t := report.Table{Header: []string{"setting", "value"}, Rows: [][]string{
		{"target", Target(cfg)},
		{"seed", strconv.FormatUint(cfg.Seed, 10)},
		{"duration", cfg.Duration.String()},
		{"clients", strconv.Itoa(cfg.Clients)},
		{"resources", strconv.Itoa(cfg.Resources)},
		{"keys per resource", strconv.Itoa(cfg.Keys)},
		{"ttl", cfg.TTL.String()},
		{"faults", cmp.Or(in.Faults, "none")},
		{"fault every", cfg.FaultEvery.String()},
		{"txn percent", strconv.Itoa(cfg.TxnPercent)},
		{"workload", cmp.Or(cfg.Workload, chaos.WorkloadLock)},
		{"think", cfg.Think.String()},
	}}
	if cfg.Cluster != "" {
		t.Rows = append(t.Rows, []string{"election ttl", cmp.Or(map[bool]string{true: cfg.ElectionTTL.String()}[cfg.ElectionTTL != 0], "the servers' default")})
	}
	if in.Summary.History != "" {
		t.Rows = append(t.Rows, []string{"history", in.Summary.History})
	}
	t.Rows = append(t.Rows,
		[]string{"fence", fmt.Sprintf("%s, commit %s, %s", info.Version, commit, info.GoVersion)},
		[]string{"system", runtime.GOOS + "/" + runtime.GOARCH + ", " + strconv.Itoa(runtime.NumCPU()) + " CPUs"},
		[]string{"report written", in.Now.UTC().Format(time.RFC3339)},
	)
	return []report.Block{t,
		report.Text("The same seed draws the same fault schedule and the same workload; the timing of processes and of the network still differs from run to run:"),
		report.Pre(ReplayCommand(in)),
	}
}
