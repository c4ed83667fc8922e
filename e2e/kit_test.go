package e2e

// Tests of the observability and deployment kit against the real server:
// the Grafana dashboard and the Prometheus alerting rules name only metrics
// that fence exports, the Docker image's entrypoint and health check work as
// the image runs them, and the systemd unit's environment file names only
// flags that fence serve has and its restart policy fits fence serve's exit
// codes.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v4"
)

// kitRoot is the repository's root, seen from this package's directory.
const kitRoot = ".."

// kitExposition is what a server's /metrics exports.
type kitExposition struct {
	types  map[string]string              // metric family -> its # TYPE
	series map[string][]map[string]string // sample name -> the label sets of its samples
}

var kitSample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\})? `)
var kitLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// kitScrape exercises a server so that every metric family has series (a
// grant, an accepted and a fenced write, a release, a watch stream), then
// reads its /metrics.
func kitScrape(t *testing.T) kitExposition {
	t.Helper()
	srv := start(t, t.TempDir())
	stream, err := http.Get(srv.URL + "/v1/watch")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	a := acquireLease(t, srv.URL, "kit", "A", 10000)
	put(t, srv.URL, "kit", "k", "v", a.Token, nil)
	if code := call(t, "POST", srv.URL+"/v1/locks/kit/release", fmt.Sprintf(`{"token":%d}`, a.Token), nil, nil); code != 200 {
		t.Fatalf("release: %d", code)
	}
	b := acquireLease(t, srv.URL, "kit", "B", 10000)
	put(t, srv.URL, "kit", "k", "v", a.Token, nil) // fenced
	call(t, "POST", srv.URL+"/v1/locks/kit/release", fmt.Sprintf(`{"token":%d}`, b.Token), nil, nil)

	var body []byte
	if code := call(t, "GET", srv.URL+"/metrics", "", nil, &body); code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	e := kitExposition{types: map[string]string{}, series: map[string][]map[string]string{}}
	for line := range bytes.Lines(body) {
		s := strings.TrimSpace(string(line))
		if f := strings.Fields(s); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			e.types[f[2]] = f[3]
			continue
		}
		if s == "" || s[0] == '#' {
			continue
		}
		m := kitSample.FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("/metrics: unparsable line %q", s)
		}
		labels := map[string]string{}
		for _, l := range kitLabel.FindAllStringSubmatch(m[3], -1) {
			labels[l[1]] = l[2]
		}
		e.series[m[1]] = append(e.series[m[1]], labels)
	}
	return e
}

// family returns the metric family of a name used in a query: the name if
// exported as it is, else without a histogram's or summary's suffix.
func (e kitExposition) family(name string) (string, bool) {
	if _, ok := e.types[name]; ok {
		return name, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		if typ := e.types[base]; typ == "histogram" || typ == "summary" && suffix != "_bucket" {
			return base, true
		}
	}
	if _, ok := e.series[name]; ok {
		return name, true
	}
	return "", false
}

var (
	kitString    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	kitGrouping  = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	kitMetric    = regexp.MustCompile(`(^|[^a-zA-Z0-9_:$])((fence|process|go)_[a-zA-Z0-9_:]*)`)
	kitSelector  = regexp.MustCompile(`\b(fence_[a-zA-Z0-9_:]*)\{([^}]*)\}`)
	kitEqMatcher = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"]*)"`)
)

// kitMetricNames returns the metric names a PromQL expression reads: the
// fence_, process_ and go_ identifiers outside strings and label lists.
func kitMetricNames(expr string) []string {
	s := kitString.ReplaceAllString(expr, `""`)
	s = kitGrouping.ReplaceAllString(s, "")
	var names []string
	for _, m := range kitMetric.FindAllStringSubmatch(s, -1) {
		names = append(names, m[2])
	}
	return names
}

// kitCheckExpr checks that every metric an expression reads is exported,
// and that its equality matchers on fence's own labels name label values the
// server exports (where it exports that label at all).
func kitCheckExpr(t *testing.T, e kitExposition, where, expr string) {
	t.Helper()
	if strings.Count(expr, "(") != strings.Count(expr, ")") || strings.Count(expr, "{") != strings.Count(expr, "}") ||
		strings.Count(expr, "[") != strings.Count(expr, "]") {
		t.Errorf("%s: unbalanced brackets in %q", where, expr)
	}
	names := kitMetricNames(expr)
	if len(names) == 0 && !strings.Contains(expr, "up{") && !strings.Contains(expr, "probe_success") {
		t.Errorf("%s: no metric in %q", where, expr)
	}
	for _, name := range names {
		if _, ok := e.family(name); !ok {
			t.Errorf("%s: %s is not exported by fence serve (expression %q)", where, name, expr)
		}
	}
	for _, m := range kitSelector.FindAllStringSubmatch(expr, -1) {
		name := m[1]
		for _, lm := range kitEqMatcher.FindAllStringSubmatch(m[2], -1) {
			label, value := lm[1], lm[2]
			if label == "job" || label == "instance" || label == "le" {
				continue
			}
			var values []string
			has := false
			for _, ls := range e.series[name] {
				if v, ok := ls[label]; ok {
					has = true
					values = append(values, v)
				}
			}
			if has && !slices.Contains(values, value) {
				t.Errorf("%s: %s{%s=%q}: the server exports %s only with %s in %q", where, name, label, value, name, label, values)
			}
		}
	}
}

