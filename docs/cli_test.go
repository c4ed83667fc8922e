package docs_test

// The CLI reference is generated from the commands' own help, so that it can
// never say what the binary does not:
//
//	go test ./docs -run TestCLIReference -update-cli
//
// rewrites reference/cli.md, and the generated tables of
// reference/configuration.md and reference/exit-codes.md, from a fence binary
// built from ./cmd/fence; without -update-cli the test fails when they differ.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

var updateCLI = flag.Bool("update-cli", false, "rewrite reference/cli.md and the generated tables of reference/configuration.md and reference/exit-codes.md from the fence binary's help")

// built is the fence binary, built once for the tests of the package.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// fenceBinary returns the path of a fence binary built from ./cmd/fence.
func fenceBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		built.dir, built.err = os.MkdirTemp("", "fence-docs-")
		if built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "fence")
		cmd := exec.Command(gobin, "build", "-o", built.path, "./cmd/fence")
		cmd.Dir = ".." // the module's root
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build ./cmd/fence: %v\n%s", err, out)
			return
		}
		built.err = statSources(gobin)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// statSources looks at every file of the module's packages that the binary
// is built from, so that go test counts them among the test's inputs: a
// cached result is not reused once one of them has changed.
func statSources(gobin string) error {
	cmd := exec.Command(gobin, "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", "./cmd/fence")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list -deps ./cmd/fence: %v", err)
	}
	for _, dir := range append(strings.Fields(string(out)), "..") {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !e.IsDir() {
				if _, err := os.Stat(filepath.Join(dir, e.Name())); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// cleanEnv is the environment without fence's own variables, which would
// otherwise change the defaults and the commands' behaviour.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FENCE_") {
			env = append(env, kv)
		}
	}
	return env
}

// runFence runs the binary with args and returns what it printed on stdout
// and stderr, in order, and its exit code.
func runFence(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = cleanEnv()
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		return out.String(), exit.ExitCode()
	}
	t.Fatalf("fence %s: %v\n%s", strings.Join(args, " "), err, out.String())
	return "", 0
}

