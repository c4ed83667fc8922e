package check_test

import (
	"bufio"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fence-lock/fence/internal/tools/chaos/check"
	"github.com/fence-lock/fence/internal/tools/chaos/history"
)

// writeHistory writes ops and faults to a file in dir, ops first.
func writeHistory(tb testing.TB, dir string, ops []history.Op, faults []history.Fault) string {
	tb.Helper()
	path := filepath.Join(dir, "history.jsonl")
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	w := history.NewWriter(bw)
	for _, op := range ops {
		if err := w.WriteOp(op); err != nil {
			tb.Fatal(err)
		}
	}
	for _, fl := range faults {
		if err := w.WriteFault(fl); err != nil {
			tb.Fatal(err)
		}
	}
	if err := bw.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// timings are the parts of a report that say how long things took.
var timings = regexp.MustCompile(`"duration_ms":\d+|in \d+ ms`)

func reportJSON(tb testing.TB, rep check.Report) string {
	tb.Helper()
	b, err := json.Marshal(rep)
	if err != nil {
		tb.Fatal(err)
	}
	return timings.ReplaceAllString(string(b), "")
}

// TestCheckFile_SameAsCheck: CheckFile, which reads a history from its file
// in passes of a few resources each, gives the report Check gives on the
// same history in memory: safe and unsafe stores, garbled histories, in
// shuffled order, with reads that name no resource, in one batch or many.
func TestCheckFile_SameAsCheck(t *testing.T) {
	faults := []history.Fault{{Kind: "pause", Client: 1, Start: 5, End: 900}, {Kind: "kill", Client: -1, Start: 1000}}
	failing := 0
	seeds, batches := uint64(30), []int{1 << 20, 50, 1}
	if raceEnabled {
		seeds, batches = 12, []int{1 << 20, 1}
	}
	for seed := range seeds {
		cfg := simConfig{resources: 1 + int(seed%5), clients: 3, opsEach: 40, unknown: 0.05, unsafe: seed%3 == 0}
		ops := simulate(t, seed, cfg)
		rng := rand.New(rand.NewPCG(seed, 9))
		if seed%2 == 1 {
			garble(ops, rng)
		}
		if seed%4 == 0 {
			rng.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
		}
		if seed%5 == 0 {
			for i := range ops {
				if ops[i].Kind == history.KindRead && ops[i].Client == -1 {
					ops[i].Resource = "" // found from the writes
					break
				}
			}
		}
		path := writeHistory(t, t.TempDir(), ops, faults)
		for _, opts := range []check.Options{{}, {MaxViolations: 1}, {FenceOnWrite: true}} {
			want := check.Check(ops, faults, opts)
			if !want.OK {
				failing++
			}
			for _, batch := range batches {
				restore := check.SetBatchOps(batch)
				got, err := check.CheckFile(path, opts)
				restore()
				if err != nil {
					t.Fatal(err)
				}
				if g, w := reportJSON(t, got), reportJSON(t, want); g != w {
					t.Fatalf("seed %d, %+v, batches of %d ops:\nCheckFile %s\nCheck     %s", seed, opts, batch, g, w)
				}
			}
		}
	}
	if failing < 4 {
		t.Fatalf("only %d failing reports: the test does not compare violations", failing)
	}
}

func TestCheckFile_Errors(t *testing.T) {
	if _, err := check.CheckFile(filepath.Join(t.TempDir(), "missing.jsonl"), check.Options{}); err == nil {
		t.Fatal("CheckFile of a missing file: no error")
	}
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(path, []byte(`{"id":1,"client":0,"kind":"read","call":1,"return":2,"outcome":"ok"}`+"\n{oops\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := check.CheckFile(path, check.Options{})
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("CheckFile of a malformed file: %v, want an error naming line 2", err)
	}
}

// peakHeap runs fn and returns the peak of the live heap meanwhile, sampled
// every few milliseconds, above what it was before.
func peakHeap(fn func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	fn()
	close(stop)
	<-done
	return max(peak.Load(), base) - base
}

// TestCheckFile_Memory: the memory CheckFile needs grows linearly with the
// largest resource's history, not with its square as porcupine's own check
// did (it took 550 MB for the 48,000 model ops of the larger history here;
// 1.4 to 4.4 GB for 3 to 5 minutes of fence chaos), and it holds one
// resource at a time: doubling the resources at the same size each leaves
// it where it was.
func TestCheckFile_Memory(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: simulates and checks 300,000 ops")
	}
	measure := func(resources, opsEach int) (peak uint64, rep check.Report) {
		ops := simulate(t, 42, simConfig{resources: resources, clients: 4, opsEach: opsEach, unknown: 0.005})
		path := writeHistory(t, t.TempDir(), ops, nil)
		ops = nil
		restore := check.SetBatchOps(1) // one resource in memory at a time
		defer restore()
		peak = peakHeap(func() {
			var err error
			if rep, err = check.CheckFile(path, check.Options{Timeout: 5 * time.Minute}); err != nil {
				t.Error(err)
			}
		})
		if !rep.OK {
			t.Fatalf("%d resources x %d ops: violations: %+v", resources, opsEach, rep.Checkers)
		}
		t.Logf("%d resources, %d ops, %d in the model (largest partition %d): peak heap %d MB, search %d ms",
			resources, rep.Ops, rep.Linearizability.Ops, rep.Linearizability.MaxOps, peak>>20, rep.Linearizability.DurationMS)
		return peak, rep
	}
	n := 10000 // 40,000 ops, 24,000 in the model
	if raceEnabled {
		n = 4000
	}
	small, _ := measure(1, n)
	large, _ := measure(1, 2*n) // twice as long
	wide, _ := measure(2, 2*n)  // as long again, in two resources
	if large > 3*small || large > 200<<20 {
		t.Errorf("peak heap %d MB for twice the ops of one with %d MB: want linear growth, under 200 MB", large>>20, small>>20)
	}
	if wide > large*7/4 {
		t.Errorf("peak heap %d MB for two resources of the size of one with %d MB: want one resource in memory at a time", wide>>20, large>>20)
	}
}

// TestCheckFile_Progress: CheckFile says where it is, resource by resource,
// in name order, and the verdict is the same with Progress set.
func TestCheckFile_Progress(t *testing.T) {
	ops := simulate(t, 7, simConfig{resources: 3, clients: 3, opsEach: 40})
	path := writeHistory(t, t.TempDir(), ops, nil)
	var got []check.Progress
	rep, err := check.CheckFile(path, check.Options{Progress: func(p check.Progress) { got = append(got, p) }})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := check.CheckFile(path, check.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if reportJSON(t, rep) != reportJSON(t, plain) {
		t.Fatal("the report differs with Progress set")
	}
	if len(got) < 5 || got[0] != (check.Progress{}) {
		t.Fatalf("progress %+v: want a start, one per resource and an end", got)
	}
	var resources []string
	for i, p := range got[1 : len(got)-1] {
		if p.Resource == "" || p.Done != i || p.Total != len(got)-2 || p.Ops == 0 {
			t.Errorf("progress %d: %+v, want resource %d of %d with its ops", i+1, p, i, len(got)-2)
		}
		resources = append(resources, p.Resource)
	}
	if last := got[len(got)-1]; last.Resource != "" || last.Done != last.Total || last.Total != len(resources) {
		t.Errorf("last progress %+v: want every resource done", last)
	}
	for i := 1; i < len(resources); i++ {
		if resources[i-1] >= resources[i] {
			t.Errorf("resources judged in the order %q, want name order", resources)
		}
	}
}
