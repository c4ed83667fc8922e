package fence_test

// Tests of the packaging: the Dockerfile, the systemd unit, the GoReleaser
// configuration and what they name in the module. The e2e package runs the
// built binary the way they do (e2e/kit_test.go).

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"
)

const buildinfoPkg = "github.com/fence-lock/fence/internal/support/buildinfo"

// buildinfoVars returns the package-level string variables of
// internal/support/buildinfo, which release builds set with -ldflags -X.
func buildinfoVars(t *testing.T) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join("internal", "support", "buildinfo", "buildinfo.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]bool{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, name := range vs.Names {
				isString := false
				if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "string" {
					isString = true
				}
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						isString = true
					}
				}
				if isString && name.IsExported() {
					vars[name.Name] = true
				}
			}
		}
	}
	for _, want := range []string{"Version", "Commit", "Date"} {
		if !vars[want] {
			t.Fatalf("internal/support/buildinfo has no string variable %s (found %v)", want, vars)
		}
	}
	return vars
}

var xFlag = regexp.MustCompile(`-X[= ]([^\s"'=]+)\.([A-Za-z_][A-Za-z0-9_]*)=`)

// checkLdflags checks that ldflags set every variable of internal/support/buildinfo
// and only variables that exist there.
func checkLdflags(t *testing.T, where, ldflags string, vars map[string]bool) {
	t.Helper()
	set := map[string]bool{}
	for _, m := range xFlag.FindAllStringSubmatch(ldflags, -1) {
		if m[1] != buildinfoPkg {
			t.Errorf("%s: -X %s.%s: not in %s", where, m[1], m[2], buildinfoPkg)
			continue
		}
		if !vars[m[2]] {
			t.Errorf("%s: -X sets %s.%s, which internal/support/buildinfo does not declare", where, m[1], m[2])
		}
		set[m[2]] = true
	}
	for v := range vars {
		if !set[v] {
			t.Errorf("%s: the ldflags do not set %s.%s", where, buildinfoPkg, v)
		}
	}
}

