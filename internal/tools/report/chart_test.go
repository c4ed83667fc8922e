package report

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// chartAttr matches the attributes of a chart that hold coordinates or
// lengths, and polyline points.
var chartAttr = regexp.MustCompile(`\b(x|y|x1|x2|y1|y2|cx|cy|r|width|height|points)="([^"]*)"`)

// checkChart fails t unless doc, a chart's markup, is one figure with an SVG
// whose every coordinate is a finite number within its viewBox, and which
// refers to nothing outside the page.
func checkChart(t *testing.T, doc string) {
	t.Helper()
	if !strings.HasPrefix(doc, "<figure><svg viewBox=\"0 0 ") || !strings.HasSuffix(doc, "</figure>") {
		t.Fatalf("not a figure with an SVG:\n%s", doc)
	}
	w, h, err := viewBoxSize(doc[len(`<figure><svg viewBox="0 0 `):])
	if err != nil {
		t.Fatalf("viewBox: %v", err)
	}
	for _, m := range chartAttr.FindAllStringSubmatch(doc, -1) {
		for _, f := range strings.FieldsFunc(m[2], func(r rune) bool { return r == ' ' || r == ',' }) {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < -0.05 || v > max(w, h)+0.05 {
				t.Errorf("%s=%q: %q is not a coordinate in the %vx%v chart", m[1], m[2], f, w, h)
			}
		}
	}
	for _, bad := range []string{"NaN", "Inf"} {
		if strings.Contains(doc, bad) {
			t.Errorf("the chart has %q:\n%s", bad, doc)
		}
	}
	if refs := ExternalReferences([]byte(doc)); len(refs) > 0 {
		t.Errorf("the chart refers outside the page: %q", refs)
	}
}

// viewBoxSize reads the width and height that start s, the rest of a
// viewBox after its "0 0 ".
func viewBoxSize(s string) (w, h float64, err error) {
	f := strings.Fields(strings.SplitN(s, `"`, 2)[0])
	if len(f) != 2 {
		return 0, 0, strconv.ErrSyntax
	}
	if w, err = strconv.ParseFloat(f[0], 64); err != nil {
		return 0, 0, err
	}
	h, err = strconv.ParseFloat(f[1], 64)
	return w, h, err
}

