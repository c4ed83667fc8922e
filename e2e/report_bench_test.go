package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// benchReportScreenshot is the README's picture of a fence bench report,
// written by TestBenchReport with -update-screenshots:
//
//	go test ./e2e -run TestBenchReport -update-screenshots
const benchReportScreenshot = "bench-report.png"

// TestBenchReport runs fence bench --report for a few seconds against fence
// serve, then opens the report from its file in a headless Chromium: the
// page must load without an exception or a console error, fetch nothing,
// and show the run's numbers and its charts.
func TestBenchReport(t *testing.T) {
	srv := start(t, t.TempDir())
	file := filepath.Join(t.TempDir(), "bench.html")
	cmd := exec.Command(binary, "bench", "--addr", srv.URL, "--clients", "4", "--duration", "3s", "--warmup", "500ms",
		"--report", file, "-o", "json")
	cmd.Env = withoutFenceEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("fence bench: %v\n%s", err, stderr.String())
	}
	var rep struct {
		Ops int64 `json:"ops"`
	}
	if err := json.Unmarshal(out, &rep); err != nil || rep.Ops == 0 {
		t.Fatalf("fence bench -o json: %v, ops %d: %s", err, rep.Ops, out)
	}

	b := newBrowser(t)
	b.open("file://" + filepath.ToSlash(file))
	b.waitFor("the report", `document.querySelector("#machine") !== null`)
	if got, want := eval[string](b, `document.title`), "fence bench: cycle workload, 4 client(s), 4 resource(s)"; got != want {
		t.Errorf("title %q, want %q", got, want)
	}
	summary := eval[string](b, `document.querySelector("#summary").innerText`)
	if !strings.Contains(summary, "cycles\t"+strconv.FormatInt(rep.Ops, 10)+"\t") {
		t.Errorf("the summary does not show the run's %d cycles:\n%s", rep.Ops, summary)
	}
	// One throughput chart, then latency over time and a histogram for each
	// of acquire, write, release and cycle: all drawn, at a size.
	sizes := eval[[]float64](b, `[...document.querySelectorAll("svg")].map(s => s.getBoundingClientRect().width * s.getBoundingClientRect().height)`)
	if len(sizes) != 9 {
		t.Errorf("%d charts, want 9", len(sizes))
	}
	for i, a := range sizes {
		if a < 100*100 {
			t.Errorf("chart %d is %.0f px², not drawn at a readable size", i, a)
		}
	}
	for _, step := range []string{"acquire", "write", "release", "cycle"} {
		if n := eval[int](b, `[...document.querySelectorAll("svg > title")].filter(t => t.textContent.startsWith(`+jsString(step+" latency")+`)).length`); n != 2 {
			t.Errorf("%d charts of %s latency, want 2 (over time, histogram)", n, step)
		}
	}
	if n := eval[int](b, `performance.getEntriesByType("resource").length`); n != 0 {
		t.Errorf("the report fetched %d resources, want none: %s", n,
			eval[string](b, `performance.getEntriesByType("resource").map(r => r.name).join(" ")`))
	}
	b.noProblems()

	if *updateScreenshots {
		writeReportScreenshot(t, b, "#latency", benchReportScreenshot)
	}
}

// withoutFenceEnv is the environment of this process without its FENCE_
// variables, which would set the flags of the fence commands the test runs.
func withoutFenceEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FENCE_") {
			env = append(env, kv)
		}
	}
	return env
}