func TestGoReleaserConfig(t *testing.T) {
	b, err := os.ReadFile(".goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Version     int    `yaml:"version"`
		ProjectName string `yaml:"project_name"`
		Builds      []struct {
			ID      string   `yaml:"id"`
			Main    string   `yaml:"main"`
			Binary  string   `yaml:"binary"`
			Env     []string `yaml:"env"`
			Goos    []string `yaml:"goos"`
			Goarch  []string `yaml:"goarch"`
			Flags   []string `yaml:"flags"`
			Ldflags []string `yaml:"ldflags"`
		} `yaml:"builds"`
		Archives []struct {
			IDs   []string `yaml:"ids"`
			Files []string `yaml:"files"`
		} `yaml:"archives"`
		NFPMs []struct {
			IDs      []string `yaml:"ids"`
			Bindir   string   `yaml:"bindir"`
			Contents []struct {
				Src  string `yaml:"src"`
				Dst  string `yaml:"dst"`
				Type string `yaml:"type"`
			} `yaml:"contents"`
		} `yaml:"nfpms"`
		Checksum struct {
			NameTemplate string `yaml:"name_template"`
		} `yaml:"checksum"`
		Changelog map[string]any `yaml:"changelog"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	if cfg.Version != 2 {
		t.Errorf("version: %d, want 2", cfg.Version)
	}
	if len(cfg.Builds) == 0 {
		t.Fatal("no builds")
	}
	vars := buildinfoVars(t)
	ids := map[string]bool{}
	for _, bd := range cfg.Builds {
		ids[bd.ID] = true
		if bd.Main != "./cmd/fence" {
			t.Errorf("build %s: main %q, want ./cmd/fence", bd.ID, bd.Main)
		}
		if bd.Binary != "fence" {
			t.Errorf("build %s: binary %q, want fence", bd.ID, bd.Binary)
		}
		if !slices.Contains(bd.Env, "CGO_ENABLED=0") {
			t.Errorf("build %s: env %v lacks CGO_ENABLED=0", bd.ID, bd.Env)
		}
		if !slices.Contains(bd.Flags, "-trimpath") {
			t.Errorf("build %s: flags %v lack -trimpath", bd.ID, bd.Flags)
		}
		for _, want := range []string{"linux", "darwin"} {
			if !slices.Contains(bd.Goos, want) {
				t.Errorf("build %s: goos %v lacks %s", bd.ID, bd.Goos, want)
			}
		}
		for _, want := range []string{"amd64", "arm64"} {
			if !slices.Contains(bd.Goarch, want) {
				t.Errorf("build %s: goarch %v lacks %s", bd.ID, bd.Goarch, want)
			}
		}
		checkLdflags(t, "build "+bd.ID, strings.Join(bd.Ldflags, " "), vars)
	}
	if _, err := os.Stat(filepath.Join("cmd", "fence", "main.go")); err != nil {
		t.Errorf("main ./cmd/fence: %v", err)
	}
	if len(cfg.Archives) == 0 {
		t.Error("no archives")
	}
	for _, a := range cfg.Archives {
		for _, id := range a.IDs {
			if !ids[id] {
				t.Errorf("archive of build %q, which is not a build id", id)
			}
		}
		for _, want := range []string{"LICENSE", "README.md", "CHANGELOG.md"} {
			if !slices.Contains(a.Files, want) {
				t.Errorf("archive files %v lack %s", a.Files, want)
			}
		}
		for _, f := range a.Files {
			mustMatchFiles(t, "archive file", f)
		}
	}
	for _, n := range cfg.NFPMs {
		for _, id := range n.IDs {
			if !ids[id] {
				t.Errorf("nfpm of build %q, which is not a build id", id)
			}
		}
		unit := false
		for _, c := range n.Contents {
			if c.Type == "symlink" || c.Type == "dir" || c.Type == "ghost" {
				continue
			}
			mustMatchFiles(t, "nfpm content", c.Src)
			unit = unit || c.Dst == "/usr/lib/systemd/system/fence.service"
		}
		if !unit {
			t.Error("the packages do not install deploy/systemd/fence.service")
		}
		if n.Bindir != "/usr/bin" {
			continue
		}
		// The packages put fence in /usr/bin: their drop-in must run that.
		drop, err := os.ReadFile(filepath.Join("deploy", "systemd", "package.conf"))
		if err != nil {
			t.Fatal(err)
		}
		unitStart := unitValues(t, readUnit(t, filepath.Join("deploy", "systemd", "fence.service")), "Service", "ExecStart")
		dropStart := unitValues(t, parseUnit(t, "package.conf", string(drop)), "Service", "ExecStart")
		want := []string{"", strings.Replace(unitStart[0], "/usr/local/bin/fence ", "/usr/bin/fence ", 1)}
		if !slices.Equal(dropStart, want) {
			t.Errorf("deploy/systemd/package.conf: ExecStart %q, want %q (fence.service's, from /usr/bin)", dropStart, want)
		}
	}
	if cfg.Checksum.NameTemplate == "" {
		t.Error("no checksum section")
	}
	if cfg.Changelog == nil {
		t.Error("no changelog section")
	}
}

// mustMatchFiles fails unless the glob pattern names at least one file.
func mustMatchFiles(t *testing.T, what, pattern string) {
	t.Helper()
	m, err := filepath.Glob(filepath.FromSlash(pattern))
	if err != nil || len(m) == 0 {
		t.Errorf("%s %q: no such file", what, pattern)
	}
}

// dockerInstruction is one instruction of a Dockerfile.
type dockerInstruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
}

// parseDockerfile returns the instructions of a Dockerfile, with line
// continuations joined and comments dropped.
func parseDockerfile(t *testing.T, text string) []dockerInstruction {
	t.Helper()
	var out []dockerInstruction
	var cur strings.Builder
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if cur.Len() == 0 && trimmed == "" {
			continue
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur.WriteString(strings.TrimSuffix(trimmed, `\`) + " ")
			continue
		}
		cur.WriteString(trimmed)
		full := strings.TrimSpace(cur.String())
		cur.Reset()
		cmd, args, _ := strings.Cut(full, " ")
		out = append(out, dockerInstruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
	}
	if cur.Len() > 0 {
		t.Fatalf("Dockerfile ends in a line continuation")
	}
	return out
}

func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	ins := parseDockerfile(t, string(b))
	args := map[string]string{} // ARGs before the first FROM
	type stage struct {
		from, name string
		ins        []dockerInstruction
	}
	var stages []*stage
	for _, in := range ins {
		switch {
		case in.cmd == "ARG" && len(stages) == 0:
			k, v, _ := strings.Cut(in.args, "=")
			args[k] = v
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				f = f[1:]
			}
			if len(f) == 0 {
				t.Fatalf("FROM %s: no image", in.args)
			}
			s := &stage{from: os.Expand(f[0], func(k string) string { return args[k] })}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
		case len(stages) == 0:
			t.Fatalf("%s before the first FROM", in.cmd)
		default:
			stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a builder and the image", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	if !strings.HasPrefix(build.from, "golang:1.26") {
		t.Errorf("builder FROM %s, want golang:1.26", build.from)
	}
	if final.from != "gcr.io/distroless/static-debian12:nonroot" {
		t.Errorf("image FROM %s, want gcr.io/distroless/static-debian12:nonroot", final.from)
	}
	var buildRuns []string
	for _, in := range build.ins {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			buildRuns = append(buildRuns, in.args)
		}
	}
	if len(buildRuns) != 1 {
		t.Fatalf("the builder has %d RUN go build, want 1", len(buildRuns))
	}
	run := buildRuns[0]
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "./cmd/fence"} {
		if !strings.Contains(run, want) {
			t.Errorf("RUN go build lacks %s: %s", want, run)
		}
	}
	checkLdflags(t, "Dockerfile", run, buildinfoVars(t))

	last := map[string]string{} // the last of each instruction in the image
	var copies []string
	for _, in := range final.ins {
		last[in.cmd] = in.args
		if in.cmd == "COPY" {
			copies = append(copies, in.args)
		}
	}
	if last["USER"] != "nonroot" && last["USER"] != "65532" && last["USER"] != "nonroot:nonroot" {
		t.Errorf("USER %q, want nonroot", last["USER"])
	}
	if !strings.Contains(last["VOLUME"], "/var/lib/fence") {
		t.Errorf("VOLUME %q, want /var/lib/fence", last["VOLUME"])
	}
	if last["EXPOSE"] != "7700" {
		t.Errorf("EXPOSE %q, want 7700", last["EXPOSE"])
	}
	// The volume's mount point must exist, owned by nonroot, or a fresh named
	// volume is root's and fence cannot write it.
	if !slices.ContainsFunc(copies, func(c string) bool {
		return strings.Contains(c, "--chown=65532") && strings.HasSuffix(c, " /var/lib/fence")
	}) {
		t.Errorf("no COPY --chown=65532:65532 ... /var/lib/fence among %q", copies)
	}
	hc := last["HEALTHCHECK"]
	_, hcCmd, ok := strings.Cut(hc, "CMD ")
	var hcArgs []string
	if !ok || json.Unmarshal([]byte(hcCmd), &hcArgs) != nil || len(hcArgs) < 2 {
		t.Errorf("HEALTHCHECK %q: want CMD in exec form (distroless has no shell)", hc)
	} else if hcArgs[0] != "/usr/local/bin/fence" {
		t.Errorf("HEALTHCHECK runs %s, want /usr/local/bin/fence", hcArgs[0])
	}
	var entry []string
	if err := json.Unmarshal([]byte(last["ENTRYPOINT"]), &entry); err != nil {
		t.Fatalf("ENTRYPOINT %q: want exec form: %v", last["ENTRYPOINT"], err)
	}
	want := []string{"/usr/local/bin/fence", "serve", "--listen", "0.0.0.0:7700", "--data", "/var/lib/fence"}
	if !slices.Equal(entry, want) {
		t.Errorf("ENTRYPOINT %q, want %q", entry, want)
	}
	// A non-loopback --listen needs an auth file (or --insecure-listen).
	if !regexp.MustCompile(`(^|\s)FENCE_AUTH_FILE=/\S+`).MatchString(strings.Join(envOf(final.ins), " ")) {
		t.Errorf("the image listens on 0.0.0.0 but sets no FENCE_AUTH_FILE: fence serve would refuse to start")
	}
	if !slices.ContainsFunc(copies, func(c string) bool { return strings.HasPrefix(c, "LICENSE ") }) {
		t.Errorf("the image does not carry LICENSE")
	}
}

// envOf returns the KEY=VALUE pairs of the ENV instructions.
func envOf(ins []dockerInstruction) []string {
	var out []string
	for _, in := range ins {
		if in.cmd == "ENV" {
			out = append(out, strings.Fields(in.args)...)
		}
	}
	return out
}

// TestDockerignore checks that the build context keeps what go build
// ./cmd/fence needs: every directory with Go source, the embedded files, and
// the files the image copies.
func TestDockerignore(t *testing.T) {
	b, err := os.ReadFile(".dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []*regexp.Regexp
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "!") {
			t.Fatalf(".dockerignore: exceptions (%s) are not handled by this test", line)
		}
		patterns = append(patterns, globRegexp(strings.Trim(filepath.ToSlash(filepath.Clean(line)), "/")))
	}
	ignored := func(p string) bool {
		for dir := p; dir != "." && dir != "/"; dir = filepath.ToSlash(filepath.Dir(dir)) {
			for _, re := range patterns {
				if re.MatchString(dir) {
					return true
				}
			}
		}
		return false
	}
	need := []string{"go.mod", "go.sum", "LICENSE", "docs/openapi.json", "ui/static/index.html"}
	err = filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			need = append(need, filepath.ToSlash(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range need {
		if ignored(p) {
			t.Errorf(".dockerignore leaves %s out of the build context", p)
		}
	}
	for _, p := range []string{".git/HEAD", "fence-data/journal", "clients/typescript/node_modules/x", "x.test"} {
		if !ignored(p) {
			t.Errorf(".dockerignore keeps %s in the build context", p)
		}
	}
}

// globRegexp turns a .dockerignore pattern into a regexp of the whole path.
func globRegexp(p string) *regexp.Regexp {
	var sb strings.Builder
	sb.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case strings.HasPrefix(p[i:], "**/"):
			sb.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			sb.WriteString(".*")
			i++
		case c == '*':
			sb.WriteString("[^/]*")
		case c == '?':
			sb.WriteString("[^/]")
		default:
			sb.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	sb.WriteString("$")
	return regexp.MustCompile(sb.String())
}

// unit is a parsed systemd unit file: section -> key -> values in order.
type unit map[string]map[string][]string

func readUnit(t *testing.T, file string) unit {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return parseUnit(t, file, string(b))
}

func parseUnit(t *testing.T, name, text string) unit {
	t.Helper()
	u := unit{}
	section := ""
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			t.Fatalf("%s:%d: %q is not KEY=VALUE in a section", name, i+1, line)
		}
		k = strings.TrimSpace(k)
		u[section][k] = append(u[section][k], strings.TrimSpace(v))
	}
	return u
}

func unitValues(t *testing.T, u unit, section, key string) []string {
	t.Helper()
	v := u[section][key]
	if len(v) == 0 {
		t.Fatalf("[%s] has no %s", section, key)
	}
	return v
}

func TestSystemdUnit(t *testing.T) {
	file := filepath.Join("deploy", "systemd", "fence.service")
	u := readUnit(t, file)
	svc := u["Service"]
	one := func(key string) string {
		v := svc[key]
		if len(v) == 0 {
			t.Errorf("[Service] lacks %s", key)
			return ""
		}
		return v[len(v)-1]
	}
	start := strings.Fields(one("ExecStart"))
	if len(start) < 2 || start[0] != "/usr/local/bin/fence" || start[1] != "serve" {
		t.Errorf("ExecStart %q: want /usr/local/bin/fence serve ...", start)
	}
	if i := slices.Index(start, "--data"); i < 0 || i+1 >= len(start) || start[i+1] != "/var/lib/fence" {
		t.Errorf("ExecStart %q: want --data /var/lib/fence (the StateDirectory)", start)
	}
	if r := one("ExecReload"); !strings.Contains(r, "kill -HUP $MAINPID") {
		t.Errorf("ExecReload %q: want kill -HUP $MAINPID (SIGHUP reloads --auth-file)", r)
	}
	want := map[string]string{
		"Type":                    "simple",
		"Restart":                 "on-failure",
		"StateDirectory":          "fence",
		"UMask":                   "0077",
		"NoNewPrivileges":         "yes",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"PrivateDevices":          "yes",
		"ProtectKernelTunables":   "yes",
		"ProtectKernelModules":    "yes",
		"ProtectKernelLogs":       "yes",
		"ProtectControlGroups":    "yes",
		"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"CapabilityBoundingSet":   "",
		"LockPersonality":         "yes",
		"MemoryDenyWriteExecute":  "yes",
		"RestrictNamespaces":      "yes",
		"RestrictRealtime":        "yes",
		"RestrictSUIDSGID":        "yes",
	}
	for k, v := range want {
		if got := one(k); got != v {
			t.Errorf("%s=%s, want %s=%s", k, got, k, v)
		}
	}
	if !slices.Contains(svc["SystemCallFilter"], "@system-service") {
		t.Errorf("SystemCallFilter %q lacks @system-service", svc["SystemCallFilter"])
	}
	if one("LimitNOFILE") == "" {
		t.Error("LimitNOFILE is empty")
	}
	if one("DynamicUser") != "yes" && one("User") == "" {
		t.Error("neither DynamicUser=yes nor a User")
	}
	if env := one("EnvironmentFile"); strings.TrimPrefix(env, "-") != "/etc/fence/fence.env" {
		t.Errorf("EnvironmentFile=%s, want /etc/fence/fence.env", env)
	}
	if _, err := os.Stat(filepath.Join("deploy", "systemd", "fence.env")); err != nil {
		t.Error(err)
	}
	if !slices.Contains(u["Install"]["WantedBy"], "multi-user.target") {
		t.Errorf("[Install] WantedBy %q, want multi-user.target", u["Install"]["WantedBy"])
	}
}

// TestSystemdAnalyze runs systemd-analyze verify on the unit, and checks
// that systemd-analyze security rates its exposure 2.0 or lower. The unit's
// /usr/local/bin/fence is replaced by an executable that exists here (verify
// checks that it does).
func TestSystemdAnalyze(t *testing.T) {
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	b, err := os.ReadFile(filepath.Join("deploy", "systemd", "fence.service"))
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "fence.service")
	text := strings.ReplaceAll(string(b), "/usr/local/bin/fence", self)
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(tool, "verify", "--man=no", file)
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if err != nil || out.Len() > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out.String())
	}

	out.Reset()
	cmd = exec.Command(tool, "security", "--offline=yes", "--threshold=20", file)
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if strings.Contains(out.String(), "unrecognized option") {
		t.Logf("this systemd-analyze has no offline security check:\n%s", out.String())
		return
	}
	if err != nil {
		t.Errorf("systemd-analyze security: exposure above 2.0 (%v):\n%s", err, out.String())
	}
}

// TestNoEmbeddedEtcd keeps etcd's server out of the module: the tests that
// need etcd run it as a process of its own (internal/tools/testserver), because
// the server embedded in a test binary raced with itself under -race,
// outside any test, and failed packages at random. go mod tidy keeps the
// module in go.mod exactly when something imports it.
func TestNoEmbeddedEtcd(t *testing.T) {
	b, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("go.etcd.io/etcd/server/v3")) {
		t.Error("go.mod requires go.etcd.io/etcd/server/v3: start etcd with internal/tools/testserver.StartEtcd instead of embedding it")
	}
}
