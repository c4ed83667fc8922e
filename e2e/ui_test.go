package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// updateScreenshot makes TestDashboard_StaleHolder write docs/img/dashboard.png
// from the end state of its story, at 1280x800:
//
//	go test -race -run TestDashboard_StaleHolder ./e2e/ -update-screenshot
var updateScreenshot = flag.Bool("update-screenshot", false, "write docs/img/dashboard.png from TestDashboard_StaleHolder's end state")

// findBrowser returns the path of Chromium or Chrome, or skips t without one
// (fails it with FENCE_REQUIRE_SERVERS=1, as CI runs).
func findBrowser(t *testing.T) string {
	t.Helper()
	names := []string{"chromium", "chromium-browser", "google-chrome"}
	for _, name := range names {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("FENCE_REQUIRE_SERVERS") == "1" {
		t.Fatalf("none of %v is installed", names)
	}
	t.Skipf("none of %v is installed (FENCE_REQUIRE_SERVERS=1 makes this a failure)", names)
	return ""
}

// browser is one tab of a headless Chromium that the test started, and what
// its pages reported as going wrong.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	problems []string // uncaught exceptions, console errors, CSP violations
}

// newBrowser starts a headless Chromium for t, stopped when t ends, and
// opens a tab. The browser is given at most 30 s.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := findBrowser(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // tests run as root in containers
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("no-proxy-server", true), // the pages are on loopback
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("lang", "en-US"),
	)
	b := &browser{t: t}
	ctx, cancelTimeout := context.WithTimeout(context.Background(), 30*time.Second)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tabCtx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithListener(b.listen))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for the browser to exit
		cancelTimeout()
	})
	b.ctx = tabCtx
	if err := chromedp.Do(tabCtx); err != nil { // starts the browser, opens the tab
		t.Fatalf("starting %s: %v", path, err)
	}
	return b
}

// listen keeps what goes wrong in the page. It runs in chromedp's loop.
func (b *browser) listen(ev any) {
	var p string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		p = "exception: " + d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			p += " " + d.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError {
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			p = "console.error: " + strings.Join(args, " ")
		}
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError {
			p = "log (" + string(ev.Entry.Source) + "): " + ev.Entry.Text + " " + ev.Entry.URL
		}
	}
	if p != "" {
		b.mu.Lock()
		b.problems = append(b.problems, p)
		b.mu.Unlock()
	}
}

// noProblems fails t if the page threw, logged an error or broke its
// Content-Security-Policy, except for problems that contain one of allowed.
func (b *browser) noProblems(allowed ...string) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
next:
	for _, p := range b.problems {
		for _, a := range allowed {
			if strings.Contains(p, a) {
				continue next
			}
		}
		b.t.Errorf("the page reported: %s", p)
	}
}

// open navigates the tab to url.
func (b *browser) open(url string) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(url)); err != nil {
		b.t.Fatalf("opening %s: %v", url, err)
	}
}

