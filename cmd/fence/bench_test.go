package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence/fencetest"
	load "github.com/fence-lock/fence/internal/tools/bench"
	htmlreport "github.com/fence-lock/fence/internal/tools/report"
)

// newBenchServer runs the lock service and bolt storage behind the HTTP API
// in this process and returns its URL.
func newBenchServer(t *testing.T) string {
	t.Helper()
	return fencetest.NewServer(t, nil)
}

func TestBench(t *testing.T) {
	url := newBenchServer(t)

	t.Run("JSON", func(t *testing.T) {
		for _, tc := range []struct{ workload, progress string }{{"cycle", "always"}, {"contended", "auto"}} {
			workload := tc.workload
			var stdout, stderr bytes.Buffer
			err := bench(t.Context(), []string{"--addr", url, "--workload", workload, "--clients", "3",
				"--duration", "1s", "--warmup", "100ms", "-o", "json", "--progress", tc.progress},
				stdio{strings.NewReader(""), &stdout, &stderr})
			if err != nil {
				t.Fatalf("%s: %v\n%s", workload, err, stderr.String())
			}
			var members map[string]json.RawMessage
			if err := json.Unmarshal(stdout.Bytes(), &members); err != nil {
				t.Fatalf("%s: stdout is not one JSON object: %v\n%s", workload, err, stdout.String())
			}
			for _, name := range []string{"workload", "addr", "clients", "resources", "ttl_ms", "wait_ms", "value_size",
				"warmup_s", "duration_s", "interrupted", "ops", "ops_per_s", "acquisitions", "acquisitions_per_s",
				"handoffs", "client_ops_min", "client_ops_max", "latency_ms", "errors", "errors_total",
				"fenced", "overlaps", "regressions", "expired_leases"} {
				if _, ok := members[name]; !ok {
					t.Errorf("%s: the report lacks %q:\n%s", workload, name, stdout.String())
				}
			}
			var rep struct {
				Workload  string  `json:"workload"`
				Resources int     `json:"resources"`
				WaitMS    int64   `json:"wait_ms"`
				Ops       int64   `json:"ops"`
				OpsPerSec float64 `json:"ops_per_s"`
				Latency   map[string]struct {
					Count int64   `json:"count"`
					P50   float64 `json:"p50"`
					P99   float64 `json:"p99"`
					P999  float64 `json:"p999"`
				} `json:"latency_ms"`
				Errors      map[string]int64 `json:"errors"`
				Overlaps    int64            `json:"overlaps"`
				Regressions int64            `json:"regressions"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Workload != workload || rep.Ops <= 0 || rep.OpsPerSec <= 0 {
				t.Fatalf("workload=%q ops=%d ops/s=%v, want %s with ops > 0", rep.Workload, rep.Ops, rep.OpsPerSec, workload)
			}
			for _, step := range []string{"acquire", "write", "release", "cycle"} {
				if l, ok := rep.Latency[step]; !ok || l.Count == 0 || l.P50 <= 0 || l.P50 > l.P99 || l.P99 > l.P999 {
					t.Errorf("%s: latency_ms.%s=%+v, want ordered quantiles", workload, step, l)
				}
			}
			if len(rep.Errors) != 0 || rep.Overlaps != 0 || rep.Regressions != 0 {
				t.Errorf("%s: errors=%v overlaps=%d regressions=%d, want none", workload, rep.Errors, rep.Overlaps, rep.Regressions)
			}
			if workload == "contended" && (rep.Resources != 1 || rep.WaitMS != 10000) {
				t.Errorf("contended: resources=%d wait_ms=%d, want the defaults 1 and 10000", rep.Resources, rep.WaitMS)
			}
			if workload == "cycle" && (rep.Resources != 3 || rep.WaitMS != 0) {
				t.Errorf("cycle: resources=%d wait_ms=%d, want the defaults 3 (--clients) and 0", rep.Resources, rep.WaitMS)
			}
			// With -o json, progress goes to stderr only if asked for.
			if tc.progress == "always" && !strings.Contains(stderr.String(), " 0 errors ") {
				t.Errorf("%s: stderr=%q, want a progress line", workload, stderr.String())
			}
			if tc.progress == "auto" && stderr.String() != "fence bench: measuring the fence server at "+url+"\n" {
				t.Errorf("%s: stderr=%q, want no progress with -o json and --progress auto", workload, stderr.String())
			}
		}
	})

	t.Run("Text", func(t *testing.T) {
		t.Setenv("FENCE_ADDR", url)         // the environment twin of --addr
		t.Setenv("FENCE_WORKLOAD", "write") // and of --workload
		var stdout, stderr bytes.Buffer
		err := bench(t.Context(), []string{"--clients", "2", "--resources", "2", "--duration", "1100ms", "--warmup", "0s"},
			stdio{strings.NewReader(""), &stdout, &stderr})
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"write workload", "writes", "latency ms", "renew", "errors", "overlaps 0"} {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
			}
		}
		// Not a terminal: plain lines, the first at the first tick (1 s).
		if !regexp.MustCompile(`^fence bench: measuring the fence server at http://127\.0\.0\.1:[0-9]+\n1\.[01]s of 1\.1s, 0\.[01]s left  [1-9][0-9]* ops  0 errors  [1-9][0-9]* ops/s now\n$`).MatchString(stderr.String()) {
			t.Errorf("stderr=%q, want one plain progress line", stderr.String())
		}
	})

	t.Run("Report", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "bench.html")
		var stdout, stderr bytes.Buffer
		err := bench(t.Context(), []string{"--addr", url, "--clients", "2", "--duration", "1200ms", "--warmup", "0s",
			"--key", "report/k", "--report", file, "-o", "json"}, stdio{strings.NewReader(""), &stdout, &stderr})
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		var rep load.Report
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || rep.Ops == 0 {
			t.Fatalf("stdout: %v, ops %d\n%s", err, rep.Ops, stdout.String())
		}
		doc := readReport(t, file, url)
		want := []string{
			"<title>fence bench: cycle workload, 2 client(s), 2 resource(s)</title>",
			// The summary: the numbers of the JSON report.
			fmt.Sprintf("<td>cycles</td><td>%d</td><td>%.1f/s</td>", rep.Ops, rep.OpsPerSec),
			fmt.Sprintf("<td>acquisitions</td><td>%d</td>", rep.Acquisitions),
			fmt.Sprintf("<td>overlaps</td><td>%d</td>", rep.Overlaps),
			// The charts, with the run's 12 intervals of 100 ms.
			`<section id="throughput">`, "<title>cycles/s</title>", "<title>errors/s</title>", "Each point is one 100ms interval",
			// The configuration and the machine.
			"<td>server</td><td>" + url + "</td>", "<td>key</td><td>report/k</td>", "<td>duration</td><td>1.2s</td>",
			"fence bench --addr " + url + " --workload cycle --clients 2 --resources 2 --duration 1.2s --warmup 0s",
			"<td>os/arch</td><td>" + runtime.GOOS + "/" + runtime.GOARCH + "</td>", "<td>go</td><td>" + runtime.Version() + "</td>",
		}
		for _, s := range []struct {
			name string
			l    *load.Latency
		}{{"acquire", rep.Latency.Acquire}, {"write", rep.Latency.Write}, {"release", rep.Latency.Release}, {"cycle", rep.Latency.Cycle}} {
			want = append(want,
				fmt.Sprintf("<td>%s</td><td>%d</td><td>%s</td><td>%s</td>", s.name, s.l.Count, load.FormatMS(s.l.Mean), load.FormatMS(s.l.P50)),
				"<title>"+s.name+" latency</title>",                                      // over time
				fmt.Sprintf("<title>%s latency: %d requests</title>", s.name, s.l.Count)) // the histogram
		}
		for _, w := range want {
			if !strings.Contains(doc, w) {
				t.Errorf("the report lacks %q", w)
			}
		}
		for _, series := range []string{"cycles/s", "errors/s"} {
			if n := strings.Count(doc, "<title>"+series+" at "); n != 12 {
				t.Errorf("%d points of %s, want one per interval, 12", n, series)
			}
		}
		if strings.Contains(doc, "renew") || strings.Contains(doc, "Interrupted") {
			t.Error("the report has a step the workload does not have, or says the run was interrupted")
		}
		if got, want := stderr.String(), "fence bench: measuring the fence server at "+url+"\n"; got != want {
			t.Errorf("stderr=%q, want only %q: no progress with -o json", got, want)
		}
	})

	t.Run("ReportInterrupted", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "bench.html")
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(500*time.Millisecond, cancel)
		var stdout bytes.Buffer
		err := bench(ctx, []string{"--addr", url, "--workload", "write", "--duration", "1m", "--warmup", "0s",
			"--auth-token", "secret-token", "--report", file}, stdio{strings.NewReader(""), &stdout, io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		doc := readReport(t, file, url)
		for _, w := range []string{"Interrupted: the figures cover", "<title>renew latency</title>", "<td>writes</td>",
			"<td>auth</td><td>a bearer token (not shown)</td>"} {
			if !strings.Contains(doc, w) {
				t.Errorf("the report lacks %q", w)
			}
		}
		if strings.Contains(doc, "secret-token") || strings.Contains(doc, "<td>release</td>") {
			t.Error("the report shows the bearer token, or a release step the write workload does not have")
		}
	})
}

