package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fence-lock/fence/internal/tools/chaos"
	"github.com/fence-lock/fence/internal/tools/chaos/check"
)

// chaosProgress shows the progress of fence chaos on stderr (--progress):
// the run's, then the check's. The harness's log goes through it too, so
// that on a terminal a log line does not land inside the progress line:
// the line is blanked out, the log line written, and the line shown again
// under it.
type chaosProgress struct {
	w     io.Writer
	line  *progressLine // nil: no progress shown
	every time.Duration // between two updates: 1s on a terminal, 5s elsewhere
	kinds []string      // the run's fault kinds, in the order of --faults

	mu     sync.Mutex     // guards the fields below, and writes to w
	last   string         // the text shown, to show again under a log line
	status check.Progress // the check's, from Options.Progress
}

// newChaosProgress returns the progress of a run on w, shown if show.
func newChaosProgress(w io.Writer, show bool, kinds []string) *chaosProgress {
	p := &chaosProgress{w: w, every: 5 * time.Second, kinds: kinds}
	if show {
		p.line = &progressLine{w: w, terminal: isTerminal(w)}
		if p.line.terminal {
			p.every = time.Second
		}
	}
	return p
}

// Write writes a log line, under the progress line on a terminal.
func (p *chaosProgress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.line == nil || !p.line.terminal || p.last == "" {
		return p.w.Write(b)
	}
	p.line.finish()
	n, err := p.w.Write(b)
	p.line.show(p.last)
	return n, err
}

// show shows text as the progress line.
func (p *chaosProgress) show(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = text
	p.line.show(text)
}

// finish blanks the progress line out, for the lines that follow.
func (p *chaosProgress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.line.finish()
	p.last = ""
}

// run returns chaos.Config.Progress for a run of duration d: nil when no
// progress is shown.
func (p *chaosProgress) run(d time.Duration) func(chaos.Progress) {
	if p.line == nil {
		return nil
	}
	return func(s chaos.Progress) { p.show(runProgress(s, d, p.kinds)) }
}

// runProgress is the progress line of a run of duration d whose faults are
// of kinds.
func runProgress(s chaos.Progress, d time.Duration, kinds []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "fence chaos: %.1fs of %s", s.Elapsed.Seconds(), d)
	if s.Remaining > 0 {
		fmt.Fprintf(&b, " (%.1fs left)", s.Remaining.Seconds())
	} else {
		b.WriteString(" (the workload is over)")
	}
	fmt.Fprintf(&b, "  %d ops  %.0f ops/s  errors %d  fenced %d  faults", s.Ops, s.Rate, s.Errors, s.Fenced)
	if len(kinds) == 0 {
		b.WriteString(" none")
	}
	for _, k := range kinds {
		fmt.Fprintf(&b, " %s %d", k, s.Faults[k])
	}
	return b.String()
}

// check shows the check's progress, which checked receives, from began
// until the function it returns is called, which blanks the line out.
func (p *chaosProgress) check(began time.Time) (stop func()) {
	if p.line == nil {
		return func() {}
	}
	stopC, doneC := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(doneC)
		tick := time.NewTicker(p.every)
		defer tick.Stop()
		for {
			p.mu.Lock()
			status := p.status
			p.mu.Unlock()
			p.show(checkProgress(status, time.Since(began)))
			select {
			case <-tick.C:
			case <-stopC:
				return
			}
		}
	}()
	return func() {
		close(stopC)
		<-doneC
		p.finish()
	}
}

// checked is check.Options.Progress: it keeps where the check is, for the
// next update, and shows it at once on a terminal, where that costs
// nothing.
func (p *chaosProgress) checked(s check.Progress) {
	p.mu.Lock()
	p.status = s
	p.mu.Unlock()
	if p.line != nil && p.line.terminal {
		p.show(checkProgress(s, 0))
	}
}

// checkProgress is the progress line of the check, elapsed after it began
// (0: not said).
func checkProgress(s check.Progress, elapsed time.Duration) string {
	var text string
	switch {
	case s.Total == 0:
		text = fmt.Sprintf("fence chaos: checking: reading the history (%d ops so far)", s.Ops)
	case s.Resource != "":
		text = fmt.Sprintf("fence chaos: checking %s (%d of %d resources, %d ops)", s.Resource, s.Done+1, s.Total, s.Ops)
	default:
		text = fmt.Sprintf("fence chaos: checked %d of %d resources, summing up", s.Done, s.Total)
	}
	if elapsed > 0 {
		text += fmt.Sprintf("  %.1fs", elapsed.Seconds())
	}
	return text
}

// pendingFile is a file written under a temporary name in the directory
// of its path, and renamed to it once complete, so that a run that fails
// leaves no half-written report, and one that cannot write it fails
// before it starts.
type pendingFile struct {
	*os.File
	path string
	done bool
}

// createPending creates the temporary file of path.
func createPending(path string) (*pendingFile, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s is a directory", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, err
	}
	return &pendingFile{File: f, path: path}, nil
}

// commit closes the file and renames it to its path.
func (f *pendingFile) commit() error {
	f.done = true
	err := f.Chmod(0o644) // a report is for sharing, unlike CreateTemp's 0600
	err = errors.Join(err, f.Close())
	if err == nil {
		err = os.Rename(f.Name(), f.path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// abandon removes the file, unless it was committed.
func (f *pendingFile) abandon() {
	if f.done {
		return
	}
	f.done = true
	f.Close()
	os.Remove(f.Name())
}
