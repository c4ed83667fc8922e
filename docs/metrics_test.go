package docs_test

// TestMetricsReference holds reference/metrics.md to what a running server
// exports: it starts the fence binary, makes it count a little (an acquire,
// a write, a rejected write, a release), scrapes /metrics, and compares the
// fence_* families, their types and their labels with the table.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// metricDoc is a row of the table of reference/metrics.md.
type metricDoc struct {
	typ    string
	labels []string
}

var (
	metricRow = regexp.MustCompile("^\\| `(fence_[a-z0-9_]+)` \\| ([a-z]+) \\| ([^|]*) \\|")
	labelName = regexp.MustCompile("`([a-z_][a-z0-9_]*)`")
)

// documentedMetrics reads the table of reference/metrics.md.
func documentedMetrics(t *testing.T) map[string]metricDoc {
	t.Helper()
	b, err := os.ReadFile("reference/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]metricDoc{}
	for _, l := range strings.Split(string(b), "\n") {
		m := metricRow.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var labels []string
		for _, lm := range labelName.FindAllStringSubmatch(m[3], -1) {
			labels = append(labels, lm[1])
		}
		sort.Strings(labels)
		if _, dup := docs[m[1]]; dup {
			t.Errorf("reference/metrics.md lists %s twice", m[1])
		}
		docs[m[1]] = metricDoc{typ: m[2], labels: labels}
	}
	if len(docs) == 0 {
		t.Fatal("reference/metrics.md has no table of fence_* metrics")
	}
	return docs
}

// scrapedMetric is a metric family of the Prometheus text format.
type scrapedMetric struct {
	typ     string
	labels  map[string]bool
	samples int
}

// parseExposition reads the fence_* families of a Prometheus text
// exposition: their types from "# TYPE" lines, their label names from the
// samples (without a histogram's "le").
func parseExposition(t *testing.T, text string) map[string]*scrapedMetric {
	t.Helper()
	families := map[string]*scrapedMetric{}
	for _, l := range strings.Split(text, "\n") {
		if f, ok := strings.CutPrefix(l, "# TYPE "); ok {
			name, typ, _ := strings.Cut(f, " ")
			if strings.HasPrefix(name, "fence_") {
				families[name] = &scrapedMetric{typ: typ, labels: map[string]bool{}}
			}
			continue
		}
		if l == "" || strings.HasPrefix(l, "#") || !strings.HasPrefix(l, "fence_") {
			continue
		}
		name, labels, err := parseSample(l)
		if err != nil {
			t.Fatalf("/metrics: %v: %q", err, l)
		}
		fam := families[name]
		if fam == nil {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && families[base] != nil {
					fam = families[base]
				}
			}
		}
		if fam == nil {
			t.Fatalf("/metrics: a sample of %s without a # TYPE line", name)
		}
		fam.samples++
		for _, n := range labels {
			if n != "le" {
				fam.labels[n] = true
			}
		}
	}
	return families
}

// parseSample returns the name and the label names of a sample line:
// name{label="value",...} value.
func parseSample(l string) (string, []string, error) {
	i := strings.IndexAny(l, "{ ")
	if i < 0 {
		return "", nil, fmt.Errorf("no value")
	}
	name := l[:i]
	if l[i] == ' ' {
		return name, nil, nil
	}
	var labels []string
	rest := l[i+1:]
	for {
		if strings.HasPrefix(rest, "}") {
			return name, labels, nil
		}
		eq := strings.Index(rest, `="`)
		if eq < 0 {
			return "", nil, fmt.Errorf("bad labels")
		}
		labels = append(labels, rest[:eq])
		rest = rest[eq+2:]
		j := 0
		for ; j < len(rest) && rest[j] != '"'; j++ {
			if rest[j] == '\\' {
				j++
			}
		}
		if j >= len(rest) {
			return "", nil, fmt.Errorf("unterminated label value")
		}
		rest = strings.TrimPrefix(rest[j+1:], ",")
	}
}

