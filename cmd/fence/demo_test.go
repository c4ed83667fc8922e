package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/fencetest"
)

// laxStore is fence storage with its check switched off: a write with a
// stale token is applied as if it carried the last fence.
type laxStore struct{ fence.Store }

func (s laxStore) Put(ctx context.Context, resource, key string, value []byte, token fence.Token, c fence.Cond) (fence.WriteResult, error) {
	wr, err := s.Store.Put(ctx, resource, key, value, token, c)
	if fe := (*fence.FencedError)(nil); errors.As(err, &fe) {
		return s.Store.Put(ctx, resource, key, value, fe.LastFence, c)
	}
	return wr, err
}

// newDemoServer runs a fence server in this process, as a stand-in for one
// given with --addr, and returns its URL. With lax, its storage does not fence.
func newDemoServer(t *testing.T, lax bool) string {
	t.Helper()
	if !lax {
		return fencetest.NewServer(t, nil)
	}
	return fencetest.NewServer(t, func(s fence.Store) fence.Store { return laxStore{s} })
}

// runDemo runs fence demo with args and returns its stdout, stderr and error.
func runDemo(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = demo(t.Context(), args, stdio{strings.NewReader(""), &out, &errOut})
	return out.String(), errOut.String(), err
}

// demoJSON is the part of the -o json output the tests check.
type demoJSON struct {
	Addr     string  `json:"addr"`
	Embedded bool    `json:"embedded"`
	TTLMS    float64 `json:"ttl_ms"`
	PauseMS  float64 `json:"pause_ms"`
	OK       bool    `json:"ok"`
	Unsafe   runJSON `json:"unsafe"`
	Fenced   runJSON `json:"fenced"`
}

type runJSON struct {
	Resource string `json:"resource"`
	TokenA   uint64 `json:"token_a"`
	TokenB   uint64 `json:"token_b"`
	WriteA   struct {
		Status    int    `json:"status"`
		Code      string `json:"code"`
		Presented uint64 `json:"presented"`
		LastFence uint64 `json:"last_fence"`
	} `json:"write_a"`
	Final   string `json:"final"`
	Outcome string `json:"outcome"`
	Events  []struct {
		AtMS    float64 `json:"at_ms"`
		Actor   string  `json:"actor"`
		To      string  `json:"to"`
		Kind    string  `json:"kind"`
		Message string  `json:"message"`
		Reply   string  `json:"reply"`
	} `json:"events"`
}