// readReport reads the HTML report at path and checks that it refers to
// nothing outside itself. The report names the server, url, in its text
// (which ExternalReferences counts, as it does any bare URL): that is no
// reference, as long as it is not in an attribute.
func readReport(t *testing.T, path, url string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(`="`+url)) || !bytes.Contains(b, []byte(url)) {
		t.Errorf("the report names the server %s in an attribute, or not at all", url)
	}
	if refs := htmlreport.ExternalReferences(bytes.ReplaceAll(b, []byte(url), []byte("the server"))); len(refs) > 0 {
		t.Errorf("the report refers outside itself: %q", refs)
	}
	if !bytes.HasPrefix(b, []byte("<!DOCTYPE html>")) || !bytes.HasSuffix(b, []byte("</html>\n")) {
		t.Errorf("the report is not one HTML document: %.200q", b)
	}
	return string(b)
}

func TestBenchProgress(t *testing.T) {
	for _, tc := range []struct {
		p    load.Progress
		want string
	}{
		{load.Progress{Warmup: true, Elapsed: 500 * time.Millisecond, Remaining: 10500 * time.Millisecond}, "warming up 0.5s, 10.5s left"},
		{load.Progress{Elapsed: 3 * time.Second, Remaining: 7 * time.Second, Ops: 1234, Errors: 2, Rate: 410.6},
			"3.0s of 10.0s, 7.0s left  1234 ops  2 errors  411 ops/s now"},
	} {
		if got := benchProgress(tc.p, 10*time.Second); got != tc.want {
			t.Errorf("benchProgress(%+v)=%q, want %q", tc.p, got, tc.want)
		}
	}
	for d, want := range map[time.Duration]string{0: "0.0s", 59940 * time.Millisecond: "59.9s", time.Minute: "1m00s",
		65*time.Second + 400*time.Millisecond: "1m05s", 2*time.Hour + 3*time.Minute + 10*time.Second: "2h03m10s"} {
		if got := clock(d); got != want {
			t.Errorf("clock(%v)=%q, want %q", d, got, want)
		}
	}
}

