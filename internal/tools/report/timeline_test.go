package report

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// render returns t's markup, in a page (so that its CSS is in too).
func render(t *testing.T, tl *Timeline) string {
	t.Helper()
	var p Page
	p.Title = "timeline"
	p.Section("Timeline", "timeline", tl)
	var b bytes.Buffer
	if _, err := p.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if refs := ExternalReferences(b.Bytes()); len(refs) > 0 {
		t.Errorf("the page refers outside itself: %q", refs)
	}
	return b.String()
}

// coordinate matches the numeric attributes of the chart's elements.
var coordinate = regexp.MustCompile(`\b(x|y|x1|x2|y1|y2|cx|cy|r|width|height)="([^"]*)"`)

// checkCoordinates fails t if an attribute of the chart is not a finite
// number within the chart.
func checkCoordinates(t *testing.T, doc string) {
	t.Helper()
	svg := doc[strings.Index(doc, `<svg class="tl"`):]
	w, h := -1.0, -1.0
	n := 0
	for _, m := range coordinate.FindAllStringSubmatch(svg, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("%s=%q is not a finite number", m[1], m[2])
		}
		if w < 0 && m[1] == "width" {
			w = v
		} else if h < 0 && m[1] == "height" {
			h = v
		}
		if (m[1] == "x" || m[1] == "x1" || m[1] == "x2" || m[1] == "cx") && (v < -10 || v > w+10) ||
			(m[1] == "y" || m[1] == "y1" || m[1] == "y2" || m[1] == "cy") && (v < -10 || v > h+10) {
			t.Fatalf("%s=%v outside the chart (%vx%v)", m[1], v, w, h)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no coordinates in the chart")
	}
}

func TestTimeline_Empty(t *testing.T) {
	doc := render(t, &Timeline{})
	if !strings.Contains(doc, "No events to draw.") || strings.Contains(doc, `<svg class="tl"`) {
		t.Fatalf("an empty timeline draws a chart, or does not say it is empty:\n%s", doc)
	}
	// Spans alone, with nothing to draw them on.
	tl := &Timeline{}
	tl.AddSpan(Span{Kind: SpanKill, Start: time.Second, Title: "kill"})
	if doc := render(t, tl); !strings.Contains(doc, "No events to draw.") {
		t.Fatal("a timeline of spans only does not say it is empty")
	}
}

func TestTimeline_Marks(t *testing.T) {
	tl := &Timeline{}
	tl.Add("r0", Mark{ID: "op-1", Row: "client 0", Kind: MarkGrant, Start: 10 * time.Millisecond, End: 20 * time.Millisecond, Label: "7", Title: "acquire r0 <token 7>"})
	tl.Add("r0", Mark{ID: "op-2", Row: "client 0", Kind: MarkAccepted, Start: 30 * time.Millisecond, End: 900 * time.Millisecond, Title: "write r0/k0 token 7"})
	tl.Add("r10", Mark{ID: "op-3", Row: "client 1", Kind: MarkFenced, End: time.Second, Title: "write r10/k0 fenced", Keep: true, Highlight: true})
	tl.Add("r2", Mark{ID: "op-3", Row: "client 1", Kind: MarkFenced, End: time.Second, Title: "the same op in another lane"})
	tl.Add("r2", Mark{Row: "client 1", Kind: MarkUnknown, End: 2 * time.Second, Title: "write r2/k1 unknown"})
	doc := render(t, tl)
	for _, want := range []string{
		`<g class="m grant" id="op-1"><title>acquire r0 &lt;token 7&gt;</title>`,
		`<text class="token"`, `>7</text>`,
		`<g class="m ok" id="op-2"><title>write r0/k0 token 7</title><line class="dur"`,
		`<g class="m fenced hl" id="op-3"><title>write r10/k0 fenced</title>`,
		`<circle class="ring"`,
		`<g class="m unknown"><title>write r2/k1 unknown</title>`,
		`>client 0</text>`, `>client 1</text>`,
		"svg.tl {", // the CSS
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("the chart lacks %q", want)
		}
	}
	if n := strings.Count(doc, `id="op-3"`); n != 1 {
		t.Errorf(`id="op-3" %d times, want once`, n)
	}
	// Lanes in natural order: r0, r2, r10.
	i0, i2, i10 := strings.Index(doc, ">r0</text>"), strings.Index(doc, ">r2</text>"), strings.Index(doc, ">r10</text>")
	if i0 < 0 || i2 < 0 || i10 < 0 || !(i0 < i2 && i2 < i10) {
		t.Errorf("lanes at %d, %d, %d: want r0, r2, r10 in that order", i0, i2, i10)
	}
	for id, want := range map[string]bool{"op-1": true, "op-3": true, "op-4": false, "": false} {
		if got := tl.Has(id); got != want {
			t.Errorf("Has(%q)=%v, want %v", id, got, want)
		}
	}
	checkCoordinates(t, doc)
}

