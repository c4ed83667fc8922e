package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"github.com/fence-lock/fence/fencetest"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	load "github.com/fence-lock/fence/internal/bench"
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
		for _, workload := range []string{"cycle", "contended"} {
			var stdout, stderr bytes.Buffer
			err := bench(t.Context(), []string{"--addr", url, "--workload", workload, "--clients", "3",
				"--duration", "1s", "--warmup", "100ms", "-o", "json", "--progress", "always"},
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
			// Progress went to stderr, one line per second, not to stdout.
			if !strings.Contains(stderr.String(), " ops/s  errors 0") {
				t.Errorf("%s: stderr=%q, want progress lines", workload, stderr.String())
			}
		}
	})

	t.Run("Text", func(t *testing.T) {
		t.Setenv("FENCE_ADDR", url)         // the environment twin of --addr
		t.Setenv("FENCE_WORKLOAD", "write") // and of --workload
		var stdout, stderr bytes.Buffer
		err := bench(t.Context(), []string{"--clients", "2", "--resources", "2", "--duration", "300ms", "--warmup", "0s"},
			stdio{strings.NewReader(""), &stdout, &stderr})
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"write workload", "writes", "latency ms", "renew", "errors", "overlaps 0"} {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
			}
		}
		if stderr.Len() != 0 {
			t.Errorf("stderr=%q, want no progress when stderr is not a terminal", stderr.String())
		}
	})
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
			cfg.ValueSize != 64 || cfg.Timeout != 10*time.Second || cfg.Key != "bench" || cfg.Config.Addr != DefaultAddr {
			t.Errorf("%q: cfg=%+v, want the documented defaults", tc.args, cfg.Config)
		}
	}
}
