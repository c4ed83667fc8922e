package bench

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"net/url"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fence-lock/fence/internal/support/buildinfo"
	htmlreport "github.com/fence-lock/fence/internal/tools/report" // bench has a type Report
)

// reportStep is one step of a bench report: its name in the JSON report and
// the Timeline, the name people read, and its latencies.
type reportStep struct {
	key, name string
	latency   *Latency
}

// reportSteps lists the steps that rep measured, in the order of the text
// htmlreport.
func reportSteps(rep *Report) []reportStep {
	acquire := "acquire"
	if rep.Workload == Contended {
		acquire = "acquire (wait)"
	}
	var steps []reportStep
	for _, s := range []reportStep{
		{"acquire", acquire, rep.Latency.Acquire}, {"write", "write", rep.Latency.Write}, {"renew", "renew", rep.Latency.Renew},
		{"release", "release", rep.Latency.Release}, {"cycle", "cycle", rep.Latency.Cycle},
	} {
		if s.latency != nil {
			steps = append(steps, s)
		}
	}
	return steps
}

// WriteHTML writes the HTML report of a run that cfg configured and
// that started at started (fence bench --report) to w.
func WriteHTML(w io.Writer, cfg Config, rep *Report, started time.Time) error {
	_, err := page(cfg, rep, started).WriteTo(w)
	return err
}