// TestTimeline_Sampling adds far more ordinary marks than a lane keeps:
// the chart draws MaxMarks of them, and every kept one.
func TestTimeline_Sampling(t *testing.T) {
	tl := &Timeline{MaxMarks: 50}
	const ordinary, fenced = 10000, 40
	for i := range ordinary {
		at := time.Duration(i) * time.Millisecond
		tl.Add("r0", Mark{ID: fmt.Sprintf("op-%d", i), Row: fmt.Sprintf("client %d", i%3), Kind: MarkAccepted, Start: at, End: at + time.Millisecond, Title: "w"})
		if i%(ordinary/fenced) == 0 {
			tl.Add("r0", Mark{ID: fmt.Sprintf("fenced-%d", i), Row: "client 0", Kind: MarkFenced, End: at, Title: "f", Keep: true})
		}
	}
	doc := render(t, tl)
	if n := strings.Count(doc, `<g class="m ok"`); n != 50 {
		t.Errorf("%d accepted writes drawn, want 50", n)
	}
	for i := 0; i < ordinary; i += ordinary / fenced {
		if id := fmt.Sprintf(`id="fenced-%d"`, i); !strings.Contains(doc, id) {
			t.Errorf("the fenced write %s was sampled away", id)
		}
	}
	if n := strings.Count(doc, `<g class="m fenced"`); n != fenced {
		t.Errorf("%d fenced writes drawn, want %d", n, fenced)
	}
	if !strings.Contains(doc, "r0: 50 of 10000") {
		t.Errorf("the note does not say what was sampled:\n%s", doc[strings.LastIndex(doc, "</svg>"):])
	}
	// The sample spreads over the run, not its first 50 marks.
	if tl.Has("op-49") && tl.Has("op-48") && tl.Has("op-47") {
		t.Error("the sample looks like the first marks added")
	}
	late := 0
	for i := ordinary / 2; i < ordinary; i++ {
		if tl.Has(fmt.Sprintf("op-%d", i)) {
			late++
		}
	}
	if late < 10 {
		t.Errorf("%d of the 50 marks drawn are from the second half of the run", late)
	}
	// The same input draws the same chart.
	again := &Timeline{MaxMarks: 50}
	for i := range ordinary {
		at := time.Duration(i) * time.Millisecond
		again.Add("r0", Mark{ID: fmt.Sprintf("op-%d", i), Row: fmt.Sprintf("client %d", i%3), Kind: MarkAccepted, Start: at, End: at + time.Millisecond, Title: "w"})
		if i%(ordinary/fenced) == 0 {
			again.Add("r0", Mark{ID: fmt.Sprintf("fenced-%d", i), Row: "client 0", Kind: MarkFenced, End: at, Title: "f", Keep: true})
		}
	}
	if render(t, again) != doc {
		t.Error("the same marks drew another chart")
	}
	checkCoordinates(t, doc)
}

func TestTimeline_MaxKept(t *testing.T) {
	tl := &Timeline{MaxKept: 3}
	for i := range 5 {
		tl.Add("r0", Mark{ID: fmt.Sprintf("op-%d", i), Row: "c", Kind: MarkFenced, End: time.Duration(i) * time.Second, Keep: true})
	}
	doc := render(t, tl)
	if n := strings.Count(doc, `<g class="m fenced"`); n != 3 {
		t.Errorf("%d kept marks drawn, want 3", n)
	}
	if !tl.Has("op-2") || tl.Has("op-3") {
		t.Error("not the first 3 kept marks")
	}
	if !strings.Contains(doc, "2 kept events are not drawn: the chart draws at most 3.") {
		t.Error("the chart does not say that it left kept marks out")
	}
}

