package report

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// Default size of a chart, in pixels; it shrinks to the page's width.
const (
	DefaultChartWidth  = 720
	DefaultChartHeight = 260
)

// palette colours the series of a LineChart in order: a blue, an orange, a
// red, a green and more, told apart also by people with a red-green colour
// deficiency.
var palette = []string{"#4269d0", "#efb118", "#e0483d", "#3ca951", "#a463f2", "#6cc5b0", "#ff8ab7", "#9c6b4e"}

// Point is one value of a Series: Y at X. A Y that is NaN is no value: the
// line breaks there.
type Point struct{ X, Y float64 }

// Series is one line of a LineChart.
type Series struct {
	// Name is the series' name in the legend and in the points' tooltips.
	Name string
	// Color is a CSS colour; "" takes the next of the chart's palette.
	Color string
	// Points are the series' values in the order of X.
	Points []Point
}

// LineChart draws series of values along a common x axis, time as a rule
// (throughput, latency quantiles over a run), as inline SVG: axes with
// ticks and labels, light grid lines, a legend, the title as text and as
// the SVG's <title>. It needs no script; points carry tooltips when a
// series has few enough of them to be drawn as dots. Points with a NaN or
// infinite coordinate are left out, and so are points outside a fixed x
// axis; a chart without a point to draw shows its axes and "no data".
type LineChart struct {
	Title   string // above the chart; "" for none
	Caption string // under the chart, e.g. how the values were measured; "" for none
	XLabel  string // under the x axis, e.g. "seconds since the start"
	YLabel  string // along the y axis, e.g. "operations per second"
	XUnit   string // after x values in tooltips, e.g. "s"; "" for none
	YUnit   string // after y values in tooltips, e.g. "ms"; "" for none
	Series  []Series

	// LogY draws the y axis on a log scale (powers of ten); values <= 0
	// are then left out. A linear y axis starts at 0 unless a value is
	// negative.
	LogY bool

	// XMin and XMax fix the x axis, e.g. to the run's duration; if XMax <=
	// XMin the axis spans the data.
	XMin, XMax float64

	// Width and Height are the size in pixels; zero means
	// DefaultChartWidth and DefaultChartHeight.
	Width, Height int
}

// Bar is one bar of a Histogram: Count values in [Lo, Hi).
type Bar struct {
	Lo, Hi float64
	Count  int64
}

// Marker is a vertical line across a Histogram at X, e.g. a quantile, with a
// short Label such as "p99".
type Marker struct {
	X     float64
	Label string
}

// Histogram draws counts of values in ranges as bars, as inline SVG, with
// axes, ticks, labels, markers and a tooltip on each bar. It needs no script.
// Bars with a NaN, infinite or (on a log axis) non-positive bound are left
// out; a histogram without a bar to draw shows its axes and "no data".
type Histogram struct {
	Title   string // above the chart; "" for none
	Caption string // under the chart; "" for none
	XLabel  string // under the x axis, e.g. "latency (ms), log scale"
	YLabel  string // along the y axis, e.g. "requests"
	Unit    string // after values in tooltips, e.g. "ms"; "" for none
	Bars    []Bar  // in the order of Lo
	Markers []Marker

	// LogX draws the x axis on a log scale: latency buckets that grow by a
	// factor are then bars of one width.
	LogX bool

	// Width and Height are the size in pixels; zero means
	// DefaultChartWidth and DefaultChartHeight.
	Width, Height int
}

// The chart's margins, in pixels: room for the title and the legend above,
// for the y tick labels and the y label on the left, for the x tick labels
// and the x label below.
const (
	marginTop    = 40
	marginRight  = 16
	marginBottom = 46
	marginLeft   = 66
)

// HTML implements Block.
func (c LineChart) HTML() template.HTML {
	w, h := size(c.Width, c.Height)
	var xs, ys []float64
	for _, s := range c.Series {
		for _, p := range s.Points {
			if c.keeps(p) {
				xs = append(xs, p.X)
				ys = append(ys, p.Y)
			}
		}
	}
	var x axis
	if c.fixedX() {
		x = fixedAxis(c.XMin, c.XMax)
	} else {
		x = linearAxis(xs, false)
	}
	y := linearAxis(ys, true)
	if c.LogY {
		y = logAxis(ys)
	}
	var b strings.Builder
	x, y = plotArea(&b, w, h, x, y, c.Title, c.XLabel, c.YLabel, len(xs) == 0)
	legendX := float64(w - marginRight)
	for i := len(c.Series) - 1; i >= 0; i-- { // right-aligned, so from the last
		s := c.Series[i]
		color := seriesColor(s, i)
		legendX -= textWidth(s.Name) + 26
		fmt.Fprintf(&b, `<g class="legend"><line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2.5"/>`,
			coord(legendX), coord(22), coord(legendX+16), coord(22), escapeText(color))
		fmt.Fprintf(&b, `<text x="%s" y="26" font-size="12" fill="#1d2330">%s</text></g>`, coord(legendX+20), escapeText(s.Name))
		legendX -= 6
	}
	for i, s := range c.Series {
		c.drawSeries(&b, s, seriesColor(s, i), x, y)
	}
	b.WriteString("</svg>")
	return figure(b.String(), c.Caption)
}