func TestProgressLine(t *testing.T) {
	t.Run("Plain", func(t *testing.T) {
		var b bytes.Buffer
		now := time.Unix(0, 0)
		p := &progressLine{w: &b, plainEvery: 5 * time.Second, now: func() time.Time { return now }}
		for i := range 12 { // a tick a second
			p.show(fmt.Sprintf("tick %d", i))
			now = now.Add(time.Second)
		}
		p.finish()
		if got, want := b.String(), "tick 0\ntick 5\ntick 10\n"; got != want {
			t.Errorf("wrote %q, want %q: a line every 5 s", got, want)
		}
	})
	t.Run("Terminal", func(t *testing.T) {
		var b bytes.Buffer
		p := &progressLine{w: &b, terminal: true, plainEvery: 5 * time.Second}
		p.show("a longer line")
		p.show("short") // padded over the longer one
		p.finish()
		if got, want := b.String(), "\ra longer line\rshort        \r             \r"; got != want {
			t.Errorf("wrote %q, want %q: every update in place, then blanked out", got, want)
		}
	})
}

// TestBench_Embedded checks that fence bench without --addr (and without
// FENCE_ADDR) measures a server it starts itself, says so on stderr, and
// writes its report; and that every acquisition of a cycle run is one
// cycle, done or failed.
func TestBench_Embedded(t *testing.T) {
	t.Setenv("FENCE_ADDR", "")
	report := filepath.Join(t.TempDir(), "b.html")
	var stdout, stderr bytes.Buffer
	err := bench(t.Context(), []string{"--clients", "2", "--duration", "1s", "--warmup", "100ms", "-o", "json", "--report", report},
		stdio{strings.NewReader(""), &stdout, &stderr})
	if err != nil {
		t.Fatalf("fence bench without --addr: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "fence bench: measuring an embedded fence server started for this run") {
		t.Errorf("stderr does not say which server is measured:\n%s", stderr.String())
	}
	var rep struct {
		Addr         string `json:"addr"`
		Ops          int64  `json:"ops"`
		Acquisitions int64  `json:"acquisitions"`
		ErrorsTotal  int64  `json:"errors_total"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout: %v\n%s", err, stdout.String())
	}
	if rep.Ops == 0 || rep.Acquisitions != rep.Ops+rep.ErrorsTotal || !strings.HasPrefix(rep.Addr, "http://127.0.0.1:") {
		t.Errorf("report %+v: want ops, acquisitions = ops + errors, a loopback address", rep)
	}
	if fi, err := os.Stat(report); err != nil || fi.Size() == 0 {
		t.Errorf("the HTML report: %v", err)
	}
	// A server given measures that one, and says so.
	stderr.Reset()
	url := newBenchServer(t)
	if err := bench(t.Context(), []string{"--addr", url, "--duration", "200ms", "--warmup", "0s", "-o", "json"},
		stdio{strings.NewReader(""), io.Discard, &stderr}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "fence bench: measuring the fence server at "+url) {
		t.Errorf("stderr does not name the server:\n%s", stderr.String())
	}
}

func TestBench_NoServer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	err := bench(t.Context(), []string{"--addr", url, "--duration", "1s", "--timeout", "1s"}, stdio{nil, io.Discard, io.Discard})
	var usage *usageError
	if err == nil || errors.As(err, &usage) {
		t.Fatalf("err=%v, want a plain error", err)
	}
	if code := exitCode(io.Discard, err); code != exitFailure {
		t.Fatalf("exit code %d, want %d", code, exitFailure)
	}
}

func TestBench_BadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--clients", "0"},
		{"--clients", "-3"},
		{"--resources", "0"},
		{"--duration", "0s"},
		{"--duration", "-1s"},
		{"--workload", "read"},
		{"--workload", "write", "--clients", "4", "--resources", "2"},
		{"--ttl", "0s"},
		{"--ttl", "1ms"},
		{"--wait", "-1s"},
		{"--wait", "1h"},
		{"--timeout", "0s"},
		{"--warmup", "-1s"},
		{"--value-size", "-1"},
		{"--key", ""},
		{"--key", "a/../b"},
		{"--addr", "ftp://127.0.0.1:7700"},
		{"-o", "yaml"},
		{"--progress", "sometimes"},
		{"--report", filepath.Join(t.TempDir(), "missing", "bench.html")},
		{"--no-such-flag"},
		{"extra-argument"},
	} {
		err := bench(t.Context(), args, stdio{nil, io.Discard, io.Discard})
		var usage *usageError
		if !errors.As(err, &usage) {
			t.Errorf("%q: err=%v, want a usage error", args, err)
		} else if code := exitCode(io.Discard, err); code != exitUsage {
			t.Errorf("%q: exit code %d, want %d", args, code, exitUsage)
		}
	}

	t.Run("BadEnv", func(t *testing.T) {
		t.Setenv("FENCE_CLIENTS", "many")
		var usage *usageError
		if err := bench(t.Context(), nil, stdio{nil, io.Discard, io.Discard}); !errors.As(err, &usage) {
			t.Fatalf("err=%v, want a usage error naming FENCE_CLIENTS", err)
		}
	})
}

func TestBenchConfig_Defaults(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		resources int
		wait      time.Duration
	}{
		{[]string{"--clients", "4"}, 4, 0},
		{[]string{"--clients", "4", "--workload", "contended"}, 1, load.DefaultWait},
		{[]string{"--clients", "4", "--workload", "contended", "--resources", "2", "--wait", "0s"}, 2, 0},
		{[]string{"--clients", "4", "--resources", "8", "--wait", "1s"}, 8, time.Second},
	} {
		var cfg benchConfig
		if _, _, _, err := parseArgs(benchFlags(&cfg, io.Discard), tc.args); err != nil {
			t.Fatal(err)
		}
		if err := cfg.validate(); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if cfg.Resources != tc.resources || cfg.Wait != tc.wait {
			t.Errorf("%q: Resources=%d Wait=%v, want %d, %v", tc.args, cfg.Resources, cfg.Wait, tc.resources, tc.wait)
		}
		if cfg.Duration != 10*time.Second || cfg.Warmup != time.Second || cfg.TTL != 10*time.Second ||
			cfg.ValueSize != 64 || cfg.Timeout != 10*time.Second || cfg.Key != "bench" || cfg.Config.Addr != "" { // "": an embedded server
			t.Errorf("%q: cfg=%+v, want the documented defaults", tc.args, cfg.Config)
		}
	}
}