func TestTimeline_Spans(t *testing.T) {
	tl := &Timeline{MaxSpans: 4}
	for _, lane := range []string{"r0", "r1", "r2"} {
		tl.Add(lane, Mark{Row: "client 0", Kind: MarkAccepted, End: 5 * time.Second})
	}
	tl.Add("r1", Mark{Row: "client 3", Kind: MarkFenced, End: 6 * time.Second, Keep: true})
	tl.AddSpan(Span{ID: "fault-1", Kind: SpanPause, Row: "client 3", Start: 2 * time.Second, End: 4 * time.Second, Title: "SIGSTOP client-3"})
	tl.AddSpan(Span{ID: "fault-2", Kind: SpanPause, Row: "client 0", Start: time.Second, End: 3 * time.Second, Title: "SIGSTOP client-0"})
	tl.AddSpan(Span{ID: "fault-3", Kind: SpanKill, Start: 7 * time.Second, Label: "kill", Title: "kill -9"})
	tl.AddSpan(Span{ID: "fault-4", Kind: SpanNet, Lane: "r2", Start: 7 * time.Second, End: 8 * time.Second, Title: "latency"})
	tl.AddSpan(Span{ID: "fault-5", Kind: SpanNet, Start: 8 * time.Second, End: 9 * time.Second, Title: "dropped"})
	doc := render(t, tl)
	count := func(id string) int {
		i := strings.Index(doc, `id="`+id+`"`)
		if i < 0 {
			t.Fatalf("no %s", id)
		}
		g := doc[i:]
		return strings.Count(g[:strings.Index(g, "</g>")], "<rect")
	}
	// client 3 has a row in r1 only; client 0 in every lane.
	if n := count("fault-1"); n != 1 {
		t.Errorf("the pause of client 3 is drawn %d times, want once (its one row)", n)
	}
	if n := count("fault-2"); n != 3 {
		t.Errorf("the pause of client 0 is drawn %d times, want 3 (a row in each lane)", n)
	}
	if n := count("fault-3"); n != 1 || !strings.Contains(doc, `<rect class="instant"`) || !strings.Contains(doc, `class="span-label"`) {
		t.Errorf("the kill is not drawn as one labelled instant across the chart")
	}
	if n := count("fault-4"); n != 1 {
		t.Errorf("the lane's span is drawn %d times", n)
	}
	if strings.Contains(doc, `id="fault-5"`) || !strings.Contains(doc, "1 spans are not drawn: the chart draws at most 4.") {
		t.Error("the span past MaxSpans is drawn, or not counted")
	}
	if !tl.Has("fault-1") || tl.Has("fault-5") {
		t.Error("Has does not know the spans drawn")
	}
	checkCoordinates(t, doc)
}

// TestTimeline_Degenerate draws marks that all happen at time 0, and times
// out of order or negative: every coordinate stays a finite number.
func TestTimeline_Degenerate(t *testing.T) {
	tl := &Timeline{}
	tl.Add("r0", Mark{Row: "a", Kind: MarkAccepted})
	tl.Add("r0", Mark{Row: "b", Kind: MarkGrant, Start: -time.Second, End: -5, Label: "1"})
	tl.Add("r0", Mark{Row: "b", Kind: MarkFenced, Start: 3, End: 1})
	tl.AddSpan(Span{Kind: SpanPause, Row: "a", Start: -1, End: -2})
	doc := render(t, tl)
	checkCoordinates(t, doc)
	if strings.Contains(doc, "NaN") || strings.Contains(doc, "Inf") {
		t.Fatal("NaN or Inf in the chart")
	}
	// A long run: the plot is as wide as any, and the axis has ticks.
	long := &Timeline{}
	long.Add("r0", Mark{Row: "a", End: 2 * time.Hour})
	doc = render(t, long)
	checkCoordinates(t, doc)
	if !strings.Contains(doc, `width="1010.0"`) || !strings.Contains(doc, ">120m<") {
		t.Errorf("a 2 h run: not 1010 px wide with an axis to 120m:\n%.600s", doc[strings.Index(doc, `<svg class="tl"`):])
	}
}