// eval evaluates the JavaScript expression js in the page and decodes its
// value into a T.
func eval[T any](b *browser, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// waitFor waits until the JavaScript expression js is true in the page, for
// at most 10 s, and fails t with what the page shows if it does not become
// true. (chromedp.Poll builds its predicate with new Function, which the
// dashboard's Content-Security-Policy forbids, so this polls from Go.)
func (b *browser) waitFor(what, js string) {
	b.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool]("Boolean("+js+")"))
		if err == nil && ok {
			return
		}
		if err != nil && b.ctx.Err() != nil || time.Now().After(deadline) {
			b.t.Fatalf("the page does not show %s (%s): %v\n%s", what, js, err, b.dump())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dump is what the page shows, for failure messages.
func (b *browser) dump() string {
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`[
		"status: " + document.getElementById("status").textContent,
		"stream: " + document.body.dataset.watch,
		"locks: " + document.querySelector("#locks tbody").innerText,
		"fences: " + document.querySelector("#resources tbody").innerText,
		"timeline: " + document.querySelector("#timeline tbody").innerText,
	].join("\n")`))
	if err != nil {
		return "(the page cannot be read: " + err.Error() + ")"
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return s + "\nproblems: " + strings.Join(b.problems, "\n")
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// storyClient sends the story's requests to the API, with a bearer token if
// token is not "".
type storyClient struct {
	t     *testing.T
	url   string
	token string
}

func (c storyClient) do(method, path, body string, header map[string]string, out any) int {
	c.t.Helper()
	h := map[string]string{}
	for k, v := range header {
		h[k] = v
	}
	if c.token != "" {
		h["Authorization"] = "Bearer " + c.token
	}
	return call(c.t, method, c.url+path, body, h, out)
}

// acquire acquires resource for holder and returns the lease's token.
func (c storyClient) acquire(resource, holder string, ttl, wait time.Duration) uint64 {
	c.t.Helper()
	var l lease
	body := fmt.Sprintf(`{"holder":%q,"ttl_ms":%d,"wait_ms":%d}`, holder, ttl.Milliseconds(), wait.Milliseconds())
	if code := c.do("POST", "/v1/locks/"+resource+"/acquire", body, nil, &l); code != 200 || l.Token == 0 {
		c.t.Fatalf("%s acquiring %s: %d %+v", holder, resource, code, l)
	}
	return l.Token
}

// put writes value at resource/key with token and returns the status code
// and problem code.
func (c storyClient) put(resource, key string, token uint64, value string) (int, problem) {
	c.t.Helper()
	var p problem
	code := c.do("PUT", "/v1/kv/"+resource+"/"+key, value, map[string]string{"Fencing-Token": strconv.FormatUint(token, 10)}, &p)
	return code, p
}

// TestDashboard_StaleHolder opens the dashboard in a headless Chromium and
// plays the stale holder's story through the API: A's lease expires while
// it is paused, B acquires the resource and writes, and A's late write with
// its old token is rejected. The page must show the grant to B, the
// rejection of A's write, B as the holder, the fences, and the cluster;
// it lists the locks in pages (?limit=2 on its URL) and filters them by
// prefix.
func TestDashboard_StaleHolder(t *testing.T) {
	srv := start(t, t.TempDir())
	api := storyClient{t: t, url: srv.URL}

	// Other locks, one with a waiter, so that the list has pages.
	api.acquire("inventory%2F17", "stock-keeper", time.Minute, 0)
	api.acquire("inventory%2F42", "stock-keeper", time.Minute, 0)
	api.acquire("reports", "nightly-job", time.Minute, 0)
	waiter, stopWaiter := context.WithCancel(context.Background())
	defer stopWaiter()
	go func() { // a waiter on reports, until the test ends
		req, _ := http.NewRequestWithContext(waiter, "POST", srv.URL+"/v1/locks/reports/acquire",
			strings.NewReader(`{"holder":"report-viewer","wait_ms":60000}`))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitWaiters(t, srv.URL, "reports", 1)

	b := newBrowser(t)
	began := time.Now()
	b.open(srv.URL + "/ui/?limit=2")
	b.waitFor("the stream live", `document.body.dataset.watch === "live"`)
	b.waitFor("the three locks, listed in pages of two",
		`document.querySelectorAll("#locks tbody tr").length === 3`)
	b.waitFor("the waiter on reports",
		`document.querySelector('#locks tr[data-resource="reports"] td.waiters').textContent === "1"`)
	b.waitFor("the cluster", `document.getElementById("cluster-role").textContent === "leader" &&
		document.getElementById("cluster-store").textContent === "embedded" &&
		document.getElementById("cluster-epoch").textContent === "1" &&
		document.querySelector("#servers tbody td.role").textContent === "leader"`)

	// A acquires with a short TTL and pauses past it.
	tokenA := api.acquire("orders", "worker-a", 300*time.Millisecond, 0)
	b.waitFor("A holding orders", `document.querySelector('#locks tr[data-resource="orders"] td.holder')?.textContent === "worker-a"`)
	// B waits for the lock: it gets it when A's lease expires.
	tokenB := api.acquire("orders", "worker-b", time.Minute, 5*time.Second)
	if tokenB <= tokenA {
		t.Fatalf("B's token %d is not above A's %d", tokenB, tokenA)
	}
	if code, p := api.put("orders", "invoice-7", tokenB, "paid by B"); code != 200 {
		t.Fatalf("B's write: %d %+v", code, p)
	}
	// A wakes up and writes with its old token: fenced.
	if code, p := api.put("orders", "invoice-7", tokenA, "paid by A"); code != 409 || p.Code != "fenced" {
		t.Fatalf("A's stale write: %d %+v, want 409 fenced", code, p)
	}

	a, bt := strconv.FormatUint(tokenA, 10), strconv.FormatUint(tokenB, 10)
	b.waitFor("A's lease expiring", `document.querySelector('#timeline tr[data-type="expired"][data-resource="orders"][data-holder="worker-a"][data-token="`+a+`"]')`)
	b.waitFor("the grant to B", `document.querySelector('#timeline tr[data-type="granted"][data-resource="orders"][data-holder="worker-b"][data-token="`+bt+`"]')`)
	want := fmt.Sprintf("stale write rejected: token %s < last fence %s (key invoice-7, put)", a, bt)
	b.waitFor("the rejection of A's write", `[...document.querySelectorAll('#timeline tr.rejected[data-type="write_rejected"][data-token="`+a+`"]')]
		.some((tr) => tr.textContent.includes(`+jsString(want)+`) && tr.querySelector("td.last-fence").textContent === "`+bt+`")`)
	b.waitFor("B holding orders", `(() => {
		const tr = document.querySelector('#locks tr[data-resource="orders"]');
		return tr && tr.querySelector("td.holder").textContent === "worker-b" &&
			tr.querySelector("td.token").textContent === "`+bt+`" &&
			/^\d+ s$/.test(tr.querySelector("td.left").textContent);
	})()`)
	b.waitFor("the fences of orders", `(() => {
		const tr = document.querySelector('#resources tr[data-resource="orders"]');
		return tr && tr.querySelector("td.last-token").textContent === "`+bt+`" &&
			tr.querySelector("td.last-fence").textContent === "`+bt+`" &&
			tr.querySelector("td.held").textContent.startsWith("worker-b");
	})()`)
	// Newest first: the rejection is above the grant to B, which is above A's expiry.
	order := eval[[]string](b, `[...document.querySelectorAll('#timeline tbody tr[data-resource="orders"]')].map((tr) => tr.dataset.type)`)
	if want := []string{"write_rejected", "fence_raised", "granted", "expired", "fence_raised", "granted"}; strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("timeline of orders, newest first = %v, want %v", order, want)
	}
	if status := eval[string](b, `document.getElementById("status").className + ": " + document.getElementById("status").textContent`); strings.Contains(status, "error") {
		t.Errorf("status line: %s", status)
	}
	// Tokens up to 2^63-1 keep every digit.
	if got := eval[string](b, `window.fenceDashboard.parseJSON('{"token":9223372036854775807,"n":[1,2.5]}').token`); got != "9223372036854775807" {
		t.Errorf("parseJSON kept the token as %q", got)
	}
	t.Logf("the page showed the story %v after it opened", time.Since(began).Round(time.Millisecond))

	if *updateScreenshot {
		writeScreenshot(t, b)
	}

	// The prefix filter: the list, the fences and the timeline.
	if err := chromedp.Do(b.ctx, chromedp.SendKeys(chromedp.ID("prefix"), "inventory/")); err != nil {
		t.Fatal(err)
	}
	b.waitFor("only the inventory locks", `[...document.querySelectorAll("#locks tbody tr")].map((tr) => tr.dataset.resource).join(" ") === "inventory/17 inventory/42"`)
	b.waitFor("no fences but the inventory's", `[...document.querySelectorAll("#resources tbody tr")].every((tr) => tr.dataset.resource.startsWith("inventory/"))`)
	b.waitFor("no orders in the timeline", `[...document.querySelectorAll('#timeline tr[data-resource="orders"]')].every((tr) => tr.hidden)`)
	b.waitFor("the prefix in the URL", `new URLSearchParams(location.search).get("prefix") === "inventory/"`)
	b.noProblems()
}

// TestDashboard_OpenedAfter runs the stale-holder story first and opens
// the page after it, as a user who reads the README does: the timeline
// shows the story from the server's recent events, the fences panel lists
// a resource nobody holds now, and the locks are what the listing says
// (A's replayed grant does not make A a holder again).
func TestDashboard_OpenedAfter(t *testing.T) {
	srv := start(t, t.TempDir())
	api := storyClient{t: t, url: srv.URL}
	old := api.acquire("archive", "worker-old", time.Minute, 0)
	if code := api.do("POST", "/v1/locks/archive/release", fmt.Sprintf(`{"token":%d}`, old), nil, nil); code != 200 {
		t.Fatalf("release archive: %d", code)
	}
	tokenA := api.acquire("orders", "worker-a", 300*time.Millisecond, 0)
	tokenB := api.acquire("orders", "worker-b", time.Minute, 5*time.Second)
	if code, p := api.put("orders", "invoice-7", tokenB, "paid by B"); code != 200 {
		t.Fatalf("B's write: %d %+v", code, p)
	}
	if code, p := api.put("orders", "invoice-7", tokenA, "paid by A"); code != 409 || p.Code != "fenced" {
		t.Fatalf("A's stale write: %d %+v, want 409 fenced", code, p)
	}

	b := newBrowser(t)
	b.open(srv.URL + "/ui/")
	b.waitFor("the stream live", `document.body.dataset.watch === "live"`)
	a, bt := strconv.FormatUint(tokenA, 10), strconv.FormatUint(tokenB, 10)
	b.waitFor("the story on the timeline", `document.querySelectorAll('#timeline tbody tr[data-resource="orders"]').length === 6`)
	order := eval[[]string](b, `[...document.querySelectorAll('#timeline tbody tr[data-resource="orders"]')].map((tr) => tr.dataset.type + ":" + tr.dataset.token)`)
	if want := []string{"write_rejected:" + a, "fence_raised:" + bt, "granted:" + bt, "expired:" + a, "fence_raised:" + a, "granted:" + a}; strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("timeline of orders, newest first = %v, want %v", order, want)
	}
	b.waitFor("archive, released, among the fences", `(() => {
		const tr = document.querySelector('#resources tr[data-resource="archive"]');
		return tr && tr.querySelector("td.last-fence").textContent === "`+strconv.FormatUint(old, 10)+`" &&
			tr.querySelector("td.held").textContent === "free";
	})()`)
	b.waitFor("B, and only B, holding orders", `[...document.querySelectorAll("#locks tbody tr")].map((tr) => tr.dataset.resource + "=" + tr.querySelector("td.holder").textContent).join(" ") === "orders=worker-b"`)
	// A new event after the replay is applied to the locks as before.
	api.acquire("payments", "worker-p", time.Minute, 0)
	b.waitFor("payments held", `document.querySelector('#locks tr[data-resource="payments"] td.holder')?.textContent === "worker-p"`)
	b.noProblems()
}