// startServer runs fence serve on a free loopback port with its data in a
// temporary directory and returns its base URL; the server is stopped at the
// end of the test.
func startServer(t *testing.T, bin string) string {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data", t.TempDir())
	cmd.Env = cleanEnv()
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Read stderr to its end, so that the server never blocks on its logs.
	var rest strings.Builder
	addrC := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		// fence starting, then fence serving.
		for sent := false; sc.Scan(); {
			if !sent {
				var line struct{ Msg, Addr string }
				switch {
				case json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "fence serving":
					addrC <- line.Addr
					sent = true
				case line.Msg != "fence starting":
					addrC <- ""
					sent = true
				}
			}
			rest.WriteString(sc.Text() + "\n")
		}
		io.Copy(io.Discard, pr)
	}()
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		exited <- err
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		<-scanned
	})
	select {
	case addr := <-addrC:
		if addr != "" {
			return "http://" + addr
		}
	case err := <-exited:
		exited <- err // for the cleanup
	case <-time.After(30 * time.Second):
	}
	cmd.Process.Kill()
	err := <-exited
	exited <- err
	<-scanned
	t.Fatalf("fence serve did not start with a \"fence serving\" line on stderr (%v):\n%s", err, rest.String())
	return ""
}

// call sends one request and returns the status and the body.
func call(t *testing.T, method, url, body string, header ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestMetricsReference fails when a fence_* metric that the server exports
// is missing from reference/metrics.md, or the table names one that it does
// not export, or they disagree on its type or labels.
func TestMetricsReference(t *testing.T) {
	base := startServer(t, fenceBinary(t))

	// An acquire, a write with its token, a write without one (so that the
	// rejection counters have a series), a release.
	status, body := call(t, "POST", base+"/v1/locks/docs-metrics/acquire", `{"holder":"docs","ttl_ms":10000}`)
	if status != http.StatusOK {
		t.Fatalf("acquire: %d %s", status, body)
	}
	var lease struct{ Token uint64 }
	if err := json.Unmarshal([]byte(body), &lease); err != nil || lease.Token == 0 {
		t.Fatalf("acquire: %s: %v", body, err)
	}
	token := fmt.Sprint(lease.Token)
	if status, body := call(t, "PUT", base+"/v1/kv/docs-metrics/k", "v", "Fencing-Token", token); status != http.StatusOK {
		t.Fatalf("put: %d %s", status, body)
	}
	if status, body := call(t, "PUT", base+"/v1/kv/docs-metrics/k", "v"); status != http.StatusPreconditionRequired {
		t.Fatalf("put without a token: %d %s, want 428", status, body)
	}
	if status, body := call(t, "POST", base+"/v1/locks/docs-metrics/release", `{"token":`+token+`}`); status != http.StatusOK {
		t.Fatalf("release: %d %s", status, body)
	}
	status, text := call(t, "GET", base+"/metrics", "")
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", status, text)
	}

	scraped := parseExposition(t, text)
	documented := documentedMetrics(t)
	var names []string
	for name := range scraped {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := scraped[name]
		d, ok := documented[name]
		if !ok {
			t.Errorf("the server exports %s (%s), which reference/metrics.md does not list", name, s.typ)
			continue
		}
		if d.typ != s.typ {
			t.Errorf("%s: type %s in reference/metrics.md, %s on /metrics", name, d.typ, s.typ)
		}
		var labels []string
		for l := range s.labels {
			labels = append(labels, l)
		}
		sort.Strings(labels)
		if s.samples > 0 && !slices.Equal(labels, d.labels) {
			t.Errorf("%s: labels %v in reference/metrics.md, %v on /metrics", name, d.labels, labels)
		}
	}
	for name := range documented {
		if scraped[name] == nil {
			t.Errorf("reference/metrics.md lists %s, which the server does not export", name)
		}
	}
}
