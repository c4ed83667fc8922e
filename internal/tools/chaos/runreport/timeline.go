package runreport

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fence-lock/fence/internal/tools/chaos"
	"github.com/fence-lock/fence/internal/tools/chaos/history"
	"github.com/fence-lock/fence/internal/tools/report"
)

// opMark returns how op is drawn, and whether it is drawn at all: grants,
// writes and txns always (a sample of them), and every operation that a
// violation names.
func opMark(op *history.Op, named bool) (report.Mark, bool) {
	m := report.Mark{ID: opID(op.ID), Row: clientName(op.Client), Start: time.Duration(op.Call), End: time.Duration(op.Return), Title: opTitle(op)}
	if op.Outcome == history.Unknown || op.Return == 0 {
		m.End = m.Start
	}
	switch {
	case op.Kind == history.KindAcquire && op.Outcome == history.OK:
		m.Kind, m.Label = report.MarkGrant, strconv.FormatUint(op.Token, 10)
	case op.Mutates() && op.Outcome == history.OK:
		m.Kind = report.MarkAccepted
	case op.Mutates() && op.Outcome == history.Fenced:
		m.Kind, m.Keep = report.MarkFenced, true
	case (op.Mutates() || op.Kind == history.KindAcquire) && op.Outcome == history.Unknown:
		m.Kind = report.MarkUnknown
	case !named:
		return m, false // reads, releases, refusals: counted, not drawn
	}
	if named {
		m.Keep, m.Highlight = true, true
	}
	return m, true
}

// opID is the id of an operation's mark in the timeline.
func opID(id int64) string { return "op-" + strconv.FormatInt(id, 10) }

// clientName is the row of a client's operations.
func clientName(c int) string {
	if c < 0 {
		return "harness"
	}
	return "client " + strconv.Itoa(c)
}

// opTitle describes op, for its tooltip.
func opTitle(op *history.Op) string {
	var b strings.Builder
	fmt.Fprintf(&b, "op %d · %s · %s", op.ID, clientName(op.Client), op.Kind)
	switch op.Kind {
	case history.KindAcquire:
		fmt.Fprintf(&b, " %s", op.Resource)
	case history.KindRelease:
		fmt.Fprintf(&b, " %s with token %d", op.Resource, op.Token)
	case history.KindRead:
		fmt.Fprintf(&b, " %s/%s", op.Resource, op.Key)
	case history.KindWrite:
		fmt.Fprintf(&b, " %s/%s=%s with token %d", op.Resource, op.Key, clip(op.Value), op.Token)
	case history.KindTxn:
		for i, w := range op.Writes {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(&b, "%s %s/%s=%s with token %d", sep, w.Resource, w.Key, clip(w.Value), w.Token)
		}
	}
	fmt.Fprintf(&b, " → %s", op.Outcome)
	switch {
	case op.Kind == history.KindAcquire && op.Outcome == history.OK:
		fmt.Fprintf(&b, ", token %d", op.Token)
	case op.Kind == history.KindRead && op.Outcome == history.OK:
		fmt.Fprintf(&b, ", %s (rev %d)", clip(op.Value), op.Rev)
	case op.Mutates() && op.Outcome == history.OK:
		fmt.Fprintf(&b, ", rev %d", op.Rev)
	}
	fmt.Fprintf(&b, " · %s", seconds(op.Call))
	if op.Return != 0 && op.Outcome != history.Unknown {
		fmt.Fprintf(&b, " → %s (%s)", seconds(op.Return), time.Duration(op.Return-op.Call).Round(time.Microsecond*100))
	}
	if op.Error != "" {
		fmt.Fprintf(&b, " · %s", clipTo(op.Error, reportErrorMax))
	}
	return b.String()
}

// clip shortens a value for a tooltip.
func clip(s string) string { return clipTo(s, reportValueMax) }

// clipTo shortens s to n bytes and an ellipsis, if it is longer.
func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// seconds formats ns since the run's start.
func seconds(ns int64) string { return strconv.FormatFloat(float64(ns)/1e9, 'f', 3, 64) + "s" }

