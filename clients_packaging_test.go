package fence_test

// Tests of the clients' packages as a user gets them: the TypeScript client
// packed by npm and installed into a project of its own, the Python client
// installed by pip into a fresh virtual environment. They run the real tools,
// offline, and skip (fail under FENCE_REQUIRE_SERVERS=1, as CI runs) where a
// tool is missing. The clients' own suites run in e2e (clients_test.go).

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// packagingTimeout bounds one tool's run: a hung npm or pip fails the test
// with its output instead of holding the package until go test's timeout.
const packagingTimeout = 3 * time.Minute

// missingTool skips t, saying why, or fails it under FENCE_REQUIRE_SERVERS=1.
func missingTool(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("FENCE_REQUIRE_SERVERS") == "1" {
		t.Fatalf("%s (FENCE_REQUIRE_SERVERS=1 makes this a failure)", why)
	}
	t.Skip(why)
}

// lookTool returns the path of the program name, or skips t without it.
func lookTool(t *testing.T, name, debian string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		missingTool(t, name+" is not installed (Debian: "+debian+")")
	}
	return p
}

// runTool runs name with args in dir and returns its standard output; it
// fails t with both outputs if the program fails.
func runTool(t *testing.T, env []string, dir, name string, args ...string) []byte {
	t.Helper()
	out, err := tryTool(t, env, dir, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return out
}

// tryTool is runTool that returns the error (with the program's standard
// error in it) instead of failing t.
func tryTool(t *testing.T, env []string, dir, name string, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), packagingTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), &toolError{err: err, stdout: stdout.String(), stderr: stderr.String()}
	}
	return stdout.Bytes(), nil
}

type toolError struct {
	err            error
	stdout, stderr string
}

func (e *toolError) Error() string {
	return e.err.Error() + "\nstdout:\n" + e.stdout + "\nstderr:\n" + e.stderr
}

// rootLicense returns the repository's LICENSE and its SPDX identifier.
func rootLicense(t *testing.T) ([]byte, string) {
	t.Helper()
	b, err := os.ReadFile("LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	head := strings.Join(strings.Fields(string(b[:min(len(b), 200)])), " ")
	if strings.HasPrefix(head, "Apache License Version 2.0, January 2004") {
		return b, "Apache-2.0"
	}
	t.Fatalf("LICENSE begins %q: a licence this test does not know; teach it the SPDX identifier", head)
	return nil, ""
}

// sameFile fails t unless file holds exactly want (the root LICENSE, of
// which the clients carry copies).
func sameFile(t *testing.T, file string, want []byte) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Errorf("%v (copy the repository's LICENSE there)", err)
		return
	}
	if !bytes.Equal(b, want) {
		t.Errorf("%s differs from the repository's LICENSE: copy it again", file)
	}
}

// copyTree copies the files of src into dst, leaving out the directories
// named in skip (build output, installed dependencies).
func copyTree(t *testing.T, src, dst string, skip ...string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if slices.Contains(skip, d.Name()) {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// packageJSON is what TestTypeScriptPackage reads of package.json.
type packageJSON struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	License    string `json:"license"`
	Repository struct {
		Type      string `json:"type"`
		URL       string `json:"url"`
		Directory string `json:"directory"`
	} `json:"repository"`
	Main    string         `json:"main"`
	Types   string         `json:"types"`
	Exports map[string]any `json:"exports"`
	Files   []string       `json:"files"`
}

// exportTargets returns the files that an exports map names.
func exportTargets(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case map[string]any:
		var out []string
		for _, w := range v {
			out = append(out, exportTargets(w)...)
		}
		return out
	}
	return nil
}

