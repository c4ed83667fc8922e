package runreport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence/internal/tools/chaos"
	"github.com/fence-lock/fence/internal/tools/chaos/check"
	"github.com/fence-lock/fence/internal/tools/chaos/history"
	"github.com/fence-lock/fence/internal/tools/chaos/runreport/reporttest"
	report "github.com/fence-lock/fence/internal/tools/report"
)

// TestWriteHTML builds the report of a history made up for it: more
// resources than the timeline draws, a violation on the last one, and
// more operations than it keeps.
func TestWriteHTML(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "history.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := history.NewWriter(f)
	const resources = 15
	id := int64(1)
	add := func(op history.Op) int64 {
		op.ID = id
		id++
		if err := w.WriteOp(op); err != nil {
			t.Fatal(err)
		}
		return op.ID
	}
	ms := func(n int) int64 { return int64(n) * int64(time.Millisecond) }
	var stale int64
	for r := range resources {
		res := fmt.Sprintf("r%d", r)
		tok := uint64(0)
		cycles := 20
		if r == 0 {
			cycles = 400 // more than the timeline draws of a lane
		}
		for i := range cycles {
			tok++
			at := ms(10 * i * 400 / cycles)
			add(history.Op{Client: i % 3, Kind: history.KindAcquire, Resource: res, Token: tok, Call: at, Return: at + ms(1), Outcome: history.OK})
			add(history.Op{Client: i % 3, Kind: history.KindWrite, Resource: res, Key: "k0", Value: fmt.Sprint(i), Token: tok, Rev: uint64(i + 1), Call: at + ms(2), Return: at + ms(3), Outcome: history.OK})
			add(history.Op{Client: i % 3, Kind: history.KindRelease, Resource: res, Token: tok, Call: at + ms(4), Return: at + ms(5), Outcome: history.OK})
		}
		if r == resources-1 {
			// A write with a stale token, accepted: stale-accepted and
			// token-order must name it.
			stale = add(history.Op{Client: 7, Kind: history.KindWrite, Resource: res, Key: "k0", Value: "stale", Token: 1, Rev: 21, Call: ms(4100), Return: ms(4101), Outcome: history.OK})
		}
		add(history.Op{Client: 4, Kind: history.KindWrite, Resource: res, Key: "k0", Value: "late", Token: 2, Call: ms(4200), Return: ms(4201), Outcome: history.Fenced, Error: "fenced"})
		add(history.Op{Client: 5, Kind: history.KindWrite, Resource: res, Key: "k1", Value: "lost?", Token: 3, Call: ms(4300), Outcome: history.Unknown,
			Error: `Put "http://127.0.0.1:1/v1/resources/` + res + `/keys/k1": context deadline exceeded`})
	}
	faults := []history.Fault{
		{Kind: chaos.FaultPause, Client: 4, Start: ms(100), End: ms(4150), Detail: "SIGSTOP client-4 holding r0 token 2"},
		{Kind: chaos.FaultKill, Client: -1, Start: ms(1000), End: ms(1400), Detail: "kill -9 fence serve"},
		{Kind: chaos.FaultNet, Client: -1, Start: ms(2000), End: ms(2500), Detail: `black-hole "all" & more`},
	}
	for _, fl := range faults {
		if err := w.WriteFault(fl); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := check.CheckFile(path, check.Options{HTMLDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Result(check.StaleAccepted).Count == 0 || rep.Linearizability.HTML == "" {
		t.Fatalf("the made-up history has no stale-accepted violation: %+v", rep.Checkers)
	}
	cfg := chaos.Config{Duration: 4 * time.Second, Clients: 8, Resources: resources, Keys: 1, TTL: time.Second, Seed: 9,
		Faults: []string{"pause", "kill", "net"}, FaultEvery: time.Second, Unsafe: true, UnsafeClock: true}
	res := &chaos.Result{History: path, Ops: int(id - 1), Faults: faults, Duration: 4300 * time.Millisecond}
	in := Input{Config: cfg, Faults: "pause,kill,net", Result: res, Check: &rep, Summary: Summarize(cfg, res, &rep, path)}
	out := filepath.Join(dir, "report.html")
	var b bytes.Buffer
	if err := WriteHTML(&b, in); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := reporttest.ReadPage(t, out)
	// 12 lanes of 15: the one with the violation, and the first 11.
	lanes := regexp.MustCompile(`<text class="lane-name" x="4" y="[0-9.]+">(r\d+)</text>`).FindAllStringSubmatch(doc, -1)
	var names []string
	for _, m := range lanes {
		names = append(names, m[1])
	}
	want := []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r14"}
	if !slices.Equal(names, want) {
		t.Errorf("lanes %q, want %q", names, want)
	}
	ops, _ := reporttest.HistoryOps(t, path)
	drawn := reporttest.CheckMarks(t, doc, ops, want)
	if !strings.Contains(doc, "The timeline draws 12 of the 15 resources of the run") {
		t.Error("the report does not say that it left resources out")
	}
	if drawn[stale] != "ok" || !strings.Contains(doc, fmt.Sprintf(`<a href="#op-%d">%d</a>`, stale, stale)) ||
		!strings.Contains(doc, fmt.Sprintf(`<g class="m ok hl" id="op-%d">`, stale)) {
		t.Errorf("the stale write op %d is not drawn highlighted and linked", stale)
	}
	// Each of the 12 drawn lanes has its fenced write; the 3 not drawn, not.
	if n := len(regexp.MustCompile(`<g class="m fenced"`).FindAllString(doc, -1)); n != 12 {
		t.Errorf("%d fenced writes drawn, want 12 (one per lane drawn)", n)
	}
	if !strings.Contains(doc, "Drawn, a uniform sample of the ordinary events: r0: 600 of 801; besides them") {
		t.Errorf("no note on the sample")
	}
	for _, want := range []string{"<td>black-hole &#34;all&#34; &amp; more</td>", "fence chaos --duration 4s --seed 9 --faults pause,kill,net", "--think 0s --unsafe --unsafe-clock</pre>"} {
		if !strings.Contains(doc, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	// Porcupine's visualisation, whose data has the errors' URLs, is
	// embedded.
	if b, ok := reporttest.Embedded(t, doc); !ok {
		t.Errorf("porcupine's visualisation is not embedded: %.500s", doc[strings.Index(doc, `<section id="porcupine">`):])
	} else if !bytes.Contains(b, []byte("http://127.0.0.1:1/v1/resources/r14/keys/k1")) {
		t.Error("the embedded visualisation is not the history's")
	}
	// A history that cannot be read fails the report.
	in.Result = &chaos.Result{History: filepath.Join(dir, "missing.jsonl")}
	if err := WriteHTML(io.Discard, in); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing history: %v", err)
	}
}

func TestFetchesOutside(t *testing.T) {
	head := `<!doctype html><html><head><style>svg { fill: red }</style></head><body>` +
		`<svg xmlns="http://www.w3.org/2000/svg"></svg><script>const SVG_NS = 'http://www.w3.org/2000/svg'
      const data = `
	tail := "\n      render(data)\n    </script></body></html>"
	for _, tc := range []struct {
		name, doc string
		fetches   bool
	}{
		{"Porcupine", head + `[{"Metadata":"op 1: Put \"http://127.0.0.1:1/v1\": timeout"}]` + tail, false},
		{"MarkupInData", head + `[{"Metadata":"\u003cimg src=http://x.example/a.png\u003e"}]` + tail, true},
		{"ScriptFetch", strings.Replace(head, "<script>", `<script>fetch("https://x.example/d.json");`, 1) + `[]` + tail, true},
		{"ScriptSrc", strings.Replace(head, "<body>", `<body><script src="x.js"></script>`, 1) + `[]` + tail, true},
		{"AfterData", head + `[]` + strings.Replace(tail, "render(data)", `render(data); new Image().src = "http://x.example/p"`, 1), true},
		{"NoData", `<script src="http://x.example/x.js"></script>`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fetchesOutside([]byte(tc.doc))
			if (len(got) > 0) != tc.fetches {
				t.Errorf("fetchesOutside=%q, want fetches %v", got, tc.fetches)
			}
		})
	}
}

// TestDrawTimeline_FencedOverflow: when the fenced writes would take all
// the room kept out of the sample, the last of them are sampled, and the
// operation that a violation names is still drawn.
func TestDrawTimeline_FencedOverflow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := history.NewWriter(f)
	const fenced = report.DefaultMaxKept + 100
	for i := range fenced + 1 {
		op := history.Op{ID: int64(i + 1), Client: i % 4, Kind: history.KindWrite, Resource: "r0", Key: "k0", Token: 1, Call: int64(i) * 1000, Return: int64(i)*1000 + 500, Outcome: history.Fenced}
		if i == fenced {
			op.Outcome = history.OK // the last op, which a violation names
		}
		if err := w.WriteOp(op); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	named := map[int64]bool{fenced + 1: true}
	var sampled int
	tl, err := drawTimeline(Input{Result: &chaos.Result{History: path}}, named, map[string]bool{"r0": true}, &sampled)
	if err != nil {
		t.Fatal(err)
	}
	if want := fenced - (report.DefaultMaxKept - 2); sampled != want {
		t.Errorf("%d fenced writes sampled, want %d", sampled, want)
	}
	if !tl.Has(opID(fenced+1)) || !tl.Has("op-1") || !tl.Has(opID(report.DefaultMaxKept-2)) {
		t.Error("the named op, or the first fenced writes, are not drawn")
	}
}
