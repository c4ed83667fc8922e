package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progressLine writes the live progress of a long run (fence bench, fence
// chaos). On a terminal it rewrites one line with '\r'; elsewhere it writes
// one line per update, or per plainEvery.
type progressLine struct {
	w        io.Writer
	terminal bool
	width    int // of the longest line shown, to blank it out

	// plainEvery, when not on a terminal, is the least time between two
	// lines: the updates in between are dropped, so that a log gets a line
	// every plainEvery rather than one per tick. Zero writes every update.
	plainEvery time.Duration
	now        func() time.Time // nil means time.Now
	last       time.Time        // when the last plain line was written
}

// show writes text as the progress line.
func (p *progressLine) show(text string) {
	if !p.terminal {
		if p.plainEvery > 0 {
			now := time.Now
			if p.now != nil {
				now = p.now
			}
			t := now()
			if !p.last.IsZero() && t.Sub(p.last) < p.plainEvery {
				return
			}
			p.last = t
		}
		fmt.Fprintln(p.w, text)
		return
	}
	pad := max(p.width-len(text), 0)
	p.width = max(p.width, len(text))
	fmt.Fprintf(p.w, "\r%s%s", text, strings.Repeat(" ", pad))
}

// finish blanks the progress line out, so that the report starts clean.
func (p *progressLine) finish() {
	if p == nil || !p.terminal || p.width == 0 {
		return
	}
	fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