// faultSpan returns how a fault is drawn: a pause on the paused client's
// row in every resource; the others across every resource.
func faultSpan(i int, f history.Fault) report.Span {
	s := report.Span{ID: "fault-" + strconv.Itoa(i+1), Start: time.Duration(f.Start), End: time.Duration(f.End), Label: f.Kind, Title: faultTitle(i, f)}
	switch f.Kind {
	case chaos.FaultPause:
		s.Kind, s.Row = report.SpanPause, clientName(f.Client)
	case chaos.FaultLeaderPause:
		s.Kind = report.SpanPause
	case chaos.FaultKill, chaos.FaultBitflip, chaos.FaultLoseUnsynced, chaos.FaultRestore, chaos.FaultLeaderKill, chaos.FaultEngineKill:
		s.Kind = report.SpanKill
	case chaos.FaultNet, chaos.FaultEngineNet, chaos.FaultClockSkew:
		s.Kind = report.SpanNet
	}
	return s
}

// faultTitle describes the ith fault, for its tooltip.
func faultTitle(i int, f history.Fault) string {
	t := fmt.Sprintf("fault %d · %s", i+1, f.Kind)
	if f.Client >= 0 {
		t += " · " + clientName(f.Client)
	}
	t += " · " + seconds(f.Start)
	if f.End > f.Start {
		t += fmt.Sprintf(" → %s (%s)", seconds(f.End), time.Duration(f.End-f.Start).Round(time.Millisecond))
	}
	if f.Detail != "" {
		t += " · " + f.Detail
	}
	return t
}

// drawTimeline draws the history's grants, writes and the operations in
// named on the lanes, and the run's faults across them. It sets
// *fencedSampled to the number of fenced writes it had no room to keep out
// of the sample.
func drawTimeline(in Input, named map[int64]bool, lanes map[string]bool, fencedSampled *int) (*report.Timeline, error) {
	tl := &report.Timeline{}
	// The fenced writes are kept out of the sample until they would leave
	// no room for the operations that violations name (a txn's in two
	// lanes); those after that are sampled as the others.
	budget, kept := report.DefaultMaxKept-2*len(named), 0
	sampledFenced := 0
	err := readEntries(in.Result.History, func(e *history.Entry) {
		if e.IsFault {
			return
		}
		op := &e.Op
		m, ok := opMark(op, named[op.ID])
		if !ok {
			return
		}
		var rs []string
		for _, r := range op.Resources() {
			if lanes[r] {
				rs = append(rs, r)
			}
		}
		if m.Keep && !m.Highlight {
			if kept+len(rs) > budget {
				m.Keep = false
				sampledFenced++
			} else {
				kept += len(rs)
			}
		}
		for _, r := range rs {
			tl.Add(r, m)
		}
	})
	if err != nil {
		return nil, err
	}
	*fencedSampled = sampledFenced
	for i, f := range in.Result.Faults {
		tl.AddSpan(faultSpan(i, f))
	}
	return tl, nil
}

// timelineText explains the timeline.
func timelineText(in Input) string {
	t := "One lane per resource, one row per client; time in seconds since the run started. " +
		"A blue bar is a lock granted, with its token; a green dot a write accepted; a red cross a write fenced (its token was stale); " +
		"a hollow dot an operation whose outcome is unknown (a timeout, a reset connection). " +
		"An amber band is a client stopped with SIGSTOP, on its own row: its next write carries a token that a newer holder has superseded. " +
		"Kills and network faults run across every resource. Hover over a mark for the operation."
	if in.Config.Cluster != "" {
		t += " With a cluster, an amber band across every resource is the leading fence server stopped (leader-pause); leader-kill and engine-kill are kills, engine-net is a network fault between the servers and the engine."
	}
	if in.Config.Guard != "" {
		t += " Through the guard, a fence rises when a write is accepted, not when a token is granted: a stale holder's write is accepted until a newer holder has written."
	}
	return t
}