func TestDemo(t *testing.T) {
	t.Run("EnvTwins", func(t *testing.T) {
		// Not parallel: t.Setenv. FENCE_TTL stands for --ttl, FENCE_OUTPUT for -o.
		t.Setenv("FENCE_TTL", "200ms")
		t.Setenv("FENCE_OUTPUT", "json")
		stdout, stderr, err := runDemo(t, "--pause", "500ms")
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		var got demoJSON
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
		}
		if got.TTLMS != 200 || got.PauseMS != 500 || !got.OK {
			t.Fatalf("ttl_ms=%v pause_ms=%v ok=%v, want 200, 500, true", got.TTLMS, got.PauseMS, got.OK)
		}
	})

	t.Run("MermaidStdout", func(t *testing.T) {
		// Not parallel: t.Chdir, to see that no file named "-" is written.
		dir := t.TempDir()
		t.Chdir(dir)
		stdout, stderr, err := runDemo(t, "--ttl", "200ms", "--mermaid", "-")
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "-")); err == nil {
			t.Error(`--mermaid - wrote a file named "-"`)
		}
		// stdout is the diagram alone, for a pipe or a redirection; the
		// timeline goes to stderr.
		if !strings.HasPrefix(stdout, "sequenceDiagram\n") || strings.Contains(stdout, "Run 1:") {
			t.Errorf("stdout is not the diagram alone:\n%s", stdout)
		}
		if !strings.Contains(stdout, "Store-->>A: 409 fenced (presented 1, last_fence 2)") {
			t.Errorf("the diagram lacks the fenced write:\n%s", stdout)
		}
		if !strings.Contains(stderr, "Run 2: fence storage") {
			t.Errorf("the timeline is not on stderr:\n%s", stderr)
		}
		// -o json writes stdout too: the two cannot share it.
		_, _, err = runDemo(t, "--mermaid", "-", "-o", "json")
		var usage *usageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), "--mermaid -") {
			t.Errorf("--mermaid - -o json: err=%v, want a usage error naming --mermaid -", err)
		}
	})

	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		stdout, stderr, err := runDemo(t, "--ttl", "200ms", "-o", "json")
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		var got demoJSON
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
		}
		if !got.OK || !got.Embedded || got.TTLMS != 200 || got.PauseMS != 700 {
			t.Errorf("ok=%v embedded=%v ttl_ms=%v pause_ms=%v, want true, true, 200, 700", got.OK, got.Embedded, got.TTLMS, got.PauseMS)
		}
		if u := got.Unsafe; u.Outcome != "stale_write_won" || u.Final != "A" || u.WriteA.Status != 200 {
			t.Errorf("unsafe: outcome=%s final=%q write_a=%+v, want A's stale write accepted and final", u.Outcome, u.Final, u.WriteA)
		}
		f := got.Fenced
		if f.WriteA.Status != 409 || f.WriteA.Code != "fenced" || f.WriteA.Presented != f.TokenA || f.WriteA.LastFence != f.TokenA+1 || f.TokenB != f.TokenA+1 {
			t.Errorf("fenced: token_a=%d token_b=%d write_a=%+v, want 409 fenced presented N last_fence N+1", f.TokenA, f.TokenB, f.WriteA)
		}
		if f.Outcome != "stale_write_rejected" || f.Final != "B" {
			t.Errorf("fenced: outcome=%s final=%q, want stale_write_rejected and B", f.Outcome, f.Final)
		}
		if n := len(f.Events); n != 7 || f.Events[n-1].Actor != "A" || f.Events[n-1].To != "storage" ||
			f.Events[n-1].Reply != "409 fenced (presented 1, last_fence 2)" || f.Events[n-1].AtMS < 700 {
			t.Errorf("fenced events: %+v, want 7 ending with A's fenced PUT after its 700ms pause", f.Events)
		}
		if want := "fence demo: using an embedded fence server in a temporary directory\n"; stderr != want {
			t.Errorf("stderr=%q, want only the server it uses with -o json: %q", stderr, want)
		}
	})

	t.Run("TextAndMermaid", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "demo.mmd")
		stdout, stderr, err := runDemo(t, "--ttl", "200ms", "--mermaid", path)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		for _, want := range []string{
			"Run 1: a last-writer-wins store",
			"Run 2: fence storage",
			"⏸ paused (GC, swap, partition) for 700ms",
			"fence  ⌛ lease 1 expired",
			"──PUT total=A, token 1──▶  storage  409 fenced (presented 1, last_fence 2)",
			`result: total = "A"  ✘ the stale write won`,
			`result: total = "B"  ✔ the stale write was rejected`,
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, stdout)
			}
		}
		diagram, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(diagram), "sequenceDiagram") {
			t.Errorf("%s does not start with sequenceDiagram:\n%s", path, diagram)
		}
		for _, want := range []string{"participant Lock as fence", "Store-->>A: 409 fenced (presented 1, last_fence 2)", "Store-->>A: 200 OK rev 2"} {
			if !strings.Contains(string(diagram), want) {
				t.Errorf("diagram lacks %q:\n%s", want, diagram)
			}
		}
	})

	t.Run("Addr", func(t *testing.T) {
		t.Parallel()
		url := newDemoServer(t, false)
		for i := range 2 { // twice against one server: each demo has resources of its own
			stdout, stderr, err := runDemo(t, "--addr", url, "--ttl", "200ms", "--pause", "500ms", "-o", "json")
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			var got demoJSON
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatal(err)
			}
			if got.Embedded || got.Addr != url || !got.OK || got.Fenced.WriteA.Code != "fenced" || got.Fenced.Final != "B" {
				t.Errorf("run %d: embedded=%v addr=%q ok=%v fenced=%+v, want A fenced on %s", i, got.Embedded, got.Addr, got.OK, got.Fenced, url)
			}
		}
	})

	t.Run("NotFenced", func(t *testing.T) {
		t.Parallel()
		// A server whose storage does not check tokens fails the demo.
		url := newDemoServer(t, true)
		stdout, _, err := runDemo(t, "--addr", url, "--ttl", "200ms", "--pause", "500ms")
		var exit *exitError
		if !errors.As(err, &exit) || exit.code != exitFailure || !strings.Contains(err.Error(), "did not stop the stale holder") {
			t.Fatalf("err=%v, want exit code %d: fencing did not stop the stale holder", err, exitFailure)
		}
		if !strings.Contains(stdout, "FAILED") {
			t.Errorf("stdout lacks FAILED:\n%s", stdout)
		}
		var stderr bytes.Buffer
		if code := exitCode(&stderr, err); code != exitFailure || !strings.Contains(stderr.String(), "fence: demo:") {
			t.Errorf("exit code %d, stderr %q; want %d and the message", code, stderr.String(), exitFailure)
		}
	})

	t.Run("Usage", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"extra"},
			{"--ttl", "1s", "--pause", "1s"},
			{"--ttl", "1ms"},
			{"-o", "yaml"},
			{"--addr", "ftp://127.0.0.1:7700"},
			{"--", "x"},
		} {
			_, _, err := runDemo(t, args...)
			var usage *usageError
			if !errors.As(err, &usage) {
				t.Errorf("%q: err=%v, want a usage error", args, err)
			}
		}
	})

	t.Run("Help", func(t *testing.T) {
		t.Parallel()
		stdout, stderr, err := runDemo(t, "--help")
		if !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("err=%v, want flag.ErrHelp", err)
		}
		for _, want := range []string{"Usage: fence demo", "Examples:", "fence demo --addr http://127.0.0.1:7700 --mermaid demo.mmd", "-pause", "-mermaid"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("help lacks %q:\n%s", want, stdout)
			}
		}
		if stderr != "" {
			t.Errorf("stderr=%q, want the help on stdout only", stderr)
		}
	})
}