// page is the HTML report of a run: the figures of the text report,
// throughput and latency over time, the latency histograms, the settings
// and the machine the benchmark ran on.
func page(cfg Config, rep *Report, started time.Time) *htmlreport.Page {
	opName := "cycles"
	if rep.Workload == Write {
		opName = "writes"
	}
	p := &htmlreport.Page{
		Title: fmt.Sprintf("fence bench: %s workload, %d client(s), %d resource(s)", rep.Workload, rep.Clients, rep.Resources),
		Subtitle: fmt.Sprintf("%s against %s, measured %.2fs after a %s warm-up, started %s; fence %s",
			opName, redactAddr(rep.Addr), rep.DurationS, cfg.Warmup, started.UTC().Format("2006-01-02 15:04:05 MST"), buildinfo.Get().Version),
	}
	steps := reportSteps(rep)

	summary := []htmlreport.Block{}
	if rep.Interrupted {
		summary = append(summary, htmlreport.Text("Interrupted: the figures cover the time measured before the interrupt."))
	}
	rate := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + "/s" }
	summary = append(summary, htmlreport.Table{
		Header: []string{"", "count", "rate", ""},
		Rows: [][]string{
			{opName, strconv.FormatInt(rep.Ops, 10), rate(rep.OpsPerSec), fmt.Sprintf("per client %d–%d", rep.ClientOpsMin, rep.ClientOpsMax)},
			{"acquisitions", strconv.FormatInt(rep.Acquisitions, 10), rate(rep.AcquisitionsPerSec), fmt.Sprintf("changing hands %d", rep.Handoffs)},
			{"errors", strconv.FormatInt(rep.ErrorsTotal, 10), rate(float64(rep.ErrorsTotal) / max(rep.DurationS, 1e-9)), ""},
		},
	})
	lat := htmlreport.Table{Header: []string{"latency ms", "count", "mean", "p50", "p99", "p99.9", "max"}}
	for _, s := range steps {
		l := s.latency
		if l.Count == 0 {
			lat.Rows = append(lat.Rows, []string{s.name, "0", "-", "-", "-", "-", "-"})
			continue
		}
		lat.Rows = append(lat.Rows, []string{s.name, strconv.FormatInt(l.Count, 10), FormatMS(l.Mean),
			FormatMS(l.P50), FormatMS(l.P99), FormatMS(l.P999), FormatMS(l.Max)})
	}
	summary = append(summary, lat)
	if rep.ErrorsTotal > 0 {
		errs := htmlreport.Table{Header: []string{"error", "count", "e.g."}}
		codes := slices.SortedFunc(maps.Keys(rep.Errors), func(a, b string) int {
			return cmp.Or(cmp.Compare(rep.Errors[b], rep.Errors[a]), cmp.Compare(a, b))
		})
		for _, code := range codes {
			errs.Rows = append(errs.Rows, []string{code, strconv.FormatInt(rep.Errors[code], 10), rep.ErrorSamples[code]})
		}
		summary = append(summary, errs)
	}
	summary = append(summary, htmlreport.Table{
		Header: []string{"check", "count", "meaning"},
		Rows: [][]string{
			{"overlaps", strconv.FormatInt(rep.Overlaps, 10), "grants while another client's lease was live: must be 0"},
			{"regressions", strconv.FormatInt(rep.Regressions, 10), "writes accepted with a lower token than one accepted before: must be 0"},
			{"fenced", strconv.FormatInt(rep.Fenced, 10), "writes rejected as stale: 0 unless a lease expired"},
			{"expired leases", strconv.FormatInt(rep.ExpiredLeases, 10), "grants while another client had not released a lease that may have expired"},
		},
	})
	p.Section("Summary", "summary", summary...)

	tl := rep.Timeline
	if tl == nil { // not a Report of Run
		tl = &Timeline{}
	}
	every := tl.Interval.String()
	var ops, errs []htmlreport.Point
	byStep := map[string][3][]htmlreport.Point{} // p50, p90, p99 of each step
	for _, iv := range tl.Intervals {
		x := (iv.Start + iv.End).Seconds() / 2
		ops = append(ops, htmlreport.Point{X: x, Y: float64(iv.Ops) / iv.Seconds()})
		errs = append(errs, htmlreport.Point{X: x, Y: float64(iv.Errors) / iv.Seconds()})
		for _, s := range steps {
			q, ok := iv.Latency[s.key]
			if !ok {
				q = Quantiles{P50: math.NaN(), P90: math.NaN(), P99: math.NaN()}
			}
			lines := byStep[s.key]
			lines[0] = append(lines[0], htmlreport.Point{X: x, Y: q.P50})
			lines[1] = append(lines[1], htmlreport.Point{X: x, Y: q.P90})
			lines[2] = append(lines[2], htmlreport.Point{X: x, Y: q.P99})
			byStep[s.key] = lines
		}
	}
	p.Section("Throughput over time", "throughput", htmlreport.LineChart{
		Title:   opName + " and errors per second",
		Caption: fmt.Sprintf("Each point is one %s interval of the measured time (the warm-up is left out): the %s completed and the requests failed in it, per second.", every, opName),
		XLabel:  "seconds since the start of the measurement", YLabel: "per second", XUnit: "s", YUnit: "/s",
		XMin: 0, XMax: rep.DurationS, Width: 1000, Height: 300,
		Series: []htmlreport.Series{{Name: opName + "/s", Points: ops}, {Name: "errors/s", Color: "#e0483d", Points: errs}},
	})

	var overTime, hists htmlreport.Grid
	for _, s := range steps {
		lines := byStep[s.key]
		overTime = append(overTime, htmlreport.LineChart{
			Title:  s.name + " latency",
			XLabel: "seconds since the start of the measurement", YLabel: "ms (log scale)", XUnit: "s", YUnit: "ms",
			XMin: 0, XMax: rep.DurationS, LogY: true,
			Width: 560, Height: 240,
			Series: []htmlreport.Series{{Name: "p50", Points: lines[0]}, {Name: "p90", Points: lines[1]}, {Name: "p99", Points: lines[2]}},
		})
		var bars []htmlreport.Bar
		if h := rep.Histograms[s.key]; h != nil {
			for _, bk := range h.LogBuckets(4) {
				bars = append(bars, htmlreport.Bar{Lo: msOf(bk.Lo), Hi: msOf(bk.Hi), Count: bk.Count})
			}
		}
		var marks []htmlreport.Marker
		if s.latency.Count > 0 {
			marks = []htmlreport.Marker{{X: s.latency.P50, Label: "p50"}, {X: s.latency.P99, Label: "p99"}, {X: s.latency.P999, Label: "p99.9"}}
		}
		hists = append(hists, htmlreport.Histogram{
			Title:  fmt.Sprintf("%s latency: %d requests", s.name, s.latency.Count),
			XLabel: "ms (log scale)", YLabel: "requests", Unit: "ms", LogX: true,
			Width: 560, Height: 240,
			Bars: bars, Markers: marks,
		})
	}
	p.Section("Latency over time", "latency", htmlreport.Text(fmt.Sprintf(
		"The p50, p90 and p99 of each step's latency in each %s interval (within 7%%), by the time the request ended. A gap is an interval in which no request of the step ended.", every)),
		overTime)
	p.Section("Latency histograms", "histograms", htmlreport.Text(
		"The latencies of the whole measured time, four bars per doubling; the dashed lines are the p50, p99 and p99.9 of the summary."),
		hists)

	auth := "none"
	if cfg.AuthToken != "" {
		auth = "a bearer token (not shown)"
	}
	p.Section("Configuration", "configuration",
		htmlreport.Table{
			Header: []string{"setting", "value"},
			Rows: [][]string{
				{"server", redactAddr(rep.Addr)},
				{"workload", string(rep.Workload)},
				{"clients", strconv.Itoa(rep.Clients)},
				{"resources", fmt.Sprintf("%d (%s0 … %s%d)", rep.Resources, ResourcePrefix, ResourcePrefix, rep.Resources-1)},
				{"duration", cfg.Duration.String()},
				{"warm-up", cfg.Warmup.String()},
				{"ttl", cfg.TTL.String()},
				{"wait", cfg.Wait.String()},
				{"value size", fmt.Sprintf("%d bytes", cfg.ValueSize)},
				{"timeout", cfg.Timeout.String()},
				{"key", cfg.Key},
				{"auth", auth},
			},
		},
		htmlreport.Text("The same run again:"),
		htmlreport.Pre(commandLine(cfg, rep)))

	info := buildinfo.Get()
	build := info.Version
	if info.Commit != "" {
		build += ", commit " + info.Commit
		if info.Modified {
			build += "+modified"
		}
	}
	p.Section("Machine", "machine",
		htmlreport.Text("Where fence bench ran (the server may run elsewhere)."),
		htmlreport.Table{
			Header: []string{"", ""},
			Rows: [][]string{
				{"fence", build},
				{"os/arch", runtime.GOOS + "/" + runtime.GOARCH},
				{"cpus", fmt.Sprintf("%d (GOMAXPROCS %d)", runtime.NumCPU(), runtime.GOMAXPROCS(0))},
				{"go", runtime.Version()},
			},
		})
	return p
}