func TestTickStep(t *testing.T) {
	for _, tc := range []struct {
		end  time.Duration
		w    float64
		want time.Duration
	}{
		{30 * time.Second, 880, 5 * time.Second},
		{10 * time.Second, 880, time.Second},
		{time.Second, 880, 100 * time.Millisecond},
		{0, 880, 1},
		{time.Hour, 6000, 1 * time.Minute},
		{2 * time.Hour, 6000, 2 * time.Minute},
		{90 * time.Second, 880, 10 * time.Second},
		{3 * time.Minute, 880, 30 * time.Second},
		{1000 * time.Hour, 100, 34 * 24 * time.Hour},
	} {
		if got := tickStep(tc.end, tc.w); got != tc.want {
			t.Errorf("tickStep(%s, %v)=%s, want %s", tc.end, tc.w, got, tc.want)
		}
	}
	if got := tickLabel(90*time.Second, 10*time.Second); got != "90s" {
		t.Errorf("tickLabel=%q", got)
	}
	if got := tickLabel(3*time.Minute, time.Minute); got != "3m" {
		t.Errorf("tickLabel=%q", got)
	}
	if got := tickLabel(1500*time.Millisecond, 500*time.Millisecond); got != "1500ms" {
		t.Errorf("tickLabel=%q", got)
	}
}

func TestNaturalCompare(t *testing.T) {
	want := []string{"", "client 0", "client 2", "client 10", "final reads", "r", "r0", "r1", "r02", "r9", "r10", "r10a", "r100", "s"}
	got := slices.Clone(want)
	slices.Reverse(got)
	slices.SortFunc(got, naturalCompare)
	if !slices.Equal(got, want) {
		t.Fatalf("sorted %q\nwant   %q", got, want)
	}
	if naturalCompare("r01", "r1") == 0 && naturalCompare("r1", "r01") == 0 {
		// Equal as numbers; either order is fine, but it must be consistent.
		return
	}
	if naturalCompare("r01", "r1") != -naturalCompare("r1", "r01") {
		t.Fatal("naturalCompare is not antisymmetric")
	}
}

// labelBox is a label of the chart and the stretch of x it covers.
type labelBox struct {
	text        string
	y           string
	left, right float64
}

// labelText matches the text elements of a class, with their position,
// their anchor if any and their text.
func labelText(class string) *regexp.Regexp {
	return regexp.MustCompile(`<text class="` + class + `" x="([^"]+)" y="([^"]+)"( text-anchor="end")?>([^<]*)</text>`)
}

// labelBoxes returns the boxes of the labels of class in doc, drawn at
// size px, each character taken as wide as a digit of DejaVu Sans
// (0.636 em), the widest of the common sans-serif fonts' digits.
func labelBoxes(t *testing.T, doc, class string, size float64) []labelBox {
	t.Helper()
	var boxes []labelBox
	for _, m := range labelText(class).FindAllStringSubmatch(doc, -1) {
		x, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		w := 0.636 * size * float64(len([]rune(m[4])))
		b := labelBox{text: m[4], y: m[2], left: x, right: x + w}
		if m[3] != "" {
			b.left, b.right = x-w, x
		}
		boxes = append(boxes, b)
	}
	return boxes
}

// checkNoOverlap fails t if two of boxes on one line share an x.
func checkNoOverlap(t *testing.T, what string, boxes []labelBox) {
	t.Helper()
	byLine := make(map[string][]labelBox)
	for _, b := range boxes {
		byLine[b.y] = append(byLine[b.y], b)
	}
	for y, bs := range byLine {
		slices.SortFunc(bs, func(a, b labelBox) int { return cmp.Compare(a.left, b.left) })
		for i := 1; i < len(bs); i++ {
			if bs[i].left < bs[i-1].right {
				t.Errorf("%s at y=%s overlap: %q over %.1f..%.1f and %q over %.1f..%.1f", what, y,
					bs[i-1].text, bs[i-1].left, bs[i-1].right, bs[i].text, bs[i].left, bs[i].right)
			}
		}
	}
}