// fixedX reports whether XMin and XMax fix the x axis.
func (c LineChart) fixedX() bool { return c.XMax > c.XMin && finite(c.XMin) && finite(c.XMax) }

// keeps reports whether p is drawn: its coordinates are finite, it has a
// place on the y axis, and on the x axis if that is fixed.
func (c LineChart) keeps(p Point) bool {
	return finite(p.X) && finite(p.Y) && (!c.LogY || p.Y > 0) && (!c.fixedX() || p.X >= c.XMin && p.X <= c.XMax)
}

// dotsUpTo is the most points a series may have to be drawn with dots (and
// tooltips) on its line.
const dotsUpTo = 40

func (c LineChart) drawSeries(b *strings.Builder, s Series, color string, x, y axis) {
	fmt.Fprintf(b, `<g class="series"><title>%s</title>`, escapeText(s.Name))
	var run []string // the points of the current stretch of line
	var lone []Point // points drawn as dots
	flush := func(last Point) {
		if len(run) == 1 {
			lone = append(lone, last)
		} else if len(run) > 1 {
			fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.8" stroke-linejoin="round"/>`,
				strings.Join(run, " "), escapeText(color))
		}
		run = run[:0]
	}
	var prev Point
	drawn := 0
	for _, p := range s.Points {
		if !c.keeps(p) {
			flush(prev)
			continue
		}
		run = append(run, coord(x.pos(p.X))+","+coord(y.pos(p.Y)))
		prev = p
		drawn++
	}
	flush(prev)
	dots := lone
	if drawn <= dotsUpTo {
		dots = nil
		for _, p := range s.Points {
			if c.keeps(p) {
				dots = append(dots, p)
			}
		}
	}
	for _, p := range dots {
		fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="2.6" fill="%s"><title>%s at %s: %s</title></circle>`,
			coord(x.pos(p.X)), coord(y.pos(p.Y)), escapeText(color), escapeText(s.Name), escapeText(withUnit(label(p.X), c.XUnit)), escapeText(withUnit(label(p.Y), c.YUnit)))
	}
	b.WriteString("</g>")
}

// HTML implements Block.
func (hg Histogram) HTML() template.HTML {
	w, h := size(hg.Width, hg.Height)
	var bars []Bar
	var edges, counts []float64
	for _, bar := range hg.Bars {
		if !finite(bar.Lo) || !finite(bar.Hi) || bar.Hi < bar.Lo || hg.LogX && bar.Lo <= 0 || bar.Count < 0 {
			continue
		}
		bars = append(bars, bar)
		edges = append(edges, bar.Lo, bar.Hi)
		counts = append(counts, float64(bar.Count))
	}
	x := linearAxis(edges, false)
	if hg.LogX {
		x = logAxis(edges)
	}
	y := linearAxis(counts, true)
	var b strings.Builder
	x, y = plotArea(&b, w, h, x, y, hg.Title, hg.XLabel, hg.YLabel, len(bars) == 0)
	b.WriteString(`<g class="bars">`)
	for _, bar := range bars {
		x0, x1 := x.pos(bar.Lo), x.pos(bar.Hi)
		y0 := y.pos(float64(bar.Count))
		fmt.Fprintf(&b, `<rect x="%s" y="%s" width="%s" height="%s" fill="#4269d0"><title>%s–%s: %d</title></rect>`,
			coord(x0), coord(y0), coord(max(x1-x0-0.5, 0.5)), coord(y.p0-y0),
			escapeText(label(bar.Lo)), escapeText(withUnit(label(bar.Hi), hg.Unit)), bar.Count)
	}
	b.WriteString("</g>")
	for _, m := range hg.Markers {
		if !finite(m.X) || hg.LogX && m.X <= 0 || !x.contains(m.X) {
			continue
		}
		px := x.pos(m.X)
		fmt.Fprintf(&b, `<g class="mark"><title>%s: %s</title><line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#1d2330" stroke-dasharray="4 3"/>`,
			escapeText(m.Label), escapeText(withUnit(label(m.X), hg.Unit)), coord(px), coord(y.p0), coord(px), coord(y.p1-4))
		fmt.Fprintf(&b, `<text x="%s" y="%s" font-size="11" fill="#1d2330" text-anchor="middle">%s</text></g>`,
			coord(px), coord(y.p1-7), escapeText(m.Label))
	}
	b.WriteString("</svg>")
	return figure(b.String(), hg.Caption)
}

