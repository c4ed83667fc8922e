package demo

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// WriteText writes the result as people read it: for each run, a timeline
// like a sequence diagram in text, one line per step with its time offset,
// the actor, an arrow to the participant it called, the request and the
// answer; then the run's result and a conclusion.
func (r Result) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	server := "fence server at " + r.Addr
	if r.Embedded {
		server = "embedded fence server at " + r.Addr + " (temporary directory, removed afterwards)"
	}
	fmt.Fprintf(bw, "fence demo: a stale lock holder, without and with fencing\n")
	fmt.Fprintf(bw, "  locks: %s\n", server)
	fmt.Fprintf(bw, "  A acquires with ttl %s, then pauses for %s without renewing; B acquires next.\n", r.TTL, r.Pause)

	arrowWidth := 0
	for _, rr := range []RunResult{r.Unsafe, r.Fenced} {
		for _, e := range rr.Events {
			if !e.IsNote() {
				arrowWidth = max(arrowWidth, utf8.RuneCountInString(arrow(e.Message)))
			}
		}
	}
	for i, rr := range []RunResult{r.Unsafe, r.Fenced} {
		if rr.Name == "" {
			continue // the run did not happen
		}
		fmt.Fprintf(bw, "\nRun %d: %s\n", i+1, runTitle(rr))
		fmt.Fprintf(bw, "  resource %s, key %s, storage at %s\n\n", rr.Resource, rr.Key, rr.StoreAddr)
		for _, e := range rr.Events {
			fmt.Fprintf(bw, "  +%.3fs  %-5s  ", e.At.Seconds(), e.Actor)
			if e.IsNote() {
				fmt.Fprintf(bw, "%s%s\n", noteMark(e.Kind), e.Message)
				continue
			}
			a := arrow(e.Message)
			pad := strings.Repeat(" ", arrowWidth-utf8.RuneCountInString(a))
			fmt.Fprintf(bw, "%s%s  %-7s  %s\n", a, pad, e.To, e.Reply)
		}
		if rr.Outcome != "" {
			fmt.Fprintf(bw, "  result: %s = %s  %s\n", rr.Key, finalText(rr), verdict(rr))
		}
	}
	fmt.Fprintf(bw, "\n%s\n", conclusion(r))
	return bw.Flush()
}

// arrow draws a request as an arrow with its message on it.
func arrow(message string) string { return "──" + message + "──▶" }

// noteMark is the symbol before a note.
func noteMark(k Kind) string {
	switch k {
	case KindPause:
		return "⏸ "
	case KindResume:
		return "▶ "
	case KindExpire:
		return "⌛ "
	}
	return ""
}

// runTitle names a run's storage.
func runTitle(rr RunResult) string {
	if rr.Name == RunUnsafe {
		return "a last-writer-wins store, which ignores the Fencing-Token"
	}
	return "fence storage, which rejects tokens lower than the last fence"
}

// finalText quotes the final value, or says there is none.
func finalText(rr RunResult) string {
	if !rr.FinalFound {
		return "(no value)"
	}
	return fmt.Sprintf("%q", rr.Final)
}

// verdict judges a run's outcome in view of what the run should show.
func verdict(rr RunResult) string {
	switch {
	case rr.Outcome == OutcomeStaleRejected:
		return "✔ the stale write was rejected; B's value stands"
	case rr.Outcome == OutcomeStaleWon && rr.Name == RunUnsafe:
		return "✘ the stale write won: B's update is lost (as expected without fencing)"
	case rr.Outcome == OutcomeStaleWon:
		return "✘ FAILED: the stale write won"
	case rr.Name == RunUnsafe:
		return "(the stale write did not win this time, a matter of timing: " + rr.Summary + ")"
	}
	return "✘ FAILED: " + rr.Summary
}

// conclusion sums both runs up.
func conclusion(r Result) string {
	switch {
	case r.Fenced.Outcome == "":
		return "The demo did not finish."
	case r.OK && r.Unsafe.Outcome == OutcomeStaleWon:
		return "Same locks, same clients, same pause: only the storage differed. A lease told A it probably\n" +
			"held the lock; only the storage checking the token could prove it no longer did."
	case r.OK:
		return "Fencing held: the storage rejected the stale holder's write."
	}
	return "Fencing did NOT hold in the fenced run: " + r.Fenced.Summary
}

// mermaidIDs are the participants' ids in the Mermaid diagram.
var mermaidIDs = map[string]string{ActorA: "A", ActorB: "B", ActorLock: "Lock", ActorStore: "Store"}

// WriteMermaid writes the result as a Mermaid sequenceDiagram: participants
// A, B, Lock (shown as fence) and Store, each run in a box of its own, with
// notes for the pause, the expiry and the result, and the actual tokens and
// status codes.
func (r Result) WriteMermaid(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "sequenceDiagram")
	fmt.Fprintln(bw, "    participant A")
	fmt.Fprintln(bw, "    participant B")
	fmt.Fprintln(bw, "    participant Lock as fence")
	fmt.Fprintln(bw, "    participant Store")
	colors := map[string]string{RunUnsafe: "rgb(255, 236, 236)", RunFenced: "rgb(232, 248, 232)"}
	for i, rr := range []RunResult{r.Unsafe, r.Fenced} {
		if rr.Name == "" {
			continue
		}
		fmt.Fprintf(bw, "    rect %s\n", colors[rr.Name])
		fmt.Fprintf(bw, "    Note over A,Store: Run %d - %s (%s)\n", i+1, mermaidText(runTitle(rr)), mermaidText(rr.Resource))
		for _, e := range rr.Events {
			from := mermaidIDs[e.Actor]
			if e.IsNote() {
				fmt.Fprintf(bw, "    Note over %s: +%.3fs %s\n", from, e.At.Seconds(), mermaidText(e.Message))
				continue
			}
			to := mermaidIDs[e.To]
			msg := e.Message
			if e.Kind == KindAcquire {
				msg += " " + rr.Resource
			}
			fmt.Fprintf(bw, "    %s->>%s: +%.3fs %s\n", from, to, e.At.Seconds(), mermaidText(msg))
			fmt.Fprintf(bw, "    %s-->>%s: %s\n", to, from, mermaidText(e.Reply))
		}
		if rr.Outcome != "" {
			final := "(no value)"
			if rr.FinalFound {
				final = rr.Final
			}
			fmt.Fprintf(bw, "    Note over A,Store: %s = %s - %s\n", rr.Key, mermaidText(final), mermaidText(verdict(rr)))
		}
		fmt.Fprintln(bw, "    end")
	}
	return bw.Flush()
}

// mermaidText makes s safe as a Mermaid message or note: no line breaks, and
// none of the characters Mermaid reads as syntax there (';' ends a
// statement, '#' starts an entity, '"' is safer as one).
func mermaidText(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ", ";", ",", "#", "", `"`, "#quot;").Replace(s)
}
