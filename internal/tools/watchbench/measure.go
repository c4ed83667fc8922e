package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fence-lock/fence/internal/tools/bench"
	"github.com/fence-lock/fence/internal/tools/testserver"
)

// result is one measurement.
type result struct {
	round, watchers int
	serverFiles     uint64 // the server's open-file limit
	serverOpen      int    // descriptors it had open with the watchers connected

	connect          time.Duration    // to connect them all
	connects         *bench.Histogram // each handshake, reconnections included
	overflows, drops int64            // the kernel's listen-queue counters, while connecting

	drive       *driveResult
	base, final int64 // the sequence numbers of the events before the run, and of its last
	extra       int64 // events some watcher read past final: published but not counted by the driver

	delays   *bench.Histogram
	st       watchStats
	expected int64         // deliveries: watchers × events of the run
	caughtUp time.Duration // from the driver's last answer until every watcher had every event
	behind   int           // watchers still behind when -drain ran out
	timeline []delaySum

	memIdle, memConnected, memEnd memory
	serverCPU, ownCPU, otherCPU   float64       // CPU seconds per second of the run
	perDelivery                   time.Duration // the server's CPU from the run's start to the drain's end, per delivery
	queues                        tcpQueues
	queuesErr                     error
	cutoffs, sent                 float64 // fence_watch_cutoffs_total, fence_watch_events_sent_total, during the run and drain
	logWarnings                   map[string]int
}

// measure starts a server, connects n watchers, runs the driver and
// returns the figures.
func measure(cfg config, dir string, round, n int) (*result, error) {
	mdir, err := os.MkdirTemp(dir, fmt.Sprintf("r%d-w%d-", round, n))
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(mdir)
	srv, err := startServer(cfg.fenceBin, mdir)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	r := &result{round: round, watchers: n}
	if r.serverFiles, err = fileLimit(srv.pid); err != nil {
		return nil, err
	}
	if need := uint64(n + fdSlack); r.serverFiles < need {
		return nil, fmt.Errorf("the server's open-file limit is %d: %d watchers need about %d; raise the hard limit (ulimit -Hn) before running watchbench", r.serverFiles, n, need)
	}
	d, err := newDriver(srv.url, cfg.resources)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if r.base, err = d.warmUp(ctx); err != nil {
		return nil, err
	}
	time.Sleep(500 * time.Millisecond)
	if r.memIdle, err = readMemory(srv.pid); err != nil {
		return nil, err
	}

	ws := newWatchSet(srv.addr, r.base, cfg.connectParallel, cfg.dur)
	defer ws.stop()
	o0, d0, err := listenCounters()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := ws.connect(n); err != nil {
		return nil, err
	}
	r.connect = time.Since(start)
	o1, d1, err := listenCounters()
	if err != nil {
		return nil, err
	}
	r.overflows, r.drops = o1-o0, d1-d0
	time.Sleep(time.Second)
	if r.memConnected, err = readMemory(srv.pid); err != nil {
		return nil, err
	}
	if r.serverOpen, err = openFiles(srv.pid); err != nil {
		return nil, err
	}
	m0, err := testserver.Metrics(srv.url)
	if err != nil {
		return nil, err
	}
	if open := m0["fence_watch_streams"]; open != float64(n) {
		return nil, fmt.Errorf("the server has %v watch streams open (fence_watch_streams), not the %d connected", open, n)
	}

	srv0, err := processCPU(srv.pid)
	if err != nil {
		return nil, err
	}
	own0 := ownCPU()
	all0, err := machineCPU()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	ws.start.Store(t0.UnixNano())
	queuesC := make(chan struct{})
	go func() {
		defer close(queuesC)
		time.Sleep(cfg.dur / 2)
		r.queues, r.queuesErr = readTCPQueues(srv.port)
	}()
	r.drive = d.run(ctx, cfg.rate, cfg.dur)
	t1 := time.Now()
	srv1, err := processCPU(srv.pid)
	if err != nil {
		return nil, err
	}
	own1 := ownCPU()
	all1, err := machineCPU()
	if err != nil {
		return nil, err
	}
	<-queuesC
	s := t1.Sub(t0).Seconds()
	r.serverCPU, r.ownCPU = (srv1-srv0).Seconds()/s, (own1-own0).Seconds()/s
	r.otherCPU = max(0, (all1-all0).Seconds()/s-r.serverCPU-r.ownCPU)
	if r.memEnd, err = readMemory(srv.pid); err != nil {
		return nil, err
	}

	r.final = r.base + r.drive.events
	r.expected = int64(n) * r.drive.events
	for {
		if ws.caughtUp(r.final) == n {
			r.caughtUp = time.Since(t1)
			break
		}
		if time.Since(t1) > cfg.drain {
			r.behind = n - ws.caughtUp(r.final)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv2, err := processCPU(srv.pid)
	if err != nil {
		return nil, err
	}
	m1, err := testserver.Metrics(srv.url)
	if err != nil {
		return nil, err
	}
	r.cutoffs = m1["fence_watch_cutoffs_total"] - m0["fence_watch_cutoffs_total"]
	r.sent = m1["fence_watch_events_sent_total"] - m0["fence_watch_events_sent_total"]
	ws.stop()
	if srv.exited() {
		return nil, fmt.Errorf("fence serve exited during the measurement; its log:\n%s", tail(srv.log, 20))
	}
	for _, w := range ws.ws {
		r.extra = max(r.extra, w.lastSeq-r.final)
	}
	r.delays, r.connects, r.st, r.timeline = ws.results(r.final)
	if r.st.delivered > 0 {
		r.perDelivery = (srv2 - srv0) / time.Duration(r.st.delivered)
	}
	r.logWarnings = warnings(srv.log)
	return r, nil
}

// warnings counts the server's log lines at WARN or ERROR, by message.
func warnings(path string) map[string]int {
	b, err := os.ReadFile(path)
	if err != nil {
		return map[string]int{"(no log: " + err.Error() + ")": 1}
	}
	counts := map[string]int{}
	for line := range strings.Lines(string(b)) {
		if !strings.Contains(line, `"level":"WARN"`) && !strings.Contains(line, `"level":"ERROR"`) {
			continue
		}
		msg := "?"
		if _, rest, ok := strings.Cut(line, `"msg":"`); ok {
			msg, _, _ = strings.Cut(rest, `"`)
		}
		counts[msg]++
	}
	return counts
}