func TestLineChart(t *testing.T) {
	var p50, p99 []Point
	for i := range 20 {
		x := float64(i) * 0.5
		p50 = append(p50, Point{x, 1 + float64(i%3)})
		p99 = append(p99, Point{x, 8 + float64(i)})
	}
	p99[7].Y = math.NaN() // a gap: two stretches of line
	c := LineChart{
		Title: "write latency <over time>", Caption: "100 ms intervals",
		XLabel: "seconds since the start", YLabel: "milliseconds", XUnit: "s", YUnit: "ms",
		Series: []Series{{Name: "p50", Points: p50}, {Name: "p99 & more", Points: p99}},
	}
	doc := string(c.HTML())
	checkChart(t, doc)
	for _, want := range []string{
		"<title>write latency &lt;over time&gt;</title>", ">write latency &lt;over time&gt;</text>",
		"<figcaption>100 ms intervals</figcaption>",
		">seconds since the start</text>", ">milliseconds</text>",
		">p50</text>", ">p99 &amp; more</text>", // the legend
		"<title>p50</title>", "<title>p99 &amp; more</title>", // the series
		"<title>p50 at 1.5 s: 1 ms</title>",    // a dot's tooltip: 20 points get dots
		`stroke="#4269d0"`, `stroke="#efb118"`, // palette colours, in order
		">0</text>", ">10</text>", ">30</text>", // ticks: y from 0 to the largest, 27
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("the chart lacks %q:\n%s", want, doc)
		}
	}
	if n := strings.Count(doc, "<polyline"); n != 3 {
		t.Errorf("%d polylines, want 3 (p50 whole, p99 broken at the NaN)", n)
	}
	if n := strings.Count(doc, "<circle"); n != 39 {
		t.Errorf("%d dots, want 39 (every point but the NaN)", n)
	}

	t.Run("ManyPoints", func(t *testing.T) {
		var pts []Point
		for i := range 200 {
			pts = append(pts, Point{float64(i), float64(i * i)})
		}
		pts[100].Y = math.NaN()
		pts[102].Y = math.NaN() // point 101 stands alone: a dot
		doc := string(LineChart{Series: []Series{{Name: "ops", Color: "#123456", Points: pts}}}.HTML())
		checkChart(t, doc)
		if n := strings.Count(doc, "<circle"); n != 1 || strings.Count(doc, "<polyline") != 2 {
			t.Errorf("%d dots and %d lines, want 1 and 2:\n%s", n, strings.Count(doc, "<polyline"), doc)
		}
		if !strings.Contains(doc, `stroke="#123456"`) || !strings.Contains(doc, ">40k</text>") {
			t.Errorf("the series' own colour or the y tick 40k is missing:\n%s", doc)
		}
	})

	t.Run("Empty", func(t *testing.T) {
		for name, c := range map[string]LineChart{
			"NoSeries":   {Title: "nothing"},
			"NoPoints":   {Series: []Series{{Name: "p50"}}},
			"AllNaN":     {Series: []Series{{Name: "p50", Points: []Point{{0, math.NaN()}, {math.Inf(1), 1}}}}},
			"LogNoValue": {LogY: true, Series: []Series{{Name: "p50", Points: []Point{{0, 0}, {1, -1}}}}},
			"OutsideX":   {XMin: 0, XMax: 10, Series: []Series{{Name: "p50", Points: []Point{{11, 1}}}}},
		} {
			doc := string(c.HTML())
			checkChart(t, doc)
			if !strings.Contains(doc, ">no data</text>") || strings.Contains(doc, "<polyline") || strings.Contains(doc, "<circle") {
				t.Errorf("%s: want the axes and \"no data\":\n%s", name, doc)
			}
		}
	})

	t.Run("OnePoint", func(t *testing.T) {
		for _, p := range []Point{{0, 0}, {3, 5}, {-2, -7}, {1e9, 1e-9}} {
			for _, logY := range []bool{false, true} {
				doc := string(LineChart{LogY: logY, Series: []Series{{Name: "ops", Points: []Point{p}}}}.HTML())
				checkChart(t, doc)
				want := 1
				if logY && p.Y <= 0 {
					want = 0
				}
				if n := strings.Count(doc, "<circle"); n != want {
					t.Errorf("%+v (log %v): %d dots, want %d:\n%s", p, logY, n, want, doc)
				}
			}
		}
	})

	t.Run("LogY", func(t *testing.T) {
		doc := string(LineChart{LogY: true, Series: []Series{{Name: "p99", Points: []Point{{0, 0.3}, {1, 0}, {2, 40}, {3, 2}}}}}.HTML())
		checkChart(t, doc)
		for _, want := range []string{">1</text>", ">10</text>"} {
			if !strings.Contains(doc, want) {
				t.Errorf("the log axis lacks the tick %q:\n%s", want, doc)
			}
		}
		if n := strings.Count(doc, "<circle"); n != 3 {
			t.Errorf("%d dots, want 3: 0 has no place on a log axis", n)
		}
	})

	t.Run("FixedX", func(t *testing.T) {
		doc := string(LineChart{XMin: 0, XMax: 10, Series: []Series{{Name: "ops",
			Points: []Point{{-1, 5}, {2, 5}, {4, 6}, {12, 9}}}}}.HTML())
		checkChart(t, doc)
		if n := strings.Count(doc, "<circle"); n != 2 || !strings.Contains(doc, ">10</text>") {
			t.Errorf("%d dots, want the 2 points within 0 to 10, and the tick 10:\n%s", n, doc)
		}
	})
}

func TestHistogram(t *testing.T) {
	var bars []Bar
	for i := range 12 {
		lo := 0.25 * math.Pow(2, float64(i)/4) // 4 per octave, from 0.25 ms
		bars = append(bars, Bar{Lo: lo, Hi: lo * math.Pow(2, 0.25), Count: int64(100 - (i-5)*(i-5)*2)})
	}
	bars[9].Count = 0
	h := Histogram{Title: "write latency", XLabel: "latency (ms), log scale", YLabel: "requests", Unit: "ms",
		LogX: true, Bars: bars, Markers: []Marker{{X: 0.6, Label: "p50"}, {X: 1.3, Label: "p99"}, {X: 100, Label: "off"}}}
	doc := string(h.HTML())
	checkChart(t, doc)
	for _, want := range []string{"<title>write latency</title>", ">latency (ms), log scale</text>", ">requests</text>",
		"<title>0.25–0.2973 ms: 50</title>", // a bar's tooltip
		">p50</text>", ">p99</text>", "<title>p99: 1.3 ms</title>", ">0.5</text>", ">1</text>", ">100</text>"} {
		if !strings.Contains(doc, want) {
			t.Errorf("the histogram lacks %q:\n%s", want, doc)
		}
	}
	if n := strings.Count(doc, "<rect"); n != len(bars) {
		t.Errorf("%d bars, want %d", n, len(bars))
	}
	if strings.Contains(doc, ">off</text>") {
		t.Error("a marker outside the axis is drawn")
	}

	t.Run("Empty", func(t *testing.T) {
		for name, h := range map[string]Histogram{
			"NoBars":    {},
			"LogZeroLo": {LogX: true, Bars: []Bar{{Lo: 0, Hi: 1, Count: 3}}},
			"NaN":       {Bars: []Bar{{Lo: math.NaN(), Hi: 1, Count: 3}, {Lo: 1, Hi: math.Inf(1), Count: 1}}},
		} {
			doc := string(h.HTML())
			checkChart(t, doc)
			if !strings.Contains(doc, ">no data</text>") || strings.Contains(doc, "<rect") {
				t.Errorf("%s: want the axes and \"no data\":\n%s", name, doc)
			}
		}
	})

	t.Run("OneBar", func(t *testing.T) {
		for _, h := range []Histogram{
			{Bars: []Bar{{Lo: 2, Hi: 3, Count: 1}}},
			{LogX: true, Bars: []Bar{{Lo: 2, Hi: 2, Count: 0}}},
			{LogX: true, Bars: []Bar{{Lo: 1e-6, Hi: 1.2e-6, Count: 5}}},
		} {
			doc := string(h.HTML())
			checkChart(t, doc)
			if strings.Count(doc, "<rect") != 1 || strings.Contains(doc, "no data") {
				t.Errorf("%+v: want one bar:\n%s", h.Bars, doc)
			}
		}
	})
}