// TestDashboard_Reconnect stops the server under the page and starts it
// again on the same address and data: the page says it is offline, then
// reconnects with Last-Event-ID, is told by the new stream that events were
// lost, lists the locks again and goes on.
func TestDashboard_Reconnect(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	srv := start(t, dir, "--listen", addr)
	api := storyClient{t: t, url: srv.URL}
	tokenA := strconv.FormatUint(api.acquire("orders", "worker-a", time.Minute, 0), 10)

	b := newBrowser(t)
	b.open(srv.URL + "/ui/")
	b.waitFor("the stream live", `document.body.dataset.watch === "live"`)
	b.waitFor("orders listed", `document.querySelector('#locks tr[data-resource="orders"] td.token')?.textContent === "`+tokenA+`"`)
	// An event, so that the page has an ID to resume from.
	if code := api.do("POST", "/v1/locks/orders/renew", `{"token":`+tokenA+`}`, nil, nil); code != 200 {
		t.Fatalf("renew: %d", code)
	}
	b.waitFor("the renewal", `document.querySelector('#timeline tr[data-type="renewed"][data-resource="orders"]')`)

	srv.kill()
	b.waitFor("the stream down", `document.body.dataset.watch !== "live" && document.getElementById("status").classList.contains("error")`)

	srv = start(t, dir, "--listen", addr)
	api.url = srv.URL
	b.waitFor("the stream live again", `document.body.dataset.watch === "live"`)
	b.waitFor("the lost events said", `document.querySelector('#timeline tr[data-type="lost"]')`)
	tokenP := strconv.FormatUint(api.acquire("payments", "worker-p", time.Minute, 0), 10)
	b.waitFor("the grant of payments", `document.querySelector('#timeline tr[data-type="granted"][data-resource="payments"][data-token="`+tokenP+`"]')`)
	b.waitFor("both listed", `[...document.querySelectorAll("#locks tbody tr")].map((tr) => tr.dataset.resource + "=" + tr.dataset.token).join(" ") === "orders=`+tokenA+` payments=`+tokenP+`"`)
	b.waitFor("no error", `!document.getElementById("status").classList.contains("error")`)
	b.noProblems("net::ERR_") // the requests cut off or refused while the server was down
}

