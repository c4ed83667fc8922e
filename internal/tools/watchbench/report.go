package main

import (
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"time"
)

// print writes r, and with verbose its delay by second.
func (r *result) print(w io.Writer, verbose bool) {
	fmt.Fprintf(w, "round %d, %d watchers (the server's open-file limit: %d; open with the watchers connected: %d)\n", r.round, r.watchers, r.serverFiles, r.serverOpen)
	dr := r.drive
	fmt.Fprintf(w, "  events   %.1f/s achieved of %.1f/s scheduled (%d in %s); %d changes, %d failed, %d skipped (not started by the end); answer p50 %s p99 %s; started at most %s late\n",
		dr.eventRate(), dr.scheduledRate, dr.events, round(dr.elapsed), dr.ops, dr.errs, dr.skipped,
		round(dr.latency.Quantile(0.5)), round(dr.latency.Quantile(0.99)), round(dr.maxLag))
	if dr.firstErr != nil {
		fmt.Fprintf(w, "           first failure: %v\n", dr.firstErr)
	}
	if r.watchers == 0 {
		fmt.Fprintf(w, "  (no watcher: the driver and the server alone)\n")
	} else {
		r.printWatchers(w)
	}
	fmt.Fprintf(w, "  memory   server VmRSS %s idle, %s with the watchers connected, %s at the end; VmHWM %s\n",
		mib(r.memIdle.rss), mib(r.memConnected.rss), mib(r.memEnd.rss), mib(r.memEnd.hwm))
	fmt.Fprintf(w, "  CPU      server %.0f ms/s, watchbench %.0f ms/s, other processes %.0f ms/s (of %d ms/s: %d CPUs); the server's, run and drain, per delivery: %s\n",
		r.serverCPU*1000, r.ownCPU*1000, r.otherCPU*1000, runtime.NumCPU()*1000, runtime.NumCPU(), round(r.perDelivery))
	if r.queuesErr != nil {
		fmt.Fprintf(w, "  queues   mid-run: %v\n", r.queuesErr)
	} else {
		q := r.queues
		fmt.Fprintf(w, "  queues   mid-run, over %d connections: server send %s, receive %s; watchers' (and driver's) receive %s, send %s\n",
			q.conns, mib(q.serverSend), mib(q.serverRecv), mib(q.watcherRecv), mib(q.watcherSend))
	}
	for _, msg := range slices.Sorted(maps.Keys(r.logWarnings)) {
		fmt.Fprintf(w, "  log      %d× %q\n", r.logWarnings[msg], msg)
	}
	if verbose {
		for i, s := range r.timeline {
			if s.n == 0 {
				continue
			}
			fmt.Fprintf(w, "  second %2d  mean %s max %s (%d deliveries to the first %d watchers)\n",
				i, round(s.sum/time.Duration(s.n)), round(s.max), s.n, min(timelineSize, r.watchers))
		}
	}
}

// printWatchers writes what the watchers saw.
func (r *result) printWatchers(w io.Writer) {
	fmt.Fprintf(w, "  connect  %d streams in %s (%.0f/s); handshake p50 %s p99 %s max %s; listen overflows %d, drops %d (whole machine)\n",
		r.watchers, round(r.connect), float64(r.watchers)/r.connect.Seconds(),
		round(r.connects.Quantile(0.5)), round(r.connects.Quantile(0.99)), round(r.connects.Max()), r.overflows, r.drops)
	caught := fmt.Sprintf("every watcher had every event %s after the last answer", round(r.caughtUp))
	if r.behind > 0 {
		caught = fmt.Sprintf("%d watchers still behind %s after the last answer", r.behind, round(r.caughtUp))
	}
	fmt.Fprintf(w, "  delay    p50 %s p99 %s max %s over %d deliveries (%.3f%% of %d); %s; the server sent %.0f (fence_watch_events_sent_total)\n",
		round(r.delays.Quantile(0.5)), round(r.delays.Quantile(0.99)), round(r.delays.Max()),
		r.st.delivered, r.deliveredPct(), r.expected, caught, r.sent)
	st := &r.st
	fmt.Fprintf(w, "  loss     %d streams ended (%d by the server's end of the body; the server counted %.0f cut-offs), %d reconnected, %d failed reconnections; %d lost events announcing %d events lost; %d events skipped silently; %d undelivered at the end; %d duplicates\n",
		st.ends, st.endsEOF, r.cutoffs, st.reconnects, st.connectErrs, st.lostSignals, st.lostEvents, st.silent, st.undelivered, st.dups)
	if st.firstEnd != "" {
		fmt.Fprintf(w, "           first other end: %s\n", st.firstEnd)
	}
	if r.extra > 0 || st.noTime > 0 {
		fmt.Fprintf(w, "           %d events past the driver's count (a change that failed took effect); %d events without a time\n", r.extra, st.noTime)
	}
}

