package e2e

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chaosReportScreenshot is the README's picture of a fence chaos report,
// written by TestChaosReport with -update-screenshots:
//
//	go test ./e2e -run TestChaosReport -update-screenshots
const chaosReportScreenshot = "chaos-report.png"

// TestChaosReport runs fence chaos --report for a few seconds, then opens
// the report from its file in a headless Chromium: the page must load
// without an exception or a console error, fetch nothing, and draw the
// run's faults and fenced writes in its timeline. With storage that
// ignores tokens, the violations must link to operations drawn in the
// timeline, and porcupine's visualisation must be embedded and drawn.
func TestChaosReport(t *testing.T) {
	findBrowser(t) // before a run that would be for nothing

	t.Run("OK", func(t *testing.T) {
		// Few clients on two resources, with pauses between their
		// cycles: a timeline that reads at a glance (the README's).
		file := filepath.Join(t.TempDir(), "chaos.html")
		rep, code, _ := runChaos(t, "--duration", "8s", "--seed", "3", "--clients", "4", "--resources", "2",
			"--think", "100ms", "--ttl", "500ms", "--fault-every", "700ms", "--report", file)
		if code != 0 || !rep.OK {
			t.Fatalf("exit %d, report %+v", code, rep)
		}
		b := openReport(t, file)
		if got := eval[string](b, `document.querySelector(".verdict").textContent`); got != "ok: fencing held under every fault" {
			t.Errorf("verdict %q", got)
		}
		// The journal's faults kill the server too, and are drawn as kills.
		faults, byClass := 0, map[string]int{}
		for kind, n := range rep.Faults {
			faults += n
			if kind == "bitflip" || kind == "lose-unsynced" {
				kind = "kill"
			}
			byClass[kind] += n
		}
		for class, n := range byClass {
			if got := eval[int](b, `document.querySelectorAll("#timeline g.span.s-`+class+`").length`); got != n {
				t.Errorf("%d faults drawn as %s, %d in the run", got, class, n)
			}
		}
		if got := eval[int](b, `document.querySelectorAll("#timeline g.span").length`); got != faults {
			t.Errorf("%d faults drawn, %d in the run", got, faults)
		}
		if got := eval[int](b, `document.querySelectorAll("#timeline g.m.fenced[id]").length`); got != rep.Fenced {
			t.Errorf("%d fenced writes drawn, %d in the run", got, rep.Fenced)
		}
		grant := eval[string](b, `document.querySelector("#timeline g.m.grant > title").textContent`)
		if !regexp.MustCompile(`^op \d+ · client \d · acquire r[01] → ok, token \d+ · `).MatchString(grant) {
			t.Errorf("a grant's tooltip: %q", grant)
		}
		// The chart is drawn at a readable size, its lanes and rows laid
		// out: 2 resources of 4 clients.
		size := eval[[]float64](b, `(r => [r.width, r.height])(document.querySelector("#timeline svg.tl").getBoundingClientRect())`)
		if size[0] < 800 || size[1] < 150 {
			t.Errorf("the timeline is %.0fx%.0f px", size[0], size[1])
		}
		if rows := eval[int](b, `document.querySelectorAll("#timeline .row-name").length`); rows != 8 {
			t.Errorf("%d rows, want 8", rows)
		}
		// At 1280 px the page does not scroll sideways, nor does the
		// chart in a box of its own: it fits its section.
		widths := eval[[]float64](b, `[document.documentElement.scrollWidth, document.documentElement.clientWidth,
			document.querySelector("#timeline svg.tl").getBoundingClientRect().right, document.querySelector("#timeline").getBoundingClientRect().right]`)
		if widths[0] > widths[1] || widths[2] > widths[3]+0.5 {
			t.Errorf("the page is %.0f px wide in a window of %.0f; the chart ends at %.0f px, its section at %.0f", widths[0], widths[1], widths[2], widths[3])
		}
		// The labels, measured in the browser's own font, do not overlap:
		// the tokens on a row, the faults across the chart.
		overlaps := eval[[]string](b, `(() => {
			const out = [];
			for (const cls of ["token", "span-label"]) {
				const lines = {};
				for (const t of document.querySelectorAll("#timeline text." + cls)) {
					(lines[t.getAttribute("y")] ??= []).push(t.getBBox());
				}
				for (const boxes of Object.values(lines)) {
					boxes.sort((a, b) => a.x - b.x);
					for (let i = 1; i < boxes.length; i++) {
						if (boxes[i].x < boxes[i-1].x + boxes[i-1].width) {
							out.push(cls + " at " + boxes[i-1].x.toFixed(1) + "+" + boxes[i-1].width.toFixed(1) + " and " + boxes[i].x.toFixed(1));
						}
					}
				}
			}
			return out;
		})()`)
		if len(overlaps) > 0 {
			t.Errorf("labels overlap: %q", overlaps)
		}
		if n := eval[int](b, `document.querySelectorAll("#timeline text.token").length`); n == 0 {
			t.Error("no token drawn")
		}
		b.noProblems()
		if *updateScreenshots {
			writeReportScreenshot(t, b, "#timeline", chaosReportScreenshot)
		}
	})

	t.Run("Unsafe", func(t *testing.T) {
		// Each pause lasts until another client got the paused one's
		// resource, and its stale write is sent before the run ends; a run
		// so loaded that no pause came at all runs again, longer.
		file := filepath.Join(t.TempDir(), "unsafe.html")
		var rep chaosJSON
		var code int
		for _, d := range []string{"5s", "10s", "20s"} {
			rep, code, _ = runChaos(t, "--duration", d, "--seed", "2", "--unsafe", "--faults", "pause", "--fault-every", "300ms", "--report", file)
			if rep.StaleAttempts > 0 {
				break
			}
		}
		if code != 7 || rep.Violations == 0 {
			t.Fatalf("exit %d, report %+v: want violations (exit 7)", code, rep)
		}
		b := openReport(t, file)
		if got := eval[int](b, `document.querySelectorAll("#violations li").length`); got == 0 {
			t.Fatal("no violation listed")
		}
		// Follow the first link to an operation: the timeline scrolls to
		// its mark, which the page highlights.
		href := eval[string](b, `document.querySelector('#violations a[href^="#op-"]').getAttribute("href")`)
		if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(`#violations a[href^="#op-"]`))); err != nil {
			t.Fatal(err)
		}
		b.waitFor("the operation "+href, `location.hash === `+jsString(href))
		target := eval[[]string](b, `(g => [g.tagName, g.getAttribute("class"), String(g.getBoundingClientRect().top >= 0 && g.getBoundingClientRect().bottom <= innerHeight), getComputedStyle(g.querySelector(".hit")).fillOpacity])(document.querySelector(":target"))`)
		if target[0] != "g" || !strings.Contains(target[1], "hl") || target[2] != "true" || target[3] != "0.45" {
			t.Errorf("the link %s led to %q: want the highlighted mark, in view, lit up", href, target)
		}
		// Porcupine's visualisation, embedded, draws its history.
		if rep.Checkers["linearizable"] > 0 {
			frames, err := chromedp.Run(b.ctx, chromedp.Nodes(chromedp.CSSAll("iframe.porcupine")))
			if err != nil || len(frames) != 1 {
				t.Fatalf("%d embedded visualisations (%v)", len(frames), err)
			}
			// A data: document runs in the page's process, where a query
			// from the iframe's node reaches it.
			ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
			boxes, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll("#canvas svg rect"), chromedp.FromNode(frames[0])))
			cancel()
			if err != nil || len(boxes) == 0 {
				t.Errorf("porcupine's visualisation draws nothing (%d boxes, %v)", len(boxes), err)
			}
		} else {
			t.Logf("the linearizable checker passed (%v): no visualisation to look at", rep.Checkers)
		}
		b.noProblems()
	})
}

// openReport opens the report in file in a new headless Chromium, and
// checks that it fetched nothing to show it.
func openReport(t *testing.T, file string) *browser {
	t.Helper()
	b := newBrowser(t)
	b.open("file://" + filepath.ToSlash(file))
	b.waitFor("the report's timeline", `document.querySelector("#timeline svg.tl") !== null`)
	if got := eval[string](b, `document.title`); got != "fence chaos report" {
		t.Errorf("title %q", got)
	}
	if n := eval[int](b, `performance.getEntriesByType("resource").filter(r => !r.name.startsWith("data:")).length`); n != 0 {
		t.Errorf("the report fetched %d resources, want none: %s", n,
			eval[string](b, `performance.getEntriesByType("resource").map(r => r.name).join(" ")`))
	}
	return b
}