// commandLine is the command line of a run with the settings of rep and
// cfg, every one spelled out. It leaves the bearer token out.
func commandLine(cfg Config, rep *Report) string {
	args := []string{"fence", "bench",
		"--addr", redactAddr(rep.Addr),
		"--workload", string(rep.Workload),
		"--clients", strconv.Itoa(rep.Clients),
		"--resources", strconv.Itoa(rep.Resources),
		"--duration", cfg.Duration.String(),
		"--warmup", cfg.Warmup.String(),
		"--ttl", cfg.TTL.String(),
		"--wait", cfg.Wait.String(),
		"--value-size", strconv.Itoa(cfg.ValueSize),
		"--timeout", cfg.Timeout.String(),
		"--key", cfg.Key,
	}
	for i, a := range args {
		if !shellSafe.MatchString(a) {
			args[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(args, " ")
}

// shellSafe matches the words a shell takes as they are.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:,@%+=-]+$`)

// redactAddr hides the passwords of the URLs of an --addr list.
func redactAddr(addr string) string {
	entries := strings.Split(addr, ",")
	for i, e := range entries {
		if !strings.Contains(e, "@") {
			continue
		}
		if u, err := url.Parse(e); err != nil {
			entries[i] = "(unparseable URL)"
		} else {
			entries[i] = u.Redacted()
		}
	}
	return strings.Join(entries, ",")
}

// msOf is d in milliseconds.
func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