// Grid lays blocks, charts as a rule, out side by side, as many per row as
// the page's width holds (at least 30em each).
type Grid []Block

// HTML implements Block.
func (g Grid) HTML() template.HTML {
	var b strings.Builder
	b.WriteString(`<div class="grid">`)
	for _, blk := range g {
		b.WriteString(string(blk.HTML()))
	}
	b.WriteString("</div>")
	return template.HTML(b.String())
}

// CSS implements Styled.
func (Grid) CSS() string {
	return `.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(30em, 1fr)); gap: 0 1.5em; }`
}

// axis maps values of [lo, hi] to pixels of [p0, p1], linearly or on a log
// scale, and has the ticks to label. hi > lo, and lo > 0 on a log scale.
type axis struct {
	lo, hi float64
	log    bool
	ticks  []float64
	labels []string
	p0, p1 float64
}

func (a axis) pos(v float64) float64 {
	var t float64
	if a.log {
		t = (math.Log10(v) - math.Log10(a.lo)) / (math.Log10(a.hi) - math.Log10(a.lo))
	} else {
		t = (v - a.lo) / (a.hi - a.lo)
	}
	return a.p0 + t*(a.p1-a.p0)
}

func (a axis) contains(v float64) bool { return v >= a.lo && v <= a.hi }

// linearAxis returns an axis over vs (finite values), widened to whole
// ticks, from 0 if zero is true and no value is negative. Without values it
// spans 0 to 1; with one value, a tick on each side.
func linearAxis(vs []float64, zero bool) axis {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		lo, hi = min(lo, v), max(hi, v)
	}
	switch {
	case len(vs) == 0:
		lo, hi = 0, 1
	case zero:
		lo, hi = min(lo, 0), max(hi, 0)
	}
	if hi == lo {
		d := max(math.Abs(lo)/2, 1)
		if zero && lo == 0 {
			lo, hi = 0, 1
		} else {
			lo, hi = lo-d, hi+d
		}
	}
	step := niceStep((hi - lo) / 5)
	lo, hi = math.Floor(lo/step)*step, math.Ceil(hi/step)*step
	return ticked(lo, hi, step)
}

// fixedAxis returns an axis over exactly [lo, hi], with ticks inside.
func fixedAxis(lo, hi float64) axis {
	return ticked(lo, hi, niceStep((hi-lo)/6))
}

func ticked(lo, hi, step float64) axis {
	a := axis{lo: lo, hi: hi}
	for i := math.Ceil(lo/step - 1e-9); i*step <= hi+step*1e-9; i++ {
		v := i * step
		a.ticks = append(a.ticks, v)
		a.labels = append(a.labels, axisLabel(v, step))
	}
	return a
}

