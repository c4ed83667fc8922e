package fence_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLayout_ImportsPointInward checks the tree's rules with go list: the
// domain imports only the standard library, a guard links none of the
// server's parts (a user who imports a guard gets the guard), and nothing
// outside the tools imports a tool.
func TestLayout_ImportsPointInward(t *testing.T) {
	const mod = "github.com/fence-lock/fence"
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type pkg struct {
		ImportPath string
		Imports    []string
		Deps       []string
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	under := func(p, dir string) bool { return p == mod+"/"+dir || strings.HasPrefix(p, mod+"/"+dir+"/") }
	for _, p := range pkgs {
		for _, d := range p.Deps {
			own := strings.HasPrefix(d, mod+"/") || d == mod
			switch {
			case p.ImportPath == mod && own:
				t.Errorf("the domain %s imports %s: it must stay standard library only", p.ImportPath, d)
			case under(p.ImportPath, "guard") && own && d != mod && !under(d, "guard"):
				t.Errorf("the guard %s links %s: a guard links the domain and the guards' own packages only", p.ImportPath, d)
			case under(d, "internal/tools") && !under(p.ImportPath, "internal/tools") && !under(p.ImportPath, "cmd"):
				t.Errorf("%s imports the tool %s: only the CLI and other tools may", p.ImportPath, d)
			}
		}
	}
}

// TestLayout_FilesStaySmall keeps every non-test Go file under 800 lines: a
// file that grows past it holds more than one concern, to be split by them.
func TestLayout_FilesStaySmall(t *testing.T) {
	const max = 800
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := bytes.Count(b, []byte("\n")); n > max {
			t.Errorf("%s has %d lines, over %d: split it by concern", path, n, max)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLayout_DocsNameEveryPackage checks that the Layout of the README and of
// docs/DESIGN.md name every package of the module: by its path, or by its
// name under a directory they name.
func TestLayout_DocsNameEveryPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{"README.md", filepath.Join("docs", "DESIGN.md")} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		_, after, ok := strings.Cut(string(b), "## Layout\n")
		_, block, ok2 := strings.Cut(after, "```\n")
		block, _, ok3 := strings.Cut(block, "```\n")
		if !ok || !ok2 || !ok3 {
			t.Fatalf("%s: no ## Layout section with a code block", doc)
		}
		for _, dir := range strings.Fields(string(out)) {
			rel, err := filepath.Rel(root, dir)
			if err != nil || rel == "." {
				continue
			}
			rel = filepath.ToSlash(rel)
			if !namesPackage(block, rel) {
				t.Errorf("%s: the Layout does not name the package %s", doc, rel)
			}
		}
	}
}

// namesPackage reports whether block names the package at rel: rel + "/",
// or rel's last element as a word after a directory above it.
func namesPackage(block, rel string) bool {
	if strings.Contains(block, rel+"/") {
		return true
	}
	base := path.Base(rel)
	for dir := path.Dir(rel); dir != "."; dir = path.Dir(dir) {
		i := strings.Index(block, dir+"/")
		if i >= 0 && regexp.MustCompile(`\b`+regexp.QuoteMeta(base)+`\b`).MatchString(block[i:]) {
			return true
		}
	}
	return false
}