// kitExprs returns every "expr" of a Grafana dashboard, and the queries of
// its template variables, with their panels' titles.
func kitExprs(v any, where string, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		if title, ok := v["title"].(string); ok {
			where = title
		}
		if name, ok := v["name"].(string); ok && v["type"] == "query" {
			where = "variable " + name
			if q, ok := v["definition"].(string); ok {
				out[q] = where
			}
		}
		if e, ok := v["expr"].(string); ok {
			out[e] = where
		}
		for _, c := range v {
			kitExprs(c, where, out)
		}
	case []any:
		for _, c := range v {
			kitExprs(c, where, out)
		}
	}
}

type kitRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func kitReadRules(t *testing.T) kitRules {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(kitRoot, "deploy", "prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var r kitRules
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("alerts.yaml is not Prometheus rule groups: %v", err)
	}
	return r
}

// TestKit_MetricNames checks the Grafana dashboard's and the alerting rules'
// expressions against the metrics of a real server.
func TestKit_MetricNames(t *testing.T) {
	e := kitScrape(t)
	for _, want := range []string{"fence_build_info", "fence_lock_wait_seconds", "fence_lock_hold_seconds"} {
		if _, ok := e.types[want]; !ok {
			t.Errorf("fence serve does not export %s, which the dashboard and the rules use", want)
		}
	}

	b, err := os.ReadFile(filepath.Join(kitRoot, "deploy", "grafana", "fence-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("fence-dashboard.json: %v", err)
	}
	if dash["uid"] == "" || dash["title"] == "" {
		t.Errorf("the dashboard has no uid or title")
	}
	exprs := map[string]string{}
	kitExprs(dash["panels"], "", exprs)
	kitExprs(dash["templating"], "", exprs)
	if len(exprs) < 20 {
		t.Fatalf("the dashboard has %d expressions; the walk found too few", len(exprs))
	}
	used := map[string]bool{}
	for expr, where := range exprs {
		kitCheckExpr(t, e, "dashboard: "+where, expr)
		for _, n := range kitMetricNames(expr) {
			if f, ok := e.family(n); ok {
				used[f] = true
			}
		}
	}
	ids := map[float64]bool{}
	for _, p := range dash["panels"].([]any) {
		id, _ := p.(map[string]any)["id"].(float64)
		if ids[id] {
			t.Errorf("dashboard: panel id %v used twice", id)
		}
		ids[id] = true
	}

	for _, g := range kitReadRules(t).Groups {
		for _, r := range g.Rules {
			kitCheckExpr(t, e, "alerts.yaml: "+r.Alert, r.Expr)
			for _, n := range kitMetricNames(r.Expr) {
				if f, ok := e.family(n); ok {
					used[f] = true
				}
			}
		}
	}
	// Say which of fence's families neither shows: a new metric wants a panel.
	var unused []string
	for f := range e.types {
		if strings.HasPrefix(f, "fence_") && !used[f] {
			unused = append(unused, f)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Logf("fence metrics in neither the dashboard nor the rules: %v", unused)
	}
}

// TestKit_AlertRules checks that alerts.yaml is Prometheus rule groups whose
// every rule is an alert with a for, a severity and a summary, and that
// promtool accepts it where promtool is installed.
func TestKit_AlertRules(t *testing.T) {
	r := kitReadRules(t)
	if len(r.Groups) == 0 {
		t.Fatal("no rule groups")
	}
	alerts := map[string]bool{}
	groups := map[string]bool{}
	for _, g := range r.Groups {
		if g.Name == "" || groups[g.Name] {
			t.Errorf("group name %q empty or repeated", g.Name)
		}
		groups[g.Name] = true
		if len(g.Rules) == 0 {
			t.Errorf("group %s has no rules", g.Name)
		}
		for _, rule := range g.Rules {
			switch {
			case rule.Alert == "":
				t.Errorf("group %s: a rule without alert (record %q)", g.Name, rule.Record)
				continue
			case alerts[rule.Alert]:
				t.Errorf("alert %s defined twice", rule.Alert)
			}
			alerts[rule.Alert] = true
			if strings.TrimSpace(rule.Expr) == "" {
				t.Errorf("%s: no expr", rule.Alert)
			}
			if d, err := time.ParseDuration(rule.For); err != nil || d < 0 {
				t.Errorf("%s: for %q is not a duration", rule.Alert, rule.For)
			}
			if s := rule.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("%s: labels.severity %q, want critical, warning or info", rule.Alert, s)
			}
			if rule.Annotations["summary"] == "" {
				t.Errorf("%s: no annotations.summary", rule.Alert)
			}
		}
	}
	for _, want := range []string{"FenceDown", "FenceNotReady", "FenceFencedWritesRising", "FenceLeasesExpiring",
		"FenceCommitLatencyHigh", "FenceWaitersPilingUp"} {
		if !alerts[want] {
			t.Errorf("no alert %s", want)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool is not installed: alerts.yaml's PromQL is not parsed")
		return
	}
	out, err := exec.Command(promtool, "check", "rules", filepath.Join(kitRoot, "deploy", "prometheus", "alerts.yaml")).CombinedOutput()
	if err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
}

// kitServeFlags returns the flags of fence serve, from its --help.
func kitServeFlags(t *testing.T) map[string]bool {
	t.Helper()
	out, _ := exec.Command(binary, "serve", "--help").CombinedOutput()
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  --?([a-z][a-z0-9-]*)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if !flags["listen"] || !flags["auth-file"] {
		t.Fatalf("fence serve --help lists no --listen or --auth-file:\n%s", out)
	}
	return flags
}

// kitEnvFlag returns the flag whose environment twin is name (FENCE_X_Y: x-y).
func kitEnvFlag(name string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, "FENCE_"), "_", "-"))
}