// niceStep returns 1, 2 or 5 times a power of ten, the smallest that is at
// least d (> 0).
func niceStep(d float64) float64 {
	if !(d > 0) || !finite(d) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(d)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= d*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// logAxis returns a log axis over vs, from a little below the least
// positive value to a little above the largest, with ticks at the powers
// of ten in it, or at 1, 2 and 5 times them, or at every multiple of them,
// the first of these that gives three ticks (two for the last). Without a
// positive value it spans 1 to 10; when no two ticks fit, it widens to
// powers of ten.
func logAxis(vs []float64) axis {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		if v > 0 {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	a := axis{lo: lo / 1.15, hi: hi * 1.15, log: true}
	for _, mults := range [][]float64{{1}, {1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}} {
		a.ticks, a.labels = logTicks(a.lo, a.hi, mults)
		if len(a.ticks) >= 3 || len(a.ticks) == 2 && len(mults) == 9 {
			return a
		}
	}
	k0, k1 := math.Floor(math.Log10(a.lo)), math.Ceil(math.Log10(a.hi))
	a.lo, a.hi = math.Pow(10, k0), math.Pow(10, k1)
	a.ticks, a.labels = logTicks(a.lo, a.hi, []float64{1, 2, 5})
	return a
}

// logTicks returns the values m*10^k in [lo, hi] for m in mults, and their
// labels.
func logTicks(lo, hi float64, mults []float64) (ticks []float64, labels []string) {
	for k := int(math.Floor(math.Log10(lo))); k <= int(math.Ceil(math.Log10(hi))); k++ {
		p := math.Pow(10, float64(k))
		for _, m := range mults {
			if v := m * p; v >= lo*(1-1e-9) && v <= hi*(1+1e-9) {
				ticks = append(ticks, v)
				labels = append(labels, axisLabel(v, p))
			}
		}
	}
	return ticks, labels
}

// axisLabel formats a tick v of an axis whose ticks are step apart (or, on
// a log axis, of the decade step), thousands and millions as k and M.
func axisLabel(v, step float64) string {
	unit, div := "", 1.0
	switch av := math.Abs(v); {
	case av >= 1e6 && step >= 1e5:
		unit, div = "M", 1e6
	case av >= 1e3 && step >= 100:
		unit, div = "k", 1e3
	}
	decimals := max(0, -int(math.Floor(math.Log10(step/div)+1e-9)))
	s := strconv.FormatFloat(v/div, 'f', decimals, 64)
	if unit != "" && strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if v == 0 {
		s = "0"
	}
	return s + unit
}

// label formats a value for a tooltip: four significant digits at most.
func label(v float64) string {
	switch av := math.Abs(v); {
	case av == 0:
		return "0"
	case av >= 1e4:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func withUnit(s, unit string) string {
	if unit == "" {
		return s
	}
	return s + " " + unit
}

func size(w, h int) (int, int) {
	if w <= marginLeft+marginRight+20 {
		w = DefaultChartWidth
	}
	if h <= marginTop+marginBottom+20 {
		h = DefaultChartHeight
	}
	return w, h
}

// openSVG starts the SVG of a chart, with its title.
// plotArea places x and y in a chart of w by h, and starts the chart in b:
// the SVG element, the frame with its axes and labels, and "no data" if
// empty. It returns the placed axes.
func plotArea(b *strings.Builder, w, h int, x, y axis, title, xLabel, yLabel string, empty bool) (axis, axis) {
	x.p0, x.p1 = marginLeft, float64(w-marginRight)
	y.p0, y.p1 = float64(h-marginBottom), marginTop
	openSVG(b, w, h, title)
	frame(b, h, x, y, xLabel, yLabel)
	if empty {
		noData(b, w, h)
	}
	return x, y
}

func openSVG(b *strings.Builder, w, h int, title string) {
	fmt.Fprintf(b, `<svg viewBox="0 0 %d %d" width="%d" height="%d" role="img" font-family="system-ui, sans-serif">`, w, h, w, h)
	if title != "" {
		fmt.Fprintf(b, `<title>%s</title><text x="2" y="16" font-size="14" font-weight="600" fill="#1d2330">%s</text>`, escapeText(title), escapeText(title))
	}
}

// frame draws the grid lines, the axes, their ticks and their labels.
func frame(b *strings.Builder, h int, x, y axis, xLabel, yLabel string) {
	b.WriteString(`<g class="axes" font-size="11" fill="#5b6475">`)
	for i, t := range y.ticks {
		py := y.pos(t)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#eceef2"/>`, coord(x.p0), coord(py), coord(x.p1), coord(py))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end">%s</text>`, coord(x.p0-6), coord(py+4), escapeText(y.labels[i]))
	}
	for i, t := range x.ticks {
		px := x.pos(t)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#8a93a5"/>`, coord(px), coord(y.p0), coord(px), coord(y.p0+5))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`, coord(px), coord(y.p0+18), escapeText(x.labels[i]))
	}
	fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#8a93a5"/>`, coord(x.p0), coord(y.p0), coord(x.p1), coord(y.p0))
	fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#8a93a5"/>`, coord(x.p0), coord(y.p0), coord(x.p0), coord(y.p1))
	if xLabel != "" {
		fmt.Fprintf(b, `<text x="%s" y="%d" text-anchor="middle" font-size="12">%s</text>`, coord((x.p0+x.p1)/2), h-6, escapeText(xLabel))
	}
	if yLabel != "" {
		cy := (y.p0 + y.p1) / 2
		fmt.Fprintf(b, `<text transform="translate(14 %s) rotate(-90)" text-anchor="middle" font-size="12">%s</text>`, coord(cy), escapeText(yLabel))
	}
	b.WriteString("</g>")
}

func noData(b *strings.Builder, w, h int) {
	fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" font-size="13" fill="#5b6475">no data</text>`,
		coord(float64(marginLeft+w-marginRight)/2), coord(float64(marginTop+h-marginBottom)/2))
}

func figure(svg, caption string) template.HTML {
	if caption == "" {
		return template.HTML("<figure>" + svg + "</figure>")
	}
	return template.HTML("<figure>" + svg + "<figcaption>" + escapeText(caption) + "</figcaption></figure>")
}

func seriesColor(s Series, i int) string {
	if s.Color != "" {
		return s.Color
	}
	return palette[i%len(palette)]
}

// textWidth estimates the width in pixels of s at 12px.
func textWidth(s string) float64 { return 6.6 * float64(len([]rune(s))) }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// coord formats a coordinate. Every coordinate comes from finite values on
// an axis with hi > lo (lo > 0 on a log axis), so it is finite: the tests
// check that.
func coord(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// escapeText escapes s for the text or an attribute of an element.
func escapeText(s string) string { return template.HTMLEscapeString(s) }