// TestTypeScriptPackage packs the TypeScript client with npm (whose prepack
// builds it) and installs the tarball into a project of its own, as a user
// does. The tarball carries the licence, and package.json says which it is and
// where the source is; the package loads both ways: require() gets the
// CommonJS build and import the ES modules, with the same exports, and
// TypeScript resolves the declarations of each from a .cts and a .mts file.
//
// It works on a copy of the package, since e2e's TestTypeScriptClient builds
// into the package's dist/ at the same time. The compiler comes from the
// package's node_modules when installed (CI's npm ci), else from npm's cache
// (npm ci --offline): the test sends nothing to the network.
func TestTypeScriptPackage(t *testing.T) {
	license, spdx := rootLicense(t)
	src := filepath.Join("clients", "typescript")
	b, err := os.ReadFile(filepath.Join(src, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg packageJSON
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatalf("package.json: %v", err)
	}
	if pkg.License != spdx {
		t.Errorf("package.json: license %q, want %q (the repository's LICENSE)", pkg.License, spdx)
	}
	if pkg.Repository.Type != "git" || !strings.Contains(pkg.Repository.URL, "github.com/fence-lock/fence") || pkg.Repository.Directory != "clients/typescript" {
		t.Errorf("package.json: repository %+v, want git, https://github.com/fence-lock/fence, directory clients/typescript", pkg.Repository)
	}
	sameFile(t, filepath.Join(src, "LICENSE"), license)

	npm := lookTool(t, "npm", "npm")
	node := lookTool(t, "node", "nodejs")
	env := append(os.Environ(), "npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false")
	dir := t.TempDir()
	work := filepath.Join(dir, "package")
	copyTree(t, src, work, "node_modules", "dist")
	if _, err := os.Stat(filepath.Join(src, "node_modules", "typescript", "package.json")); err == nil {
		abs, err := filepath.Abs(filepath.Join(src, "node_modules"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(work, "node_modules")); err != nil {
			t.Fatal(err)
		}
	} else if _, err := tryTool(t, env, work, npm, "ci", "--offline"); err != nil {
		missingTool(t, "the TypeScript client's dev dependencies are neither installed nor in npm's cache: run npm ci in clients/typescript\n"+err.Error())
	}

	// npm pack --json lists what npm pack --dry-run --json lists, and leaves
	// the tarball.
	out := runTool(t, env, work, npm, "pack", "--json", "--pack-destination", dir)
	var packs []struct {
		Filename string `json:"filename"`
		Files    []struct {
			Path string `json:"path"`
		} `json:"files"`
	}
	if err := json.Unmarshal(out, &packs); err != nil || len(packs) != 1 {
		t.Fatalf("npm pack --json: %v\n%s", err, out)
	}
	var files []string
	for _, f := range packs[0].Files {
		files = append(files, f.Path)
	}
	want := []string{"LICENSE", "README.md", "package.json", "dist/cjs/package.json"}
	for _, p := range append(exportTargets(pkg.Exports), pkg.Main, pkg.Types) {
		want = append(want, strings.TrimPrefix(p, "./"))
	}
	slices.Sort(want)
	want = slices.Compact(want)
	for _, w := range want {
		if !slices.Contains(files, w) {
			t.Errorf("the tarball lacks %s (package.json names it); it holds %q", w, files)
		}
	}
	for _, f := range files {
		if strings.HasPrefix(f, "dist/test/") || strings.HasPrefix(f, "dist/examples/") || strings.HasPrefix(f, "src/") || strings.HasPrefix(f, "node_modules/") {
			t.Errorf("the tarball holds %s", f)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	app := filepath.Join(dir, "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(app, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("package.json", `{"name": "app", "private": true}`+"\n")
	runTool(t, env, app, npm, "install", "--offline", "--no-package-lock", filepath.Join(dir, packs[0].Filename))
	installed := filepath.Join(app, "node_modules", filepath.FromSlash(pkg.Name))
	sameFile(t, filepath.Join(installed, "LICENSE"), license)

	// Loaded from CommonJS and from an ES module.
	write("load.cjs", `const m = require("`+pkg.Name+`");
console.log(JSON.stringify({ resolved: require.resolve("`+pkg.Name+`"), keys: Object.keys(m).sort(), client: typeof m.Client }));
`)
	write("load.mjs", `const m = await import("`+pkg.Name+`");
const resolved = typeof import.meta.resolve === "function" ? new URL(import.meta.resolve("`+pkg.Name+`")).pathname : "";
console.log(JSON.stringify({ resolved, keys: Object.keys(m).sort(), client: typeof m.Client }));
`)
	type loaded struct {
		Resolved string   `json:"resolved"`
		Keys     []string `json:"keys"`
		Client   string   `json:"client"`
	}
	load := func(file, wantFile string) loaded {
		t.Helper()
		out := runTool(t, env, app, node, file)
		var l loaded
		if err := json.Unmarshal(out, &l); err != nil {
			t.Fatalf("node %s: %v\n%s", file, err, out)
		}
		if l.Client != "function" {
			t.Errorf("node %s: Client is %s", file, l.Client)
		}
		if l.Resolved != "" && !strings.HasSuffix(filepath.ToSlash(l.Resolved), "/node_modules/"+pkg.Name+"/"+wantFile) {
			t.Errorf("node %s: the package resolves to %s, want its %s", file, l.Resolved, wantFile)
		}
		return l
	}
	cjs := load("load.cjs", "dist/cjs/src/index.js")
	esm := load("load.mjs", "dist/src/index.js")
	if !slices.Equal(cjs.Keys, esm.Keys) {
		t.Errorf("require() exports %q, import %q", cjs.Keys, esm.Keys)
	}

	// TypeScript finds the declarations of each: the CommonJS ones for a
	// require, the ES modules' for an import.
	write("use.cts", `import fence = require("`+pkg.Name+`");
const client: fence.Client = new fence.Client("http://127.0.0.1:7700");
const token: bigint = fence.toToken(1);
export { client, token };
`)
	write("use.mts", `import { Client, toToken } from "`+pkg.Name+`";
const client: Client = new Client("http://127.0.0.1:7700");
const token: bigint = toToken(1);
export { client, token };
`)
	write("tsconfig.json", `{
  "compilerOptions": {
    "strict": true, "noEmit": true, "target": "ES2022", "lib": ["ES2022", "DOM"], "types": [],
    "module": "NodeNext", "moduleResolution": "NodeNext", "traceResolution": true
  },
  "files": ["use.cts", "use.mts"]
}
`)
	tsc := filepath.Join(work, "node_modules", "typescript", "bin", "tsc")
	trace := string(runTool(t, env, app, node, tsc, "-p", "."))
	for _, w := range []string{"dist/cjs/src/index.d.ts", "dist/src/index.d.ts"} {
		found := false
		for _, line := range strings.Split(trace, "\n") {
			found = found || strings.Contains(line, "Module name '"+pkg.Name+"' was successfully resolved to '") &&
				strings.Contains(line, "/node_modules/"+pkg.Name+"/"+w+"'")
		}
		if !found {
			t.Errorf("tsc did not resolve %s to its %s", pkg.Name, w)
		}
	}
}

// pyprojectString returns the string value of key in clients/python's
// pyproject.toml (the first line key = "value"), or fails t and returns "".
func pyprojectString(t *testing.T, text, key string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + ` = "([^"]*)"$`).FindStringSubmatch(text)
	if m == nil {
		t.Errorf("clients/python/pyproject.toml: no %s = \"...\"", key)
		return ""
	}
	return m[1]
}

// pythonEnv is the environment of the Python tools: none of the caller's
// Python or pip settings, no pip configuration file, no byte code written
// into the source tree.
func pythonEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PIP_") || strings.HasPrefix(k, "PYTHON") || k == "VIRTUAL_ENV" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PIP_CONFIG_FILE="+os.DevNull, "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1",
		"PYTHONDONTWRITEBYTECODE=1", "PYTHONNOUSERSITE=1")
}

// TestPythonPackage installs the Python client with pip into a fresh virtual
// environment that has neither setuptools nor wheel, offline, as the README
// says: pip install --no-build-isolation ./clients/python (pip runs the
// package's own build backend, standard library only). The installed package
// imports from outside the source tree, with its metadata (the licence, the
// Python it needs, the verify extra) and its licence file. The wheel pip
// builds has a RECORD that matches its files; the backend's sdist installs;
// an editable install imports from the source tree.
//
// pip is the system Python's, run for the environment with --python (pip
// 22.3 and later), so that the environment holds nothing but Python.
func TestPythonPackage(t *testing.T) {
	license, spdx := rootLicense(t)
	src, err := filepath.Abs(filepath.Join("clients", "python"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(src, "pyproject.toml"))
	if err != nil {
		t.Fatal(err)
	}
	pyproject := string(b)
	if got := pyprojectString(t, pyproject, "license"); got != spdx {
		t.Errorf("pyproject.toml: license %q, want %q (the repository's LICENSE)", got, spdx)
	}
	sameFile(t, filepath.Join(src, "LICENSE"), license)
	name := pyprojectString(t, pyproject, "name")
	version := pyprojectString(t, pyproject, "version")
	requiresPython := pyprojectString(t, pyproject, "requires-python")

	python := lookTool(t, "python3", "python3")
	env := pythonEnv()
	out, err := tryTool(t, env, "", python, "-m", "pip", "--version")
	if err != nil {
		missingTool(t, "python3 has no pip (Debian: python3-pip)")
	}
	var major, minor int
	if _, err := fmt.Sscanf(string(out), "pip %d.%d", &major, &minor); err != nil || major < 22 || major == 22 && minor < 3 {
		missingTool(t, fmt.Sprintf("this test runs pip with --python, which needs pip 22.3 or later; python3 -m pip --version says %q", strings.TrimSpace(string(out))))
	}

	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	if _, err := tryTool(t, env, dir, python, "-m", "venv", "--without-pip", venv); err != nil {
		missingTool(t, "python3 -m venv failed (Debian: python3-venv): "+err.Error())
	}
	vpython := filepath.Join(venv, "bin", "python")
	if out := runTool(t, env, dir, vpython, "-c", "import importlib.util as u; print([m for m in ('setuptools', 'wheel') if u.find_spec(m)])"); strings.TrimSpace(string(out)) != "[]" {
		t.Fatalf("the fresh environment has %s", out)
	}
	pip := func(args ...string) {
		t.Helper()
		runTool(t, env, dir, python, append([]string{"-m", "pip", "--python", vpython}, args...)...)
	}

	// What the installed package says of itself, run from outside the source.
	type installed struct {
		File     string            `json:"file"`
		Client   bool              `json:"client"`
		Version  string            `json:"version"`
		Metadata map[string]string `json:"metadata"`
		Extras   []string          `json:"extras"`
		Requires []string          `json:"requires"`
		Files    []string          `json:"files"`
		License  string            `json:"license"`
	}
	inspect := func() installed {
		t.Helper()
		out := runTool(t, env, dir, vpython, "-c", `
import importlib.metadata as m, json, fence
d = m.distribution("`+name+`")
md = d.metadata
print(json.dumps({
    "file": fence.__file__, "client": hasattr(fence, "Client"), "version": fence.__version__,
    "metadata": {k: md[k] for k in ("Name", "Version", "Requires-Python", "License-Expression", "License-File", "Metadata-Version")},
    "extras": md.get_all("Provides-Extra") or [], "requires": d.requires or [],
    "files": [str(f) for f in d.files or []], "license": d.read_text("licenses/LICENSE"),
}))`)
		var in installed
		if err := json.Unmarshal(out, &in); err != nil {
			t.Fatalf("inspecting the installed package: %v\n%s", err, out)
		}
		return in
	}
	checkInstalled := func(how string, in installed, under string) {
		t.Helper()
		if !strings.HasPrefix(in.File, under+string(filepath.Separator)) {
			t.Errorf("%s: fence imports from %s, want under %s", how, in.File, under)
		}
		if !in.Client || in.Version != version {
			t.Errorf("%s: fence has Client %v, version %q; want a Client and %q", how, in.Client, in.Version, version)
		}
		want := map[string]string{"Name": name, "Version": version, "Requires-Python": requiresPython, "License-Expression": spdx, "License-File": "LICENSE"}
		for k, v := range want {
			if in.Metadata[k] != v {
				t.Errorf("%s: metadata %s %q, want %q", how, k, in.Metadata[k], v)
			}
		}
		if !slices.Equal(in.Extras, []string{"verify"}) || !slices.Contains(in.Requires, `cryptography; extra == "verify"`) {
			t.Errorf("%s: extras %q, requirements %q; want verify, with cryptography", how, in.Extras, in.Requires)
		}
		if in.License != string(license) {
			t.Errorf("%s: the installed licences/LICENSE is not the repository's LICENSE", how)
		}
	}

	// The README's command.
	pip("install", "--no-build-isolation", "--no-index", src)
	in := inspect()
	checkInstalled("pip install --no-build-isolation", in, venv)
	for _, f := range []string{"fence/py.typed", "fence/client.py", name2dist(name) + "-" + version + ".dist-info/licenses/LICENSE"} {
		if !slices.Contains(in.Files, f) {
			t.Errorf("the installed files %q lack %s", in.Files, f)
		}
	}

	// The wheel pip builds.
	wheels := filepath.Join(dir, "wheels")
	pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "--wheel-dir", wheels, src)
	checkWheel(t, filepath.Join(wheels, name2dist(name)+"-"+version+"-py3-none-any.whl"), src, license, spdx)

	// The sdist builds and installs.
	sdists := filepath.Join(dir, "sdist")
	if err := os.MkdirAll(sdists, 0o755); err != nil {
		t.Fatal(err)
	}
	sdist := strings.TrimSpace(string(runTool(t, env, src, python, "-c",
		"import sys; sys.path.insert(0, '_build'); import fence_build; print(fence_build.build_sdist(sys.argv[1]))", sdists)))
	checkSdist(t, filepath.Join(sdists, sdist), name2dist(name)+"-"+version, src)
	pip("uninstall", "--yes", name)
	pip("install", "--no-build-isolation", "--no-index", filepath.Join(sdists, sdist))
	checkInstalled("pip install of the sdist", inspect(), venv)

	// Editable, with build isolation (which installs nothing: the backend
	// needs nothing).
	pip("uninstall", "--yes", name)
	pip("install", "--no-index", "--editable", src)
	checkInstalled("pip install --editable", inspect(), src)
}

// name2dist is a distribution's name as in its files' names (PEP 427).
func name2dist(name string) string {
	return strings.ToLower(regexp.MustCompile(`[-_.]+`).ReplaceAllString(name, "_"))
}

// checkWheel checks a wheel's RECORD against its files, that it holds every
// file of the package fence (and no byte code), WHEEL, METADATA and the
// licence.
func checkWheel(t *testing.T, file, src string, license []byte, spdx string) {
	t.Helper()
	z, err := zip.OpenReader(file)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	contents := map[string][]byte{}
	for _, f := range z.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		contents[f.Name] = b
	}
	base := strings.TrimSuffix(filepath.Base(file), "-py3-none-any.whl")
	distInfo := base + ".dist-info/"
	record, ok := contents[distInfo+"RECORD"]
	if !ok {
		t.Fatalf("the wheel has no %sRECORD; it holds %v", distInfo, slices.Sorted(maps.Keys(contents)))
	}
	recorded := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(record)), "\n") {
		f := strings.Split(line, ",")
		if len(f) != 3 {
			t.Errorf("RECORD line %q", line)
			continue
		}
		recorded[f[0]] = true
		b, ok := contents[f[0]]
		switch {
		case !ok:
			t.Errorf("RECORD names %s, which the wheel does not hold", f[0])
		case f[0] == distInfo+"RECORD":
			if f[1] != "" || f[2] != "" {
				t.Errorf("RECORD records a hash of itself: %q", line)
			}
		default:
			sum := sha256.Sum256(b)
			if want := "sha256=" + base64.RawURLEncoding.EncodeToString(sum[:]); f[1] != want {
				t.Errorf("RECORD: %s %s, its sha256 is %s", f[0], f[1], want)
			}
			if f[2] != strconv.Itoa(len(b)) {
				t.Errorf("RECORD: %s size %s, it is %d bytes", f[0], f[2], len(b))
			}
		}
	}
	for n := range contents {
		if !recorded[n] {
			t.Errorf("the wheel holds %s, which RECORD does not name", n)
		}
		if strings.HasSuffix(n, ".pyc") || strings.Contains(n, "__pycache__") {
			t.Errorf("the wheel holds byte code: %s", n)
		}
	}
	pkg, err := os.ReadDir(filepath.Join(src, "fence"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range pkg {
		if e.IsDir() || strings.HasSuffix(e.Name(), ".pyc") {
			continue
		}
		want, err := os.ReadFile(filepath.Join(src, "fence", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := contents["fence/"+e.Name()]; !ok || !bytes.Equal(got, want) {
			t.Errorf("the wheel's fence/%s is not the source's (held: %v)", e.Name(), ok)
		}
	}
	if _, ok := contents["fence/py.typed"]; !ok {
		t.Error("the wheel lacks fence/py.typed")
	}
	wheel := string(contents[distInfo+"WHEEL"])
	for _, w := range []string{"Wheel-Version: 1.0\n", "Root-Is-Purelib: true\n", "Tag: py3-none-any\n"} {
		if !strings.Contains(wheel, w) {
			t.Errorf("WHEEL lacks %q:\n%s", w, wheel)
		}
	}
	if got := string(contents[distInfo+"top_level.txt"]); got != "fence\n" {
		t.Errorf("top_level.txt %q, want fence", got)
	}
	if !bytes.Equal(contents[distInfo+"licenses/LICENSE"], license) {
		t.Errorf("the wheel's %slicenses/LICENSE is not the repository's LICENSE", distInfo)
	}
	meta, _, _ := strings.Cut(string(contents[distInfo+"METADATA"]), "\n\n")
	for _, w := range []string{"Metadata-Version: 2.4", "License-Expression: " + spdx, "License-File: LICENSE", "Provides-Extra: verify", "Description-Content-Type: text/markdown"} {
		if !slices.Contains(strings.Split(meta, "\n"), w) {
			t.Errorf("METADATA lacks %q:\n%s", w, meta)
		}
	}
}

// checkSdist checks that an sdist holds, under base/, what building a wheel
// takes: pyproject.toml, the backend, the package, the README and LICENSE,
// and PKG-INFO.
func checkSdist(t *testing.T, file, base, src string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	want := []string{"PKG-INFO", "pyproject.toml", "README.md", "LICENSE", "_build/fence_build.py", "fence/__init__.py", "fence/py.typed"}
	for _, w := range want {
		if !slices.Contains(names, base+"/"+w) {
			t.Errorf("the sdist lacks %s/%s; it holds %q", base, w, names)
		}
	}
	for _, n := range names {
		if !strings.HasPrefix(n, base+"/") || strings.Contains(n, "__pycache__") || strings.Contains(n, "/tests/") {
			t.Errorf("the sdist holds %s", n)
		}
	}
}