func TestGrid(t *testing.T) {
	var p Page
	p.Section("Latency", "latency", Grid{LineChart{Title: "acquire"}, Histogram{Title: "write"}}, LineChart{Title: "release"})
	var b strings.Builder
	if _, err := p.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	if !strings.Contains(doc, `<div class="grid"><figure><svg`) || strings.Count(doc, "<svg") != 3 ||
		!strings.Contains(doc, ".grid {") {
		t.Errorf("the page lacks the grid of two charts, its style, or the third chart:\n%s", doc)
	}
	if refs := ExternalReferences([]byte(doc)); len(refs) > 0 {
		t.Errorf("the page refers outside itself: %q", refs)
	}
}

func TestNiceStep(t *testing.T) {
	for d, want := range map[float64]float64{0.3: 0.5, 1: 1, 1.2: 2, 2: 2, 2.1: 5, 7: 10, 0.0004: 0.0005, 1234: 2000, 0: 1, -1: 1} {
		if got := niceStep(d); math.Abs(got-want) > want*1e-9 {
			t.Errorf("niceStep(%v)=%v, want %v", d, got, want)
		}
	}
}

func TestAxisLabel(t *testing.T) {
	for _, tc := range []struct {
		v, step float64
		want    string
	}{
		{0, 0.5, "0"}, {1.5, 0.5, "1.5"}, {0.6000000000000001, 0.2, "0.6"}, {0.05, 0.01, "0.05"},
		{500, 100, "500"}, {1000, 500, "1k"}, {1500, 500, "1.5k"}, {40000, 10000, "40k"},
		{2e6, 1e6, "2M"}, {2.5e6, 5e5, "2.5M"}, {1200, 10, "1200"}, {-2000, 1000, "-2k"},
	} {
		if got := axisLabel(tc.v, tc.step); got != tc.want {
			t.Errorf("axisLabel(%v, %v)=%q, want %q", tc.v, tc.step, got, tc.want)
		}
	}
}

func TestLogAxis(t *testing.T) {
	for _, tc := range []struct {
		vs   []float64
		want string
	}{
		{[]float64{0.2, 300}, "1 10 100"},                               // three powers of ten
		{[]float64{0.2, 30}, "0.2 0.5 1 2 5 10 20"},                     // fewer: 1, 2 and 5 times them
		{[]float64{0.3, 4}, "0.5 1 2"},                                  //
		{[]float64{1.5, 2.8}, "2 3"},                                    // fewer: every multiple
		{[]float64{1.2, 1.3}, "1 2 5 10"},                               // no two ticks: widened to a decade
		{[]float64{5e-5, 5e-5}, "0.00001 0.00002 0.00005 0.0001"},       // one value
		{nil, "1 2 5 10"},                                               // no value: 1 to 10
		{[]float64{0, -3}, "1 2 5 10"},                                  // no positive value
		{[]float64{2000, 9e6}, "10k 100k 1M 10M"},                       //
		{[]float64{0.0012, 0.35}, "0.002 0.005 0.01 0.02 0.05 0.1 0.2"}, //
	} {
		a := logAxis(tc.vs)
		if got := strings.Join(a.labels, " "); got != tc.want {
			t.Errorf("logAxis(%v) ticks %q, want %q", tc.vs, got, tc.want)
		}
		if !(a.lo > 0) || !(a.hi > a.lo) || len(a.ticks) == 0 {
			t.Errorf("logAxis(%v) = [%v, %v] with ticks %v", tc.vs, a.lo, a.hi, a.ticks)
		}
		for _, v := range tc.vs {
			if v > 0 && !a.contains(v) {
				t.Errorf("logAxis(%v) = [%v, %v] leaves %v out", tc.vs, a.lo, a.hi, v)
			}
		}
	}
}