// tidy trims trailing blanks from every line and blank lines from the end.
func tidy(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

// helpText is one command's help, as the reference shows it.
type helpText struct {
	name    string // the command; "" for fence itself
	summary string // from the list of commands
	how     string // the command line that printed it
	text    string
	code    int // its exit code
}

var commandLine = regexp.MustCompile(`^  ([a-z][a-z0-9-]*)\s+(\S.*)$`)

// listCommands returns the commands, with their summaries, that fence's own
// help lists under a "Commands:" heading, in its order.
func listCommands(help string) (names, summaries []string) {
	in := false
	for _, l := range strings.Split(help, "\n") {
		switch {
		case strings.HasSuffix(strings.ToLower(strings.TrimSpace(l)), "commands:"):
			in = true
		case in && strings.TrimSpace(l) == "":
			in = len(names) == 0
		case in:
			if m := commandLine.FindStringSubmatch(l); m != nil {
				names, summaries = append(names, m[1]), append(summaries, m[2])
			}
		}
	}
	return names, summaries
}

// collectHelp returns fence's help and every listed command's: `fence help
// CMD` where the binary has it, `fence CMD --help` where it does not.
func collectHelp(t *testing.T, bin string) []helpText {
	t.Helper()
	top, code := runFence(t, bin, "help")
	if code != 0 {
		t.Fatalf("fence help exits %d:\n%s", code, top)
	}
	all := []helpText{{how: "fence help", text: tidy(top)}}
	names, summaries := listCommands(top)
	if len(names) == 0 {
		t.Fatalf("fence help lists no commands under a \"Commands:\" heading:\n%s", top)
	}
	for i, name := range names {
		if name == "help" {
			continue // fence help itself, above
		}
		h := helpText{name: name, summary: summaries[i]}
		out, code := runFence(t, bin, "help", name)
		if code == 0 && tidy(out) != "" && tidy(out) != tidy(top) {
			h.how, h.text, h.code = "fence help "+name, tidy(out), code
		} else {
			out, code = runFence(t, bin, name, "--help")
			h.how, h.text, h.code = "fence "+name+" --help", tidy(out), code
		}
		all = append(all, h)
	}
	return all
}

// anchor is GitHub's anchor of a heading.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// codeBlock returns text in a fenced code block that text cannot close.
func codeBlock(text string) string {
	fence := "```"
	for strings.Contains(text, fence) {
		fence += "`"
	}
	return fence + "text\n" + text + "\n" + fence + "\n"
}

// renderCLI returns reference/cli.md.
func renderCLI(helps []helpText) string {
	var b strings.Builder
	b.WriteString("# CLI reference\n\n")
	b.WriteString("<!-- Generated by `go test ./docs -run TestCLIReference -update-cli` from the fence binary's own help: do not edit. Change the help in cmd/fence and regenerate. -->\n\n")
	b.WriteString(`Each section below is a command's help, as the command line above its block prints it.
Flags have environment twins (` + "`--addr` is `FENCE_ADDR`" + `), as each help says; a flag on the
command line wins over its twin. See also [configuration](configuration.md) and
[exit codes](exit-codes.md).

`)
	for _, h := range helps[1:] {
		title := "fence " + h.name
		fmt.Fprintf(&b, "- [%s](#%s): %s\n", title, anchor(title), h.summary)
	}
	for _, h := range helps {
		title := strings.TrimSpace("fence " + h.name)
		fmt.Fprintf(&b, "\n## %s\n\n", title)
		if h.summary != "" {
			fmt.Fprintf(&b, "%s.\n\n", strings.TrimSuffix(h.summary, "."))
		}
		if h.code == 0 {
			fmt.Fprintf(&b, "`%s`:\n\n", h.how)
		} else {
			fmt.Fprintf(&b, "`%s` exits %d and prints:\n\n", h.how, h.code)
		}
		b.WriteString(codeBlock(h.text))
	}
	return b.String()
}

// A flag as the flag package prints it: "  -name type", or "  -name\tusage"
// for a short one; its usage follows on lines indented with a tab.
var (
	flagLine  = regexp.MustCompile(`^ {1,8}(?:-[A-Za-z0-9], )?--?([A-Za-z0-9][A-Za-z0-9-]*)(?:[ =]([^\t ]+))?(?:\t(.*)|\s{2,}(\S.*))?$`)
	usageLine = regexp.MustCompile(`^(?:\s*\t| {6,})(\S.*)$`)
)

// flagDoc is one flag of a command's help.
type flagDoc struct {
	name, arg, usage string
	env              string // its environment twin, "" if it has none
}

var (
	// "Flags (each has an environment twin FENCE_<FLAG>, except --addr):"
	exceptFlag = regexp.MustCompile(`--([A-Za-z0-9][A-Za-z0-9-]*)`)
	// "-o format  output format ... (same as --output)": an alias, whose
	// twin is the long flag's.
	aliasOf = regexp.MustCompile(`\(same as --([A-Za-z0-9][A-Za-z0-9-]*)\)`)
)

// parseFlags returns the flags that a help text lists after its "Flags"
// heading (or in the whole text, if it has none), each with its environment
// twin as cmd/fence names it: FENCE_ and the flag's name in capitals, with
// "-" as "_"; an alias's is its long flag's; the heading names the flags
// that have none ("except --addr").
func parseFlags(help string) []flagDoc {
	lines := strings.Split(help, "\n")
	start, heading := 0, ""
	for i, l := range lines {
		if strings.HasPrefix(strings.ToLower(l), "flags") && strings.HasSuffix(strings.TrimSpace(l), ":") {
			start, heading = i+1, l
		}
	}
	none := map[string]bool{}
	if _, except, ok := strings.Cut(heading, "except"); ok {
		for _, m := range exceptFlag.FindAllStringSubmatch(except, -1) {
			none[m[1]] = true
		}
	}
	var flags []flagDoc
	for _, l := range lines[start:] {
		if m := flagLine.FindStringSubmatch(l); m != nil {
			flags = append(flags, flagDoc{name: m[1], arg: m[2], usage: strings.TrimSpace(m[3] + m[4])})
			continue
		}
		if m := usageLine.FindStringSubmatch(l); m != nil && len(flags) > 0 {
			f := &flags[len(flags)-1]
			f.usage = strings.TrimSpace(f.usage + " " + m[1])
		}
	}
	for i := range flags {
		f := &flags[i]
		name := f.name
		if m := aliasOf.FindStringSubmatch(f.usage); m != nil {
			name = m[1]
		}
		if !none[name] {
			f.env = envName(name)
		}
	}
	return flags
}

// envName is the environment twin of a flag, as cmd/fence names it.
func envName(flagName string) string {
	return "FENCE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// cell escapes text for a cell of a Markdown table.
var cell = strings.NewReplacer(`\`, `\\`, "|", `\|`, "*", `\*`, "<", "&lt;", ">", "&gt;", "`", "\\`")

// flagTable returns the Markdown table of flags.
func flagTable(flags []flagDoc) string {
	var b strings.Builder
	b.WriteString("| flag | environment | meaning |\n|---|---|---|\n")
	for _, f := range flags {
		name := "--" + f.name
		if len(f.name) == 1 {
			name = "-" + f.name
		}
		if f.arg != "" {
			name += " " + f.arg
		}
		env := "none"
		if f.env != "" {
			env = "`" + f.env + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", name, env, cell.Replace(f.usage))
	}
	return b.String()
}