// waitWaiters waits until GET /v1/locks lists n waiters on resource.
func waitWaiters(t *testing.T, url, resource string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var list struct {
			Locks []struct {
				Resource string
				Waiters  int
			}
		}
		call(t, "GET", url+"/v1/locks?prefix="+resource, "", nil, &list)
		for _, l := range list.Locks {
			if l.Resource == resource && l.Waiters == n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no %d waiters: %+v", resource, n, list)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeScreenshot writes docs/img/dashboard.png: the page at 1280x800.
func writeScreenshot(t *testing.T, b *browser) {
	t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a countdown tick and a layout after the resize
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "docs", "img", "dashboard.png")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
}

// TestDashboard_Auth opens the dashboard with auth on, the browser sending a
// reader's token as the HTTP Basic password: the page shows the locks and
// the events of the resources the token may read, and no others.
func TestDashboard_Auth(t *testing.T) {
	dir := t.TempDir()
	authFile := writeAuthFile(t, dir, map[string]string{
		"viewer": "read:orders/",
		"worker": "lock:* write:*",
	})
	srv := start(t, filepath.Join(dir, "data"), "--auth-file", authFile)
	worker := storyClient{t: t, url: srv.URL, token: "worker-secret"}
	worker.acquire("payroll", "worker-p", time.Minute, 0)

	b := newBrowser(t)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("anyone:viewer-secret"))
	if _, err := chromedp.Call(b.ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
		Headers: network.Headers{"Authorization": basic},
	}); err != nil {
		t.Fatal(err)
	}
	b.open(srv.URL + "/ui/")
	b.waitFor("the stream live", `document.body.dataset.watch === "live"`)
	b.waitFor("the cluster", `document.getElementById("cluster-role").textContent === "leader"`)

	token := worker.acquire("orders%2F1", "worker-o", time.Minute, 0)
	worker.acquire("payroll-2", "worker-p", time.Minute, 0)
	tok := strconv.FormatUint(token, 10)
	b.waitFor("the grant of orders/1", `document.querySelector('#timeline tr[data-type="granted"][data-resource="orders/1"][data-token="`+tok+`"]')`)
	b.waitFor("orders/1 listed", `document.querySelector('#locks tr[data-resource="orders/1"] td.holder')?.textContent === "worker-o"`)
	b.waitFor("the fences of orders/1", `document.querySelector('#resources tr[data-resource="orders/1"] td.last-fence')?.textContent === "`+tok+`"`)
	// What the viewer may not read is not shown: the events come in one
	// order, so once the grant of orders/2, after payroll-2's, is shown,
	// payroll-2's would be too.
	token2 := strconv.FormatUint(worker.acquire("orders%2F2", "worker-o", time.Minute, 0), 10)
	b.waitFor("the grant of orders/2", `document.querySelector('#timeline tr[data-type="granted"][data-resource="orders/2"][data-token="`+token2+`"]')`)
	b.waitFor("orders/2 listed", `document.querySelector('#locks tr[data-resource="orders/2"]')`)
	if n := eval[int](b, `document.querySelectorAll('[data-resource^="payroll"]').length`); n != 0 {
		t.Errorf("the page shows %d rows of payroll, which the viewer may not read:\n%s", n, b.dump())
	}
	if hidden := eval[bool](b, `document.getElementById("login").hidden`); !hidden {
		t.Errorf("the page asks for a token although the browser sent one:\n%s", b.dump())
	}
	b.noProblems()
}

