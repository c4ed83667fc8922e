package charttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/strvals"
)

// shellWords splits a command line as sh does for the quoting the README
// uses: words separated by blanks, '...' and "..." quoted.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestREADME_InstallCommands renders the chart with the values of every
// helm install and helm upgrade in the chart's README and in the cluster
// guide (an upgrade with --reuse-values on top of the install before it),
// so that the commands they show name values that exist and work.
func TestREADME_InstallCommands(t *testing.T) {
	for _, doc := range []string{
		filepath.Join(chartDir, "README.md"),
		filepath.Join("..", "..", "..", "docs", "guides", "cluster.md"),
	} {
		t.Run(filepath.Base(doc), func(t *testing.T) {
			b, err := os.ReadFile(doc)
			if err != nil {
				t.Fatal(err)
			}
			if n := renderCommands(t, string(b)); n == 0 {
				t.Error("no helm install command")
			}
		})
	}
}

// renderCommands renders the chart for each helm install and helm upgrade
// in text and returns how many it found.
func renderCommands(t *testing.T, text string) int {
	t.Helper()
	text = strings.ReplaceAll(text, "\\\n", " ")
	var last map[string]any
	n := 0
	for _, line := range strings.Split(text, "\n") {
		words := shellWords(strings.TrimSpace(line))
		if len(words) < 3 || words[0] != "helm" || (words[1] != "install" && words[1] != "upgrade") {
			continue
		}
		n++
		vals := map[string]any{}
		if words[1] == "upgrade" {
			if last == nil {
				t.Fatalf("%q: an upgrade before any install", line)
			}
			vals = deepCopy(t, last)
		}
		for i := 0; i < len(words); i++ {
			if words[i] == "--set" && i+1 < len(words) {
				if err := strvals.ParseInto(words[i+1], vals); err != nil {
					t.Fatalf("%q: --set %s: %v", line, words[i+1], err)
				}
				i++
			}
		}
		t.Logf("%s: %v", words[1], vals)
		r := render(t, vals)
		if !r.has("StatefulSet", "fence") {
			t.Errorf("%q: no StatefulSet fence: %v", line, r.kinds())
		}
		if words[1] == "install" {
			last = vals
		}
	}
	return n
}
