package docs_test

// The shell examples of the documentation are copied into terminals as they
// are: each must at least be a shell script that means what it shows.

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mdBlock is a fenced code block of a Markdown file.
type mdBlock struct {
	file string // path of the file, relative to the module's root
	line int    // line of the opening fence, from 1
	lang string // the fence's info string: sh, text, go, ... ("" none)
	text string // the block's lines, without the fence's indentation
}

func (b mdBlock) where() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

var fenceLine = regexp.MustCompile("^( *)```(\\S*)")

// mdBlocks returns the fenced code blocks of a Markdown text, in order.
func mdBlocks(file, text string) []mdBlock {
	var blocks []mdBlock
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		m := fenceLine.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent := m[1]
		b := mdBlock{file: file, line: i + 1, lang: m[2]}
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		b.text = strings.Join(body, "\n") + "\n"
		blocks = append(blocks, b)
	}
	return blocks
}

// isShell reports whether a block's language is a shell's.
func isShell(lang string) bool {
	return lang == "sh" || lang == "bash" || lang == "shell"
}

// markdownFiles returns the Markdown files of the module, relative to its
// root (the parent of this package's directory).
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != ".." && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".md") {
			rel, err := filepath.Rel("..", path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// commentAfterBackslash matches a backslash, blanks and a comment: the
// backslash escapes a blank, and the comment ends the command.
var commentAfterBackslash = regexp.MustCompile(`(^|[^\\])\\[ \t]+#`)

// continuationProblems returns what is wrong with the line continuations of
// a shell script: a backslash that the reader takes for a continuation but
// the shell does not. bash -n accepts all of these, and each splits one
// command in two, the second of which fails ("--flag: command not found").
func continuationProblems(script string) []string {
	var problems []string
	lines := strings.Split(strings.TrimSuffix(script, "\n"), "\n")
	for i, l := range lines {
		n := i + 1
		if commentAfterBackslash.MatchString(l) {
			problems = append(problems, fmt.Sprintf("line %d: a comment after a backslash ends the command here, and the next line runs on its own: %q (put the comment above the command)", n, l))
			continue
		}
		if strings.TrimRight(l, " \t") != l && strings.HasSuffix(strings.TrimRight(l, " \t"), `\`) {
			problems = append(problems, fmt.Sprintf("line %d: blanks after the backslash: it escapes a blank and does not continue the line: %q", n, l))
			continue
		}
		if !continues(l) {
			continue
		}
		switch next := ""; {
		case i+1 == len(lines):
			problems = append(problems, fmt.Sprintf("line %d: the last line continues into nothing: %q", n, l))
		default:
			next = strings.TrimSpace(lines[i+1])
			if next == "" {
				problems = append(problems, fmt.Sprintf("line %d: continued by a blank line, which ends the command: %q", n, l))
			} else if strings.HasPrefix(next, "#") {
				problems = append(problems, fmt.Sprintf("line %d: continued by a comment line, which ends the command: the line after it runs on its own: %q", n, l))
			}
		}
	}
	return problems
}

// continues reports whether a line ends in a backslash that escapes the
// newline (an odd number of backslashes).
func continues(l string) bool {
	n := len(l) - len(strings.TrimRight(l, `\`))
	return n%2 == 1
}

// TestShellBlocks checks every sh block of every Markdown file: bash parses
// it (bash -n), and no backslash at a line's end is undone by a comment, a
// blank or the block's end. Such a backslash once made the cluster guide's
// etcd command fail with "--quota-backend-bytes: command not found".
func TestShellBlocks(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	checked := 0
	for _, file := range markdownFiles(t) {
		text, err := os.ReadFile(filepath.Join("..", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range mdBlocks(file, string(text)) {
			if !isShell(b.lang) {
				continue
			}
			checked++
			for _, p := range continuationProblems(b.text) {
				t.Errorf("%s: %s", b.where(), p)
			}
			cmd := exec.Command(bash, "-n")
			cmd.Stdin = strings.NewReader(b.text)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Errorf("%s: bash -n: %v\n%s", b.where(), err, stderr.String())
			}
		}
	}
	if checked == 0 {
		t.Fatal("no sh block found: the walk of the Markdown files is broken")
	}
}

// TestContinuationProblems checks the check on the mistakes it is for, and on
// what it must let pass.
func TestContinuationProblems(t *testing.T) {
	for _, tc := range []struct {
		script string
		bad    bool
	}{
		{"etcd --a 1 \\\n  --b 2\n", false},
		{"etcd --a 1 \\        # why a\n  --b 2\n", true},
		{"etcd --a 1 \\\n  # why b\n  --b 2\n", true},
		{"etcd --a 1 \\\n\n  --b 2\n", true},
		{"etcd --a 1 \\ \n  --b 2\n", true},
		{"etcd --a 1 \\\n", true},
		{"echo 'a\\\\'\n# a comment\n", false},
		{"echo a # a comment with a \\ in it\n", false},
		{"printf '%s\\\\\\n' a\n", false},
	} {
		if got := continuationProblems(tc.script); (len(got) > 0) != tc.bad {
			t.Errorf("continuationProblems(%q) = %q, want a problem: %v", tc.script, got, tc.bad)
		}
	}
}

var (
	// serveWithAuth is a fence serve command line with an auth file.
	serveWithAuth = regexp.MustCompile(`fence serve\b[^\n]*(\\\n[^\n]*)*--auth-file`)
	// clientCommand is a fence command that calls a server.
	clientCommand = regexp.MustCompile(`\bfence (lock|acquire|renew|release|revoke|status|ls|watch|cluster|put|get|delete|fence|txn)\b`)
	// sendsToken gives client commands their credentials: a token, or a
	// client certificate.
	sendsToken = regexp.MustCompile(`FENCE_AUTH_TOKEN=|--auth-token|FENCE_CLIENT_CERT=|--client-cert`)
)

// TestShellBlocksSendToken checks that the sh blocks of a Markdown file that
// start a server with --auth-file give the client commands after it a token
// (FENCE_AUTH_TOKEN, or --auth-token): without one each is refused
// unauthorized, and the example does not work as shown.
func TestShellBlocksSendToken(t *testing.T) {
	for _, file := range markdownFiles(t) {
		text, err := os.ReadFile(filepath.Join("..", file))
		if err != nil {
			t.Fatal(err)
		}
		auth, token := false, false
		for _, b := range mdBlocks(file, string(text)) {
			if !isShell(b.lang) {
				continue
			}
			// Within a block, in the order of its text.
			pos := 0
			for pos < len(b.text) {
				rest := b.text[pos:]
				next, what := len(rest), ""
				for _, m := range []struct {
					re   *regexp.Regexp
					what string
				}{{serveWithAuth, "serve"}, {clientCommand, "client"}, {sendsToken, "token"}} {
					if loc := m.re.FindStringIndex(rest); loc != nil && loc[0] < next {
						next, what = loc[0], m.what
					}
				}
				if what == "" {
					break
				}
				switch what {
				case "serve":
					auth = true
				case "token":
					token = true
				case "client":
					if auth && !token {
						line := b.line + 1 + strings.Count(b.text[:pos+next], "\n")
						t.Errorf("%s:%d: a client command after a server with --auth-file, and no FENCE_AUTH_TOKEN before it: it would be refused unauthorized", b.file, line)
					}
				}
				pos += next + 1
			}
		}
	}
}
