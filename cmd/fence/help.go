package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

const helpExamples = `  fence help
  fence help lock
  fence lock --help   # the same
`

// helpCmd is fence help [COMMAND]: the usage text, or COMMAND's help, on
// stdout.
func helpCmd(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("help", "fence help [COMMAND]", helpExamples, std.out)
	positional, _, _, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch len(positional) {
	case 0:
		fmt.Fprint(std.out, usage())
		return nil
	case 1:
	default:
		return wantArgs("help", positional, "[COMMAND]")
	}
	name := positional[0]
	c, ok := lookup(name)
	if !ok {
		return &usageError{errors.New(strings.TrimPrefix(unknownCommand(name), "fence: "))}
	}
	return c.run(ctx, []string{"--help"}, std)
}

// unknownCommand is the message for a command line whose first word is not
// a command.
func unknownCommand(name string) string {
	if strings.HasPrefix(name, "-") {
		return fmt.Sprintf("fence: %s: the command comes first, then its flags: fence COMMAND [flags]; run 'fence help' for the commands", name)
	}
	var names []string
	for _, c := range commands {
		if !c.hidden {
			names = append(names, c.name)
		}
	}
	if s := suggest(name, names); s != "" {
		return fmt.Sprintf("fence: unknown command %q; did you mean %s?", name, s)
	}
	return fmt.Sprintf("fence: unknown command %q; run 'fence help' for the commands", name)
}

// suggest returns the candidate closest to word, if it is close enough to
// be a typo of it (at most a third of its letters wrong, at least one
// allowed), else "".
func suggest(word string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		d := editDistance(strings.ToLower(word), c)
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" || bestD > max(1, min(len(word), len(best))/3) || bestD >= len(best) {
		return ""
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b:
// the number of insertions, deletions, substitutions and transpositions of
// adjacent letters that turn one into the other.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// commandFlags returns the flag set of command name, as the command builds
// it, by asking it for its help with stdout a flagCapture; nil if it has
// none.
func commandFlags(name string) *flag.FlagSet {
	c, ok := lookup(name)
	if !ok {
		return nil
	}
	capture := &flagCapture{}
	c.run(context.Background(), []string{"--help"}, stdio{in: strings.NewReader(""), out: capture, err: io.Discard})
	return capture.fs
}
