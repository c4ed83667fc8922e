package e2e

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// updateScreenshots makes the report tests in this package (fence chaos --report, fence bench
// --report) write their screenshots under docs/img, for the README, besides checking the page.
var updateScreenshots = flag.Bool("update-screenshots", false, "write the report screenshots under docs/img (for the README)")

// writeReportScreenshot writes docs/img/name: the top of the page that b
// shows, 1100 pixels wide, down to the end of the element until selects.
func writeReportScreenshot(t *testing.T, b *browser, until, name string) {
	t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.EmulateViewport(1100, 800)); err != nil {
		t.Fatal(err)
	}
	bottom := eval[float64](b, `document.querySelector("`+until+`").getBoundingClientRect().bottom + window.scrollY`)
	if err := chromedp.Do(b.ctx, chromedp.EmulateViewport(1100, int64(bottom)+8)); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if len(png) > 300<<10 {
		t.Errorf("the screenshot has %d KiB, want at most 300 for the README", len(png)>>10)
	}
	path := filepath.Join("..", "docs", "img", name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d KiB)", path, len(png)>>10)
}