// TestDashboard_AuthURLCredentials opens the dashboard with the credentials
// in its URL, as a user types them (or as the browser's password prompt
// leaves them): the browser keeps them for /ui/ and what is under it, so the
// page moves to /ui, whose credentials also cover the API, and shows the
// data. After the token is rotated out of the auth file, the API answers
// 401 and the page asks for a token, and shows the data again once given
// the new one.
func TestDashboard_AuthURLCredentials(t *testing.T) {
	dir := t.TempDir()
	perms := map[string]string{"viewer": "read:*", "worker": "lock:*"}
	authFile := writeAuthFile(t, dir, perms)
	srv := start(t, filepath.Join(dir, "data"), "--auth-file", authFile)
	worker := storyClient{t: t, url: srv.URL, token: "worker-secret"}
	token := strconv.FormatUint(worker.acquire("orders%2F1", "worker-o", time.Minute, 0), 10)
	shown := `document.querySelector('#locks tr[data-resource="orders/1"] td.token')?.textContent === "` + token + `"`

	b := newBrowser(t)
	b.open(strings.Replace(srv.URL, "http://", "http://anyone:viewer-secret@", 1) + "/ui/?prefix=orders")
	b.waitFor("orders/1 listed", shown)
	b.waitFor("the page at /ui, its prefix kept", `location.pathname === "/ui" && document.getElementById("prefix").value === "orders"`)
	b.waitFor("the stream live", `document.body.dataset.watch === "live"`)
	if hidden := eval[bool](b, `document.getElementById("login").hidden`); !hidden {
		t.Errorf("the page asks for a token although the browser has one:\n%s", b.dump())
	}

	// Rotate the viewer's token: the browser's credentials are refused.
	delete(perms, "viewer")
	perms["viewer2"] = "read:*"
	writeAuthFile(t, dir, perms)
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for call(t, "GET", srv.URL+"/v1/cluster", "", map[string]string{"Authorization": "Bearer viewer-secret"}, nil) != 401 {
		if time.Now().After(deadline) {
			t.Fatal("the server did not reload its auth file")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Listing again (here: a narrower prefix) meets the 401.
	if err := chromedp.Do(b.ctx, chromedp.SendKeys(chromedp.ID("prefix"), "/")); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the token form", `!document.getElementById("login").hidden`)
	if err := chromedp.Do(b.ctx,
		chromedp.SendKeys(chromedp.ID("login-token"), "viewer2-secret"),
		chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)),
	); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the form gone", `document.getElementById("login").hidden`)
	b.waitFor("orders/1 listed", shown)
	b.waitFor("the stream live", `document.body.dataset.watch === "live"`)
	token2 := strconv.FormatUint(worker.acquire("orders%2F2", "worker-o", time.Minute, 0), 10)
	b.waitFor("the grant of orders/2", `document.querySelector('#timeline tr[data-type="granted"][data-resource="orders/2"][data-token="`+token2+`"]')`)
	b.waitFor("no error", `!document.getElementById("status").classList.contains("error")`)
	if search := eval[string](b, `location.search`); strings.Contains(search, "secret") {
		t.Errorf("the token is in the page's URL: %s", search)
	}
	b.noProblems("401")
}