var exitLine = regexp.MustCompile(`^\s+(\d\S*)\s+(\S.*)$`)

// exitCodes returns the table of exit codes from the first help text that
// has an "Exit codes:" heading.
func exitCodes(t *testing.T, helps []helpText) string {
	t.Helper()
	for _, h := range helps {
		lines := strings.Split(h.text, "\n")
		for i, l := range lines {
			if !strings.EqualFold(strings.TrimSpace(l), "exit codes:") {
				continue
			}
			var b strings.Builder
			b.WriteString("| code | meaning |\n|---|---|\n")
			n := 0
			var row []string
			flush := func() {
				if row != nil {
					fmt.Fprintf(&b, "| %s | %s |\n", row[0], cell.Replace(row[1]))
					n++
				}
			}
			for _, l := range lines[i+1:] {
				if strings.TrimSpace(l) == "" {
					break
				}
				if m := exitLine.FindStringSubmatch(l); m != nil {
					flush()
					row = []string{m[1], m[2]}
				} else if row != nil {
					row[1] += " " + strings.TrimSpace(l)
				}
			}
			flush()
			if n == 0 {
				t.Fatalf("%s: no exit code under \"Exit codes:\"", h.how)
			}
			return b.String()
		}
	}
	t.Fatal("no help text has an \"Exit codes:\" section")
	return ""
}

// replaceGenerated returns doc with the text between the lines
// "<!-- generated: name -->" and "<!-- end generated: name -->" replaced.
func replaceGenerated(t *testing.T, file, doc, name, content string) string {
	t.Helper()
	begin, end := "<!-- generated: "+name+" -->\n", "<!-- end generated: "+name+" -->"
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q", file, strings.TrimSpace(begin), end)
	}
	return doc[:i+len(begin)] + content + doc[j:]
}

// checkOrUpdate compares file with want, or writes want with -update-cli.
func checkOrUpdate(t *testing.T, file, want string) {
	t.Helper()
	got, err := os.ReadFile(file)
	if err != nil && !(*updateCLI && errors.Is(err, os.ErrNotExist)) {
		t.Fatal(err)
	}
	if string(got) == want {
		return
	}
	if *updateCLI {
		if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s", file)
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(want, "\n")
	line := 0
	for line < len(gl) && line < len(wl) && gl[line] == wl[line] {
		line++
	}
	at := func(ls []string) string {
		if line < len(ls) {
			return ls[line]
		}
		return "(end of file)"
	}
	t.Errorf("docs/%s is not what the fence binary's help says; first difference at line %d:\n  file:   %s\n  binary: %s\nrun: go test ./docs -run TestCLIReference -update-cli",
		file, line+1, at(gl), at(wl))
}

// TestCLIReference fails when reference/cli.md, or the generated tables of
// reference/configuration.md and reference/exit-codes.md, differ from what
// the fence binary's help says.
func TestCLIReference(t *testing.T) {
	bin := fenceBinary(t)
	helps := collectHelp(t, bin)
	checkOrUpdate(t, filepath.Join("reference", "cli.md"), renderCLI(helps))

	byName := map[string]helpText{}
	for _, h := range helps {
		byName[h.name] = h
	}
	const conf = "reference/configuration.md"
	doc, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []struct{ name, command string }{
		{"serve flags", "serve"},   // fence serve
		{"client flags", "status"}, // the flags every one-call command shares
	} {
		h, ok := byName[part.command]
		if !ok {
			t.Fatalf("fence help lists no command %s", part.command)
		}
		flags := parseFlags(h.text)
		if len(flags) == 0 {
			t.Fatalf("%s: no flags found in:\n%s", h.how, h.text)
		}
		doc = []byte(replaceGenerated(t, conf, string(doc), part.name, flagTable(flags)))
	}
	checkOrUpdate(t, conf, string(doc))

	const codes = "reference/exit-codes.md"
	doc, err = os.ReadFile(codes)
	if err != nil {
		t.Fatal(err)
	}
	checkOrUpdate(t, codes, replaceGenerated(t, codes, string(doc), "exit codes", exitCodes(t, helps)))
}