// TestKit_SystemdEnv checks the systemd unit's environment file and command
// line against fence serve: every variable, set or commented out, is the twin
// of a flag, and the unit starts and reloads as systemd runs it.
func TestKit_SystemdEnv(t *testing.T) {
	flags := kitServeFlags(t)
	b, err := os.ReadFile(filepath.Join(kitRoot, "deploy", "systemd", "fence.env"))
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(#?)(FENCE_[A-Z0-9_]+)=(.*)$`).FindAllStringSubmatch(string(b), -1) {
		if !flags[kitEnvFlag(m[2])] {
			t.Errorf("fence.env: %s is the twin of no flag of fence serve", m[2])
		}
		if m[1] == "" {
			set[m[2]] = m[3]
		}
	}
	unit, err := os.ReadFile(filepath.Join(kitRoot, "deploy", "systemd", "fence.service"))
	if err != nil {
		t.Fatal(err)
	}
	start := regexp.MustCompile(`(?m)^ExecStart=/usr/local/bin/fence (.*)$`).FindStringSubmatch(string(unit))
	if start == nil {
		t.Fatal("fence.service: no ExecStart=/usr/local/bin/fence ...")
	}
	args := strings.Fields(start[1])
	for _, a := range args {
		if f, ok := strings.CutPrefix(a, "--"); ok && !flags[strings.SplitN(f, "=", 2)[0]] {
			t.Errorf("fence.service: ExecStart passes %s, which fence serve does not have", a)
		}
	}

	// Run the unit's command line with the file's settings and an auth
	// file, on a loopback port of its own and a data directory of the test.
	for k, v := range set {
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	t.Setenv("FENCE_AUTH_FILE", writeAuthFile(t, dir, map[string]string{"ops": "admin:*"}))
	srv := startServer(t, filepath.Join(dir, "data"), true)
	// systemctl reload: SIGHUP rereads the auth file, and the server goes on.
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(srv.logs.String(), `"msg":"auth file reloaded"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no reload after SIGHUP:\n%s", srv.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := call(t, "GET", srv.URL+"/readyz", "", nil, nil); code != 200 {
		t.Fatalf("/readyz after the reload: %d", code)
	}
	// systemctl stop: SIGTERM, exit 0.
	srv.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-srv.exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("no exit after SIGTERM:\n%s", srv.logs)
	}
	if code := srv.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0:\n%s", code, srv.logs)
	}
}

// TestKit_SystemdRestart checks the unit's restart policy against fence
// serve's exit codes: a configuration that cannot work exits with a code
// the unit does not restart, a store it cannot open with one it does.
func TestKit_SystemdRestart(t *testing.T) {
	unit, err := os.ReadFile(filepath.Join(kitRoot, "deploy", "systemd", "fence.service"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^RestartPreventExitStatus=(.*)$`).FindStringSubmatch(string(unit))
	if m == nil {
		t.Fatal("fence.service: no RestartPreventExitStatus: a server refused for its configuration is restarted forever")
	}
	prevent := map[int]bool{}
	for _, f := range strings.Fields(m[1]) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("fence.service: RestartPreventExitStatus=%s: %v", m[1], err)
		}
		prevent[n] = true
	}
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		args    []string
		restart bool
	}{
		{"a missing auth file", []string{"--auth-file", filepath.Join(dir, "missing")}, false},
		{"a bad flag value", []string{"--lock-delay", "soon"}, false},
		{"a store it cannot open", []string{"--data", filepath.Join(blocker, "data")}, true},
	} {
		cmd := exec.Command(binary, append([]string{"serve", "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "data")}, c.args...)...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("%s: %v, want a failed exit:\n%s", c.name, err, out)
		}
		if code := exit.ExitCode(); prevent[code] == c.restart {
			t.Errorf("%s: exit %d, restarted by the unit: %v, want %v:\n%s", c.name, code, !prevent[code], c.restart, out)
		}
	}
}

// kitDockerfile returns the Dockerfile's instructions of its last stage
// (the image): instruction -> arguments, the last of each.
func kitDockerfile(t *testing.T) (last map[string]string, env map[string]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(kitRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	last, env = map[string]string{}, map[string]string{}
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || cur.Len() == 0 && line == "" {
			continue
		}
		if s, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		cur.Reset()
		cmd = strings.ToUpper(cmd)
		if cmd == "FROM" {
			last, env = map[string]string{}, map[string]string{}
			continue
		}
		last[cmd] = strings.TrimSpace(args)
		if cmd == "ENV" {
			for _, kv := range strings.Fields(args) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
		}
	}
	return last, env
}

// TestKit_DockerImage runs the image's entrypoint and health check with the
// built binary: the image's settings with an auth file where the image
// expects one, on loopback instead of 0.0.0.0, and the HEALTHCHECK command
// against it.
func TestKit_DockerImage(t *testing.T) {
	flags := kitServeFlags(t)
	last, env := kitDockerfile(t)
	var entry []string
	if err := json.Unmarshal([]byte(last["ENTRYPOINT"]), &entry); err != nil || len(entry) < 2 || entry[1] != "serve" {
		t.Fatalf("ENTRYPOINT %q: want [\"/usr/local/bin/fence\", \"serve\", ...]", last["ENTRYPOINT"])
	}
	for k := range env {
		if strings.HasPrefix(k, "FENCE_") && !flags[kitEnvFlag(k)] {
			t.Errorf("Dockerfile: ENV %s is the twin of no flag of fence serve", k)
		}
	}
	if env["FENCE_AUTH_FILE"] == "" {
		t.Fatal("the image sets no FENCE_AUTH_FILE, and listens beyond loopback")
	}
	// The entrypoint's flags, but on loopback and in a directory of the test.
	dir := t.TempDir()
	var args []string
	for i := 2; i < len(entry); i++ {
		switch entry[i] {
		case "--listen", "--data":
			i++
		default:
			args = append(args, entry[i])
		}
	}
	t.Setenv("FENCE_AUTH_FILE", writeAuthFile(t, dir, map[string]string{"app": "lock:* write:* read:*"}))
	srv := start(t, filepath.Join(dir, "data"), args...)
	if !strings.Contains(srv.logs.String(), `"auth":"on"`) {
		t.Fatalf("the server did not load the auth file:\n%s", srv.logs)
	}
	if code := call(t, "POST", srv.URL+"/v1/locks/r/acquire", `{"holder":"x"}`, nil, nil); code != 401 {
		t.Fatalf("acquire without a token: %d, want 401", code)
	}

	_, hcCmd, ok := strings.Cut(last["HEALTHCHECK"], "CMD ")
	var hc []string
	if !ok || json.Unmarshal([]byte(hcCmd), &hc) != nil || len(hc) < 2 {
		t.Fatalf("HEALTHCHECK %q: want CMD in exec form", last["HEALTHCHECK"])
	}
	hcArgs := slices.Clone(hc[1:])
	if i := slices.Index(hcArgs, "--addr"); i >= 0 && i+1 < len(hcArgs) {
		hcArgs[i+1] = srv.URL
	} else {
		hcArgs = append(hcArgs, "--addr", srv.URL)
	}
	out, err := exec.Command(binary, hcArgs...).CombinedOutput()
	if first, _, _ := strings.Cut(string(out), "\n"); strings.Contains(first, "unknown command") {
		t.Fatalf("the image's HEALTHCHECK runs fence %s, a command this fence does not have: %s", strings.Join(hc[1:], " "), first)
	}
	if err != nil {
		t.Fatalf("HEALTHCHECK fence %s against a ready server: %v\n%s", strings.Join(hcArgs, " "), err, out)
	}
	// And it fails once the server is gone.
	srv.kill()
	if out, err := exec.Command(binary, hcArgs...).CombinedOutput(); err == nil {
		t.Fatalf("HEALTHCHECK fence %s succeeded with the server stopped:\n%s", strings.Join(hcArgs, " "), out)
	}
}