// TestDashboard_Primitives shows the holds beyond one lease: a shared
// group with its holders, listed and then followed through its events
// (a holder joining, one leaving, the last), a permit on its slot, and a
// holder asked to let go.
func TestDashboard_Primitives(t *testing.T) {
	srv := start(t, t.TempDir())
	do := func(path, body string) {
		t.Helper()
		r := apiDo(t, "POST", srv.URL+path, []byte(body), nil)
		if r.status/100 != 2 {
			t.Fatalf("POST %s %s: %s", path, body, r)
		}
	}
	do("/v1/locks/catalog/acquire", `{"holder":"reader-1","ttl_ms":60000,"mode":"shared"}`)
	b := newBrowser(t)
	b.open(srv.URL + "/ui/")
	b.waitFor("the stream live", `document.body.dataset.watch === "live"`)
	b.waitFor("the listed group", `document.querySelector('#locks tr[data-resource="catalog"][data-shared="true"] td.holder')?.textContent === "shared: reader-1"`)
	do("/v1/locks/catalog/acquire", `{"holder":"reader-2","ttl_ms":60000,"mode":"shared"}`)
	b.waitFor("a second holder joining", `document.querySelector('#locks tr[data-resource="catalog"] td.holder')?.textContent === "shared: reader-1, reader-2"`)
	b.waitFor("the shared grant in the timeline", `[...document.querySelectorAll('#timeline tr[data-type="granted"][data-holder="reader-2"]')].some((tr) => tr.textContent.includes("shared hold granted to reader-2"))`)
	tok := apiAcquireShared(t, srv.URL, "catalog", "reader-3")
	do("/v1/locks/catalog/release", fmt.Sprintf(`{"token":%d,"holder":"reader-1"}`, tok))
	b.waitFor("a holder leaving", `document.querySelector('#locks tr[data-resource="catalog"] td.holder')?.textContent === "shared: reader-2, reader-3"`)
	for _, h := range []string{"reader-2", "reader-3"} {
		do("/v1/locks/catalog/release", fmt.Sprintf(`{"token":%d,"holder":%q}`, tok, h))
	}
	b.waitFor("the group gone with its last holder", `!document.querySelector('#locks tr[data-resource="catalog"]')`)

	do("/v1/locks/encoders/acquire", `{"holder":"enc-1","ttl_ms":60000,"limit":2}`)
	b.waitFor("the permit on its slot", `document.querySelector('#locks tr[data-resource="encoders/permit-1-of-2"] td.holder')?.textContent === "enc-1"`)
	do("/v1/locks/encoders%2Fpermit-1-of-2/revoke", `{"grace_ms":60000}`)
	b.waitFor("the holder asked to let go", `document.querySelector('#locks tr[data-resource="encoders/permit-1-of-2"]')?.dataset.revokeAt !== undefined &&
		[...document.querySelectorAll('#timeline tr[data-type="revoke_requested"]')].some((tr) => tr.textContent.includes("enc-1 asked to let go"))`)
	b.noProblems()
}

// apiAcquireShared takes a shared hold of res for holder and returns the
// group's token.
func apiAcquireShared(t *testing.T, url, res, holder string) uint64 {
	t.Helper()
	r := apiDo(t, "POST", url+"/v1/locks/"+res+"/acquire", fmt.Appendf(nil, `{"holder":%q,"ttl_ms":60000,"mode":"shared"}`, holder), nil)
	m := apiOK(t, r, map[string]any{"resource": res, "holder": holder, "token": apiPosInt, "ttl_ms": 60000,
		"expires_at": apiExpiresIn(time.Minute), "mode": "shared"})
	n, _ := apiUint(m["token"])
	return n
}
