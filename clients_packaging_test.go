package fence_test

// Tests of the clients' packages as a user gets them: the TypeScript client
// packed by npm and installed into a project of its own, the Python client
// installed by pip into a fresh virtual environment. They run the real tools,
// offline, and skip (fail under FENCE_REQUIRE_SERVERS=1, as CI runs) where a
// tool is missing. The clients' own suites run in e2e (clients_test.go).

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