// TestTimeline_LabelsDoNotOverlap draws a long run's grants with large
// tokens, close together on few rows, and many faults across the chart:
// the labels drawn (a grant's token, a fault's kind) never overlap, as
// "1113" and "138166" did into "1113138166", and each stays within the
// chart; enough of them are drawn to read.
func TestTimeline_LabelsDoNotOverlap(t *testing.T) {
	tl := &Timeline{}
	const grants = 4000
	for i := range grants {
		at := time.Duration(i) * 20 * time.Millisecond // 80 s
		m := Mark{ID: fmt.Sprintf("op-%d", i), Row: fmt.Sprintf("client %d", i%3), Kind: MarkGrant, Start: at, End: at + 3*time.Millisecond,
			Label: strconv.Itoa(1000000 + i), Title: "acquire"}
		m.Keep = i%7 == 0 // kept ones interleaved with the sample
		tl.Add("r0", m)
	}
	for i := range 200 {
		at := time.Duration(i) * 400 * time.Millisecond
		tl.AddSpan(Span{Kind: SpanKill, Start: at, End: at + 100*time.Millisecond, Label: []string{"lose-unsynced", "kill", "clock-skew"}[i%3], Title: "fault"})
	}
	doc := render(t, tl)
	checkCoordinates(t, doc)
	tokens := labelBoxes(t, doc, "token", 9)
	spans := labelBoxes(t, doc, "span-label", 10)
	if len(tokens) < 40 || len(spans) < 8 {
		t.Fatalf("%d token labels and %d fault labels drawn: too few to read", len(tokens), len(spans))
	}
	checkNoOverlap(t, "token labels", tokens)
	checkNoOverlap(t, "fault labels", spans)
	vb := regexp.MustCompile(`<svg class="tl"[^>]* viewBox="0 0 ([0-9.]+) `).FindStringSubmatch(doc)
	if vb == nil {
		t.Fatal("the chart has no viewBox")
	}
	width, _ := strconv.ParseFloat(vb[1], 64)
	for _, b := range append(tokens, spans...) {
		if b.left < tlLabelW || b.right > width {
			t.Errorf("the label %q over %.1f..%.1f leaves the plot (%d..%.1f)", b.text, b.left, b.right, tlLabelW, width)
		}
	}
}

// TestTimeline_FitsThePage: however long the run, the chart is drawn at
// one size and scales to the width of the page (a viewBox, width 100%),
// instead of growing to 6000 px that scroll sideways.
func TestTimeline_FitsThePage(t *testing.T) {
	svgTag := regexp.MustCompile(`<svg class="tl" width="([0-9.]+)" height="[0-9.]+" viewBox="0 0 ([0-9.]+) [0-9.]+"`)
	var widths []string
	for _, end := range []time.Duration{10 * time.Second, 2 * time.Minute, 2 * time.Hour} {
		tl := &Timeline{}
		tl.Add("r0", Mark{Row: "a", Kind: MarkAccepted, End: end})
		doc := render(t, tl)
		m := svgTag.FindStringSubmatch(doc)
		if m == nil {
			t.Fatalf("a %s run: no chart with a width and a viewBox:\n%.400s", end, doc[strings.Index(doc, "<svg"):])
		}
		w, _ := strconv.ParseFloat(m[2], 64)
		if w > 1010 {
			t.Errorf("a %s run: the chart is %v px wide, wider than the page's 72em", end, w)
		}
		widths = append(widths, m[2])
		if strings.Contains(doc, "max-width: none") || strings.Contains(doc, "overflow-x: auto; margin") {
			t.Errorf("a %s run: the chart is kept from shrinking, or scrolls in a box of its own", end)
		}
		css := doc[strings.Index(doc, "svg.tl {"):]
		css = css[:strings.Index(css, "}")]
		for _, want := range []string{"width: 100%", "height: auto"} {
			if !strings.Contains(css, want) {
				t.Errorf("the chart's style %q lacks %q: it does not scale to the page", css, want)
			}
		}
	}
	if widths[0] != widths[2] {
		t.Errorf("a 10 s run's chart is %s px wide, a 2 h run's %s: want one size, scaled", widths[0], widths[2])
	}
}
