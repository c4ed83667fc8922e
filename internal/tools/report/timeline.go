package report

import (
	"cmp"
	"fmt"
	"html/template"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Defaults of a Timeline's bounds.
const (
	DefaultMaxMarks = 600  // ordinary marks kept per lane
	DefaultMaxKept  = 5000 // marks added with Keep, kept in all
	DefaultMaxSpans = 5000 // spans kept in all
)

// DefaultTimelineWidth is the width of a Timeline's plot, in its own
// pixels: with the labels on its left, about the page's width (72em),
// which the chart is scaled to.
const DefaultTimelineWidth = 880

// Timeline is a Block: the events of a run in time, drawn as inline SVG.
// It has one lane per subject (a resource), each lane one row per actor (a
// client), and a time axis from 0 to the latest event. Marks are points on
// a row (an operation, at its end, with a thin line back to its start);
// spans are stretches of time (a fault) on one row, on the row of that
// name in every lane, on a whole lane, or across every lane.
//
// Every mark with an ID is an element with that id, so that a link such as
// #op-12 scrolls to it and highlights it; every mark and span has a
// tooltip (an SVG <title>).
//
// A Timeline holds a bounded number of marks however many are added: of a
// lane's ordinary marks a uniform sample of MaxMarks (reproducible from
// run to run); every mark added with Keep, up to MaxKept in all; MaxSpans
// spans. Under the chart it says what it left out. The zero value is ready
// to use. A Timeline is not safe for concurrent use.
type Timeline struct {
	// MaxMarks is how many of a lane's ordinary marks it keeps, a uniform
	// sample. 0 means DefaultMaxMarks; negative, none.
	MaxMarks int
	// MaxKept is how many marks added with Keep it keeps, in all lanes
	// together: past it, they are counted and not drawn. 0 means
	// DefaultMaxKept.
	MaxKept int
	// MaxSpans is how many spans it keeps. 0 means DefaultMaxSpans.
	MaxSpans int
	// Width is the width of the plot in pixels, without the labels on
	// its left: the chart's own coordinates, which the page scales to
	// its width, whatever the run's length. 0 means DefaultTimelineWidth.
	Width int

	lanes        map[string]*lane
	spans        []Span
	droppedSpans int
	kept         int // marks kept with Keep, in all lanes
	droppedKept  int
	end          time.Duration // the latest time seen
	rng          *rand.Rand
}

// MarkKind says how a Mark is drawn.
type MarkKind int

// The kinds of Mark.
const (
	MarkOther    MarkKind = iota // anything else (a read, a release, a refusal): a small grey dot
	MarkGrant                    // a lock granted: a blue bar across the row, labelled with Mark.Label (its token)
	MarkAccepted                 // a write accepted: a green dot
	MarkFenced                   // a write rejected as stale: a red cross
	MarkUnknown                  // an operation of unknown outcome: a hollow grey dot
)

var markClass = map[MarkKind]string{
	MarkOther: "other", MarkGrant: "grant", MarkAccepted: "ok", MarkFenced: "fenced", MarkUnknown: "unknown",
}

// Mark is one event on a row of a lane.
type Mark struct {
	// ID is the id of the mark's element, an anchor for links (e.g.
	// "op-12"); "" for none. When marks share an ID, the first drawn has
	// it.
	ID   string
	Row  string // the row of the lane, e.g. "client 3"
	Kind MarkKind
	// Start and End bound the event in time since the run's start: the
	// mark is drawn at End, with a line back to Start. End before Start
	// means End = Start. Negative times count as 0.
	Start, End time.Duration
	Label      string // drawn next to the mark (a grant's token); "" for none
	Title      string // the tooltip
	// Keep exempts the mark from sampling (a fenced write, an operation a
	// verdict names): it is drawn unless MaxKept marks were kept before.
	Keep bool
	// Highlight draws a red ring around the mark: an offending operation.
	Highlight bool
}

// SpanKind says how a Span is drawn.
type SpanKind int

// The kinds of Span.
const (
	SpanOther SpanKind = iota // grey
	SpanPause                 // amber: a process stopped
	SpanKill                  // red: a process killed (an instant, or until its restart)
	SpanNet                   // blue: a network fault
)

var spanClass = map[SpanKind]string{SpanOther: "s-other", SpanPause: "s-pause", SpanKill: "s-kill", SpanNet: "s-net"}

// Span is a stretch of time on the timeline.
type Span struct {
	ID   string // the id of its element; "" for none
	Kind SpanKind
	// Lane is the lane it is drawn on; "" means every lane.
	Lane string
	// Row is the row it is drawn on, in Lane, or in every lane that has a
	// row of that name when Lane is ""; "" means the whole lane (or, with
	// Lane "", the whole chart, labelled at its top).
	Row string
	// Start and End bound it in time since the run's start; End at or
	// before Start makes it an instant, drawn as a line.
	Start, End time.Duration
	Label      string // drawn at its start, for a span across the chart
	Title      string // the tooltip
}

// lane is one lane's marks: a sample of the ordinary ones, and the kept.
type lane struct {
	name     string
	sample   []Mark
	kept     []Mark
	ordinary int // ordinary marks added, sampled or not
	rows     map[string]bool
}

// Add adds m to the lane named lane, creating the lane (and the row) if
// needed. Lanes and rows are drawn in natural order (r2 before r10).
func (t *Timeline) Add(laneName string, m Mark) {
	if t.lanes == nil {
		t.lanes = make(map[string]*lane)
		t.rng = rand.New(rand.NewPCG(1, 2)) // a fixed seed: the same input draws the same chart
	}
	l := t.lanes[laneName]
	if l == nil {
		l = &lane{name: laneName, rows: make(map[string]bool)}
		t.lanes[laneName] = l
	}
	l.rows[m.Row] = true
	m.Start, m.End = max(m.Start, 0), max(m.End, 0)
	if m.End < m.Start {
		m.End = m.Start
	}
	t.end = max(t.end, m.End)
	if m.Keep {
		if t.kept >= cmp.Or(t.MaxKept, DefaultMaxKept) {
			t.droppedKept++
			return
		}
		t.kept++
		l.kept = append(l.kept, m)
		return
	}
	l.ordinary++
	limit := cmp.Or(t.MaxMarks, DefaultMaxMarks)
	switch {
	case limit < 0:
	case len(l.sample) < limit:
		l.sample = append(l.sample, m)
	default: // reservoir sampling: every mark added has the same chance to stay
		if i := t.rng.IntN(l.ordinary); i < limit {
			l.sample[i] = m
		}
	}
}

// AddSpan adds s. A span on a row of a lane that has no marks creates
// neither; a span past MaxSpans is counted and not drawn.
func (t *Timeline) AddSpan(s Span) {
	s.Start, s.End = max(s.Start, 0), max(s.End, 0)
	if s.End < s.Start {
		s.End = s.Start
	}
	if len(t.spans) >= cmp.Or(t.MaxSpans, DefaultMaxSpans) {
		t.droppedSpans++
		return
	}
	t.end = max(t.end, s.End)
	t.spans = append(t.spans, s)
}

// Has reports whether the chart draws an element with id: links to it
// resolve. It is meaningful once every mark was added.
func (t *Timeline) Has(id string) bool {
	if id == "" {
		return false
	}
	for _, s := range t.spans {
		if s.ID == id {
			return true
		}
	}
	for _, l := range t.lanes {
		for _, ms := range [][]Mark{l.kept, l.sample} {
			for _, m := range ms {
				if m.ID == id {
					return true
				}
			}
		}
	}
	return false
}

// Layout, in pixels.
const (
	tlLabelW   = 120 // the labels on the left
	tlAxisH    = 34  // the time axis on top, with the labels of the spans across the chart
	tlLaneHead = 18  // a lane's title
	tlRowH     = 16
	tlLaneGap  = 8
	tlBottom   = 22 // the axis at the bottom
)

// width returns the plot's width.
func (t *Timeline) width() float64 {
	return float64(cmp.Or(max(t.Width, 0), DefaultTimelineWidth))
}

// The labels' fonts, in pixels (timelineCSS), and how wide a character
// is taken to be, in ems: a digit of DejaVu Sans, the widest of the
// common sans-serif fonts' digits, and a little more.
const (
	tokenFont     = 9
	spanLabelFont = 10
	labelEm       = 0.66
	labelGap      = 3 // px between two labels on a line
)

// labelWidth estimates the width of s drawn at size px.
func labelWidth(s string, size float64) float64 {
	return labelEm * size * float64(utf8.RuneCountInString(s))
}

// labelLine places labels on one line of the chart, left to right, so
// that none overlaps another or leaves the plot: a label that would is
// not drawn (its mark's tooltip has it).
type labelLine struct {
	right    float64 // the right edge of the last label placed
	min, max float64 // the plot's bounds
}

// place returns where the label s, of width w, is drawn for a mark at x:
// at after, its left edge (text-anchor start), or, near the plot's right
// edge, with its right edge at before (text-anchor end); ok is false if
// it fits neither way.
func (l *labelLine) place(after, before, w float64) (x float64, end, ok bool) {
	left := after
	if after+w > l.max {
		left, end = before-w, true
	}
	if left < l.min || left < l.right+labelGap || left+w > l.max {
		return 0, false, false
	}
	l.right = left + w
	if end {
		return before, true, true
	}
	return after, false, true
}

// anchorEnd is the attribute of a label placed by its right edge.
func anchorEnd(end bool) string {
	if end {
		return ` text-anchor="end"`
	}
	return ""
}

// x maps a time to an abscissa: finite for every input.
func (t *Timeline) x(d time.Duration, w float64) float64 {
	end := max(t.end, 1)
	f := float64(min(max(d, 0), end)) / float64(end)
	return tlLabelW + f*w
}

// HTML implements Block.
func (t *Timeline) HTML() template.HTML {
	var b strings.Builder
	b.WriteString(timelineLegend)
	if len(t.lanes) == 0 {
		b.WriteString(`<p class="tl-empty">No events to draw.</p>`)
		return template.HTML(b.String())
	}
	names := make([]string, 0, len(t.lanes))
	for n := range t.lanes {
		names = append(names, n)
	}
	slices.SortFunc(names, naturalCompare)
	w := t.width()

	// Where each lane and row is.
	laneY := make(map[string]float64)
	rowY := make(map[string]map[string]float64)
	rowsOf := make(map[string][]string)
	y := float64(tlAxisH)
	for _, n := range names {
		l := t.lanes[n]
		laneY[n] = y
		y += tlLaneHead
		rows := make([]string, 0, len(l.rows))
		for r := range l.rows {
			rows = append(rows, r)
		}
		slices.SortFunc(rows, naturalCompare)
		rowsOf[n] = rows
		rowY[n] = make(map[string]float64)
		for _, r := range rows {
			rowY[n][r] = y
			y += tlRowH
		}
		y += tlLaneGap
	}
	plotBottom := y - tlLaneGap
	height := plotBottom + tlBottom
	// Its own size in width and height, scaled to the page's width by
	// timelineCSS: one size for every run, so that the page never
	// scrolls sideways.
	fmt.Fprintf(&b, `<div class="tl-chart"><svg class="tl" width="%s" height="%s" viewBox="0 0 %s %s" role="img" aria-label="timeline">`,
		num(tlLabelW+w+10), num(height), num(tlLabelW+w+10), num(height))

	// Lanes: a band, a title, the rows' labels.
	for i, n := range names {
		ly := laneY[n]
		lh := tlLaneHead + float64(len(rowsOf[n]))*tlRowH
		band := "lane"
		if i%2 == 1 {
			band = "lane alt"
		}
		fmt.Fprintf(&b, `<rect class="%s" x="0" y="%s" width="%s" height="%s"/>`, band, num(ly), num(tlLabelW+w+10), num(lh))
		fmt.Fprintf(&b, `<text class="lane-name" x="4" y="%s">%s</text>`, num(ly+13), esc(n))
		for _, r := range rowsOf[n] {
			fmt.Fprintf(&b, `<text class="row-name" x="12" y="%s">%s</text>`, num(rowY[n][r]+11), esc(r))
			fmt.Fprintf(&b, `<line class="row" x1="%d" x2="%s" y1="%s" y2="%s"/>`, tlLabelW, num(tlLabelW+w), num(rowY[n][r]+8), num(rowY[n][r]+8))
		}
	}

	// The time axis, on top and at the bottom, with a faint grid.
	step := tickStep(t.end, w)
	for d := time.Duration(0); d <= max(t.end, 1); d += step {
		x := num(t.x(d, w))
		fmt.Fprintf(&b, `<line class="grid" x1="%s" x2="%s" y1="%d" y2="%s"/>`, x, x, tlAxisH-4, num(plotBottom))
		fmt.Fprintf(&b, `<text class="tick" x="%s" y="12">%s</text>`, x, tickLabel(d, step))
		fmt.Fprintf(&b, `<text class="tick" x="%s" y="%s">%s</text>`, x, num(plotBottom+15), tickLabel(d, step))
	}

	// Spans, under the marks.
	used := make(map[string]bool) // ids drawn so far
	idAttr := func(id string) string {
		if id == "" || used[id] {
			return ""
		}
		used[id] = true
		return ` id="` + esc(id) + `"`
	}
	// The labels of the spans across the chart, left to right, those that
	// fit.
	spanLabels := make(map[int]labelPos)
	var across []int
	for i, s := range t.spans {
		if s.Lane == "" && s.Row == "" && s.Label != "" {
			across = append(across, i)
		}
	}
	slices.SortStableFunc(across, func(i, j int) int { return cmp.Compare(t.spans[i].Start, t.spans[j].Start) })
	line := labelLine{right: -1e9, min: tlLabelW, max: tlLabelW + w + 10}
	for _, i := range across {
		x := t.x(t.spans[i].Start, w)
		if at, end, ok := line.place(x, x, labelWidth(t.spans[i].Label, spanLabelFont)); ok {
			spanLabels[i] = labelPos{at, end}
		}
	}
	for i, s := range t.spans {
		x1, x2 := t.x(s.Start, w), t.x(s.End, w)
		cls := spanClass[s.Kind]
		var rects [][2]float64 // y, height
		switch {
		case s.Lane == "" && s.Row == "":
			rects = append(rects, [2]float64{tlAxisH - 4, plotBottom - tlAxisH + 4})
		case s.Row == "":
			if ly, ok := laneY[s.Lane]; ok {
				rects = append(rects, [2]float64{ly, tlLaneHead + float64(len(rowsOf[s.Lane]))*tlRowH})
			}
		default:
			for _, n := range names {
				if s.Lane != "" && n != s.Lane {
					continue
				}
				if ry, ok := rowY[n][s.Row]; ok {
					rects = append(rects, [2]float64{ry + 1, tlRowH - 2})
				}
			}
		}
		if len(rects) == 0 {
			continue
		}
		fmt.Fprintf(&b, `<g class="span %s"%s><title>%s</title>`, cls, idAttr(s.ID), esc(s.Title))
		for _, r := range rects {
			if x2-x1 < 2 {
				fmt.Fprintf(&b, `<rect class="instant" x="%s" y="%s" width="2" height="%s"/>`, num(x1-1), num(r[0]), num(r[1]))
			} else {
				fmt.Fprintf(&b, `<rect x="%s" y="%s" width="%s" height="%s"/>`, num(x1), num(r[0]), num(x2-x1), num(r[1]))
			}
		}
		if p, ok := spanLabels[i]; ok {
			fmt.Fprintf(&b, `<text class="span-label" x="%s" y="26"%s>%s</text>`, num(p.x), anchorEnd(p.end), esc(s.Label))
		}
		b.WriteString(`</g>`)
	}

	// Marks: the kept ones last, over the sample. An id that marks share
	// goes to a kept one first, as the marks that links point to are.
	for _, n := range names {
		l := t.lanes[n]
		slices.SortStableFunc(l.sample, func(a, b Mark) int { return cmp.Compare(a.End, b.End) })
		slices.SortStableFunc(l.kept, func(a, b Mark) int { return cmp.Compare(a.End, b.End) })
	}
	owner := make(map[string]*Mark) // id -> the mark that has it
	for _, pass := range []func(*lane) []Mark{func(l *lane) []Mark { return l.kept }, func(l *lane) []Mark { return l.sample }} {
		for _, n := range names {
			ms := pass(t.lanes[n])
			for i := range ms {
				if id := ms[i].ID; id != "" && owner[id] == nil && !used[id] {
					owner[id] = &ms[i]
				}
			}
		}
	}
	for _, n := range names {
		l := t.lanes[n]
		labels := t.tokenLabels(l, w)
		for _, ms := range [][]Mark{l.sample, l.kept} {
			for i := range ms {
				t.writeMark(&b, &ms[i], owner[ms[i].ID] == &ms[i], rowY[n][ms[i].Row]+8, w, labels)
			}
		}
	}
	b.WriteString(`</svg></div>`)
	t.writeNotes(&b, names)
	return template.HTML(b.String())
}

// labelPos is where a label is drawn: its abscissa, and whether that is
// its right edge (text-anchor end) rather than its left.
type labelPos struct {
	x   float64
	end bool
}

// tokenLabels returns where the labels of l's grants are drawn, those
// that fit: on each row, left to right in time, the sample's and the
// kept marks' together, a label where it overlaps no other.
func (t *Timeline) tokenLabels(l *lane, w float64) map[*Mark]labelPos {
	byRow := make(map[string][]*Mark)
	for _, ms := range [][]Mark{l.sample, l.kept} {
		for i := range ms {
			if m := &ms[i]; m.Kind == MarkGrant && m.Label != "" {
				byRow[m.Row] = append(byRow[m.Row], m)
			}
		}
	}
	pos := make(map[*Mark]labelPos)
	for _, ms := range byRow {
		slices.SortStableFunc(ms, func(a, b *Mark) int { return cmp.Compare(a.End, b.End) })
		line := labelLine{right: -1e9, min: tlLabelW, max: tlLabelW + w + 10}
		for _, m := range ms {
			x := t.x(m.End, w)
			if at, end, ok := line.place(x+2.5, x-2.5, labelWidth(m.Label, tokenFont)); ok {
				pos[m] = labelPos{at, end}
			}
		}
	}
	return pos
}

// writeMark draws m on the row whose axis is at ordinate ry, with its ID
// if withID; labels says where the grants' labels that fit are drawn.
func (t *Timeline) writeMark(b *strings.Builder, m *Mark, withID bool, ry, w float64, labels map[*Mark]labelPos) {
	x, x0 := t.x(m.End, w), t.x(m.Start, w)
	cls := "m " + markClass[m.Kind]
	if m.Highlight {
		cls += " hl"
	}
	id := ""
	if withID {
		id = ` id="` + esc(m.ID) + `"`
	}
	fmt.Fprintf(b, `<g class="%s"%s><title>%s</title>`, cls, id, esc(m.Title))
	if x-x0 >= 2 {
		fmt.Fprintf(b, `<line class="dur" x1="%s" x2="%s" y1="%s" y2="%s"/>`, num(x0), num(x), num(ry), num(ry))
	}
	fmt.Fprintf(b, `<circle class="hit" cx="%s" cy="%s" r="6"/>`, num(x), num(ry))
	switch m.Kind {
	case MarkGrant:
		fmt.Fprintf(b, `<rect x="%s" y="%s" width="2" height="14"/>`, num(x-1), num(ry-7))
		if p, ok := labels[m]; ok {
			fmt.Fprintf(b, `<text class="token" x="%s" y="%s"%s>%s</text>`, num(p.x), num(ry-1.5), anchorEnd(p.end), esc(m.Label))
		}
	case MarkFenced:
		fmt.Fprintf(b, `<path d="M%s %sl8 8m0 -8l-8 8"/>`, num(x-4), num(ry-4))
	case MarkAccepted, MarkUnknown:
		fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3"/>`, num(x), num(ry))
	default:
		fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="1.8"/>`, num(x), num(ry))
	}
	if m.Highlight {
		fmt.Fprintf(b, `<circle class="ring" cx="%s" cy="%s" r="7"/>`, num(x), num(ry))
	}
	b.WriteString(`</g>`)
}

// writeNotes says what the chart left out.
func (t *Timeline) writeNotes(b *strings.Builder, names []string) {
	var notes []string
	for _, n := range names {
		l := t.lanes[n]
		if len(l.sample) < l.ordinary {
			notes = append(notes, fmt.Sprintf("%s: %d of %d", n, len(l.sample), l.ordinary))
		}
	}
	var out []string
	if len(notes) > 0 {
		out = append(out, "Drawn, a uniform sample of the ordinary events: "+strings.Join(notes, ", ")+
			"; besides them, every event kept out of the sample (highlighted, or fenced) and every span.")
	}
	if t.droppedKept > 0 {
		out = append(out, fmt.Sprintf("%d kept events are not drawn: the chart draws at most %d.", t.droppedKept, cmp.Or(t.MaxKept, DefaultMaxKept)))
	}
	if t.droppedSpans > 0 {
		out = append(out, fmt.Sprintf("%d spans are not drawn: the chart draws at most %d.", t.droppedSpans, cmp.Or(t.MaxSpans, DefaultMaxSpans)))
	}
	for _, s := range out {
		b.WriteString(`<p class="tl-note">` + esc(s) + `</p>`)
	}
}

// CSS implements Styled.
func (t *Timeline) CSS() string { return timelineCSS }

const timelineCSS = `
.tl-chart { margin: 0.5em 0; }
svg.tl { display: block; width: 100%; height: auto; font: 11px system-ui, sans-serif; }
.tl .lane { fill: #ffffff; }
.tl .lane.alt { fill: #f7f8fa; }
.tl .lane-name { font-weight: 600; fill: #1d2330; }
.tl .row-name { fill: #5b6475; font-size: 10px; }
.tl .row { stroke: #eceef2; }
.tl .grid { stroke: #e3e6eb; stroke-dasharray: 2 3; }
.tl .tick { fill: #5b6475; font-size: 10px; text-anchor: middle; }
.tl .span rect { fill-opacity: 0.55; }
.tl .s-pause rect { fill: #fcd34d; }
.tl .s-kill rect { fill: #ef4444; }
.tl .s-kill rect:not(.instant) { fill-opacity: 0.18; }
.tl .s-net rect { fill: #93c5fd; fill-opacity: 0.35; }
.tl .s-other rect { fill: #cbd5e1; fill-opacity: 0.4; }
.tl .span-label { font-size: 10px; fill: #7f1d1d; }
.tl .s-net .span-label { fill: #1e3a8a; }
.tl .s-pause .span-label { fill: #78350f; }
.tl .dur { stroke: #b6bdc9; stroke-width: 1; }
.tl .hit { fill: transparent; }
.tl .grant rect { fill: #2563eb; }
.tl .token { fill: #1e40af; font-size: 9px; }
.tl .ok circle:not(.hit) { fill: #16a34a; }
.tl .fenced path { stroke: #dc2626; stroke-width: 2.5; }
.tl .unknown circle:not(.hit) { fill: #ffffff; stroke: #6b7280; stroke-width: 1.2; }
.tl .other circle:not(.hit) { fill: #94a3b8; }
.tl .ring { fill: none; stroke: #dc2626; stroke-width: 2; }
.tl g.m:target .hit { fill: #f59e0b; fill-opacity: 0.45; stroke: #b45309; stroke-width: 2; r: 10px; }
.tl-legend { display: flex; flex-wrap: wrap; gap: 0.3em 1.2em; color: #5b6475; font-size: 12px; }
.tl-legend svg { vertical-align: middle; }
.tl-note, .tl-empty { color: #5b6475; font-size: 12px; }
`

// timelineLegend explains the marks and spans.
const timelineLegend = `<div class="tl-legend">` +
	`<span><svg width="8" height="14"><rect x="3" y="0" width="2" height="14" fill="#2563eb"/></svg> lock granted (its token)</span>` +
	`<span><svg width="12" height="12"><circle cx="6" cy="6" r="3.5" fill="#16a34a"/></svg> write accepted</span>` +
	`<span><svg width="12" height="12"><path d="M2 2l8 8m0 -8l-8 8" stroke="#dc2626" stroke-width="2.5"/></svg> write fenced</span>` +
	`<span><svg width="12" height="12"><circle cx="6" cy="6" r="3.5" fill="#fff" stroke="#6b7280"/></svg> outcome unknown</span>` +
	`<span><svg width="12" height="12"><circle cx="6" cy="6" r="2" fill="#94a3b8"/></svg> other (read, release, refusal)</span>` +
	`<span><svg width="14" height="14"><circle cx="7" cy="7" r="5.5" fill="none" stroke="#dc2626" stroke-width="2"/></svg> named by a violation</span>` +
	`<span><svg width="16" height="10"><rect width="16" height="10" fill="#fcd34d" fill-opacity="0.55"/></svg> paused</span>` +
	`<span><svg width="16" height="10"><rect width="16" height="10" fill="#ef4444" fill-opacity="0.3"/><rect width="2" height="10" fill="#ef4444"/></svg> killed</span>` +
	`<span><svg width="16" height="10"><rect width="16" height="10" fill="#93c5fd" fill-opacity="0.5"/></svg> network fault</span>` +
	`</div>`

// tickSteps are the steps of the time axis beyond 10 s; below, 1, 2 or 5
// times a power of ten.
var tickSteps = []time.Duration{
	15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute,
	15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// tickStep returns the step of the time axis, the smallest that puts the
// ticks at least 80 px apart.
func tickStep(end time.Duration, w float64) time.Duration {
	want := float64(max(end, 1)) * 80 / max(w, 1)
	for step := time.Duration(1); step <= 10*time.Second; step *= 10 {
		for _, m := range []time.Duration{1, 2, 5} {
			if float64(step*m) >= want && step*m <= 10*time.Second {
				return step * m
			}
		}
	}
	for _, step := range tickSteps {
		if float64(step) >= want {
			return step
		}
	}
	return time.Duration(math.Ceil(want/float64(24*time.Hour))) * 24 * time.Hour
}

// tickLabel formats a tick of the axis whose step is step.
func tickLabel(d, step time.Duration) string {
	switch {
	case step >= time.Minute && d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case step >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
	case step >= time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64) + "ms"
	}
	return d.String()
}

// num formats a coordinate.
func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

func esc(s string) string { return template.HTMLEscapeString(s) }

// naturalCompare orders strings with their runs of digits compared as
// numbers: r2 before r10, client 9 before client 10.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

// digits returns the length of the run of ASCII digits that s starts with.
func digits(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