func (r *result) deliveredPct() float64 {
	if r.expected == 0 {
		return 0
	}
	return 100 * float64(r.st.delivered) / float64(r.expected)
}

// column is one figure of the table.
type column struct {
	head, format string
	get          func(*result) float64
}

var columns = []column{
	{"connect s", "%9.2f", func(r *result) float64 { return r.connect.Seconds() }},
	{"events/s", "%9.1f", func(r *result) float64 { return r.drive.eventRate() }},
	{"p50 ms", "%9.2f", func(r *result) float64 { return ms(r.delays.Quantile(0.5)) }},
	{"p99 ms", "%9.2f", func(r *result) float64 { return ms(r.delays.Quantile(0.99)) }},
	{"max ms", "%9.1f", func(r *result) float64 { return ms(r.delays.Max()) }},
	{"deliv %", "%9.3f", (*result).deliveredPct},
	{"ends", "%7.0f", func(r *result) float64 { return float64(r.st.ends) }},
	{"lost", "%9.0f", func(r *result) float64 { return float64(r.st.lostEvents) }},
	{"silent", "%7.0f", func(r *result) float64 { return float64(r.st.silent) }},
	{"undeliv", "%9.0f", func(r *result) float64 { return float64(r.st.undelivered) }},
	{"RSS0 MiB", "%9.1f", func(r *result) float64 { return float64(r.memIdle.rss) / (1 << 20) }},
	{"RSSn MiB", "%9.1f", func(r *result) float64 { return float64(r.memConnected.rss) / (1 << 20) }},
	{"HWM MiB", "%9.1f", func(r *result) float64 { return float64(r.memEnd.hwm) / (1 << 20) }},
	{"srv ms/s", "%9.0f", func(r *result) float64 { return r.serverCPU * 1000 }},
	{"wb ms/s", "%8.0f", func(r *result) float64 { return r.ownCPU * 1000 }},
	{"oth ms/s", "%9.0f", func(r *result) float64 { return r.otherCPU * 1000 }},
	{"srv us/dlv", "%10.2f", func(r *result) float64 { return float64(r.perDelivery) / float64(time.Microsecond) }},
}

// printTable writes every measurement as a row, then each watcher count's
// medians.
func printTable(w io.Writer, counts []int, all []*result) {
	fmt.Fprintf(w, "\n%-7s %8s", "round", "watchers")
	for _, c := range columns {
		fmt.Fprintf(w, " %*s", len(fmt.Sprintf(c.format, 0.0)), c.head)
	}
	fmt.Fprintln(w)
	row := func(label string, n int, get func(column) float64) {
		fmt.Fprintf(w, "%-7s %8d", label, n)
		for _, c := range columns {
			fmt.Fprintf(w, " "+c.format, get(c))
		}
		fmt.Fprintln(w)
	}
	for _, r := range all {
		row(fmt.Sprint(r.round), r.watchers, func(c column) float64 { return c.get(r) })
	}
	for _, n := range counts {
		var rs []*result
		for _, r := range all {
			if r.watchers == n {
				rs = append(rs, r)
			}
		}
		row("median", n, func(c column) float64 {
			vs := make([]float64, len(rs))
			for i, r := range rs {
				vs[i] = c.get(r)
			}
			slices.Sort(vs)
			return vs[len(vs)/2]
		})
	}
	fmt.Fprintln(w, "delays from the event's server time to the watcher's read, over all watcher × event deliveries; deliv % of watchers × events;")
	fmt.Fprintln(w, "ends: streams that ended (reconnected with Last-Event-ID); lost: events announced lost; undeliv: not read when -drain ran out;")
	fmt.Fprintln(w, "RSS0/RSSn: server VmRSS idle / with the watchers connected; HWM: server VmHWM at the end; CPU per second of the run (wb: this process,")
	fmt.Fprintln(w, "oth: the rest of the machine); srv us/dlv: the server's CPU from the run's start to the drain's end per delivery")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// round rounds d for printing: to 3 significant digits or so.
func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(time.Microsecond)
	}
}

func mib(b int64) string {
	if b < 1<<20 {
		return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}
