// Command semabench measures counted permits side by side in one run, in
// the terms of the peer benchmark (../shared/bench/peers): closed-loop
// clients, each with its own connection or session, each cycle acquire ->
// fenced write -> release, on one shared resource, with an in-process check
// that never more than the limit held at once. Its cases:
//
//   - fence-permits: fence's semaphore (acquire with a limit); the write is
//     a PUT with the permit's token to its slot resource.
//   - fence-lock: fence's exclusive lock on one resource (limit 1): the
//     baseline of a permit's cost.
//   - zookeeper-semaphore: Curator's InterProcessSemaphoreV2 recipe on
//     ZooKeeper (a mutex recipe around the creation of an
//     ephemeral-sequential lease node, then waiting until at most limit
//     lease nodes exist; release deletes the node). ZooKeeper has no fence
//     for a permit, so the write is made conditional the way the peer
//     benchmark's ZooKeeper lock case makes it: Multi(Check(lease node),
//     SetData).
//
// It starts `fence serve` (the binary given) on its embedded store and
// ZooKeeper (Debian's, as the tests start it) on loopback, data in a new
// temporary directory, runs the cases in turn for each round (the order
// reversed every other round: the machine is shared), and prints each
// measurement and then each case's median.
//
//	go build -o /tmp/fence ./cmd/fence
//	go run ./internal/tools/semabench -fence /tmp/fence -rounds 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/internal/tools/testserver"
	"github.com/go-zookeeper/zk"
)

func main() {
	fenceBin := flag.String("fence", "", "the fence binary to serve from (required)")
	clients := flag.Int("clients", 16, "concurrent clients")
	limit := flag.Int("limit", 4, "the semaphore's limit")
	dur := flag.Duration("dur", 5*time.Second, "length of each measurement")
	warmup := flag.Duration("warmup", time.Second, "cycles before each measurement, not counted")
	rounds := flag.Int("rounds", 3, "rounds of every case")
	flag.Parse()
	if *fenceBin == "" || *clients < 1 || *limit < 1 || *limit > fence.MaxPermits {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*fenceBin, *clients, *limit, *dur, *warmup, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "semabench:", err)
		os.Exit(1)
	}
}

// benchCase is one system's cycle: start returns a client's cycle function.
type benchCase struct {
	name  string
	limit int
	start func(ctx context.Context, client int) (cycle func(ctx context.Context) error, stop func(), err error)
}

func run(fenceBin string, clients, limit int, dur, warmup time.Duration, rounds int) error {
	dir, err := os.MkdirTemp("", "semabench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fs, err := testserver.StartFence(fenceBin, dir)
	if err != nil {
		return err
	}
	defer fs.Close()
	addr := fs.URL
	z, err := testserver.StartZooKeeper(dir)
	if err != nil {
		return err
	}
	defer z.Close()
	if err := zkSetup(z.Addr); err != nil {
		return err
	}
	cases := []benchCase{
		{"fence-permits", limit, fenceCase(addr, limit)},
		{"fence-lock", 1, fenceCase(addr, 0)},
		{"zookeeper-semaphore", limit, zkCase(z.Addr, limit)},
	}
	fmt.Printf("%d clients, limit %d, %s per measurement after %s of warm-up, %d rounds\n", clients, limit, dur, warmup, rounds)
	results := map[string][]float64{}
	for round := range rounds {
		order := slices.Clone(cases)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, c := range order {
			rate, most, errs, err := measure(c, clients, dur, warmup)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			if most > c.limit {
				return fmt.Errorf("%s: %d held at once, more than the limit %d", c.name, most, c.limit)
			}
			fmt.Printf("round %d  %-20s %8.0f cycles/s  (at most %d held at once; %d errors)\n", round+1, c.name, rate, most, errs)
			results[c.name] = append(results[c.name], rate)
		}
	}
	fmt.Println("medians:")
	for _, c := range cases {
		rs := results[c.name]
		slices.Sort(rs)
		fmt.Printf("  %-20s %8.0f cycles/s  (of %.0f)\n", c.name, rs[len(rs)/2], rs)
	}
	return nil
}

// measure runs clients closed-loop cycles of c for warmup and then dur, and
// returns the cycles per second of dur, the most holders at once, and the
// number of failed cycles.
func measure(c benchCase, clients int, dur, warmup time.Duration) (rate float64, most int, errs int64, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cycles := make([]func(context.Context) error, clients)
	for i := range clients {
		cycle, stop, err := c.start(ctx, i)
		if err != nil {
			return 0, 0, 0, err
		}
		defer stop()
		cycles[i] = cycle
	}
	var counting atomic.Bool
	var done, failed atomic.Int64
	var wg sync.WaitGroup
	for _, cycle := range cycles {
		wg.Go(func() {
			for ctx.Err() == nil {
				err := cycle(ctx)
				switch {
				case ctx.Err() != nil:
				case err != nil:
					failed.Add(1)
				case counting.Load():
					done.Add(1)
				}
			}
		})
	}
	time.Sleep(warmup)
	counting.Store(true)
	start := time.Now()
	time.Sleep(dur)
	n := done.Load()
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	return float64(n) / elapsed.Seconds(), int(maxInside.Swap(0)), failed.Load(), nil
}

// inside counts the holders of the case running now, and maxInside the most
// at once: every cycle counts itself in between its acquire and release.
var inside, maxInside atomic.Int64

func enter() {
	n := inside.Add(1)
	for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
	}
}

func leave() { inside.Add(-1) }

// fenceCase cycles on fence: a permit of "sem" with limit > 0, else the
// lock "lock"; the write is a PUT with the lease's token to its resource.
func fenceCase(addr string, limit int) func(context.Context, int) (func(context.Context) error, func(), error) {
	return func(_ context.Context, i int) (func(context.Context) error, func(), error) {
		api, err := client.NewAPI(addr)
		if err != nil {
			return nil, nil, err
		}
		tr := &http.Transport{MaxIdleConnsPerHost: 1}
		api.HTTPClient = &http.Client{Transport: tr}
		holder := "client-" + strconv.Itoa(i)
		value := []byte("v")
		cycle := func(ctx context.Context) error {
			var l fence.Lease
			var err error
			if limit > 0 {
				l, err = api.AcquirePermit(ctx, "sem", holder, limit, 10*time.Second, time.Minute)
			} else {
				l, err = api.Acquire(ctx, "lock", holder, 10*time.Second, time.Minute)
			}
			if err != nil {
				return err
			}
			enter()
			_, err = api.Put(ctx, l.Resource, "k", value, l.Token, fence.Cond{})
			leave()
			if rerr := api.Release(context.WithoutCancel(ctx), l.Resource, l.Token); err == nil {
				err = rerr
			}
			return err
		}
		return cycle, tr.CloseIdleConnections, nil
	}
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// zkDial opens a ZooKeeper session, returning once it is established.
func zkDial(addr string) (*zk.Conn, error) {
	c, ev, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	timeout := time.After(15 * time.Second)
	for {
		select {
		case e := <-ev:
			if e.State == zk.StateHasSession {
				go func() {
					for range ev {
					}
				}()
				return c, nil
			}
		case <-timeout:
			c.Close()
			return nil, errors.New("zookeeper: no session within 15s")
		}
	}
}

const (
	zkLocks  = "/sem/locks"
	zkLeases = "/sem/leases"
	zkData   = "/sem-data"
)

// zkSetup creates the recipe's parent nodes and the data node.
func zkSetup(addr string) error {
	c, err := zkDial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, p := range []string{"/sem", zkLocks, zkLeases, zkData} {
		if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zookeeper: create %s: %w", p, err)
		}
	}
	return nil
}

// zkCase cycles on Curator's semaphore recipe, each client in its own
// session.
func zkCase(addr string, limit int) func(context.Context, int) (func(context.Context) error, func(), error) {
	return func(_ context.Context, _ int) (func(context.Context) error, func(), error) {
		c, err := zkDial(addr)
		if err != nil {
			return nil, nil, err
		}
		acl := zk.WorldACL(zk.PermAll)
		mutex := zk.NewLock(c, zkLocks, acl)
		value := []byte("v")
		cycle := func(ctx context.Context) error {
			// Acquire: the mutex, a lease node, and then wait until at most
			// limit lease nodes exist, holding the mutex meanwhile.
			if err := mutex.LockWithData(nil); err != nil {
				return err
			}
			lease, err := c.Create(zkLeases+"/lease-", nil, zk.FlagEphemeral|zk.FlagSequence, acl)
			for err == nil {
				var children []string
				var watch <-chan zk.Event
				if children, _, watch, err = c.ChildrenW(zkLeases); err != nil || len(children) <= limit {
					break
				}
				select {
				case <-watch:
				case <-ctx.Done():
					err = ctx.Err()
				}
			}
			if uerr := mutex.Unlock(); err == nil {
				err = uerr
			}
			if err != nil {
				if lease != "" {
					c.Delete(lease, -1)
				}
				return err
			}
			enter()
			_, err = c.Multi(&zk.CheckVersionRequest{Path: lease, Version: -1}, &zk.SetDataRequest{Path: zkData, Data: value, Version: -1})
			leave()
			if derr := c.Delete(lease, -1); err == nil {
				err = derr
			}
			return err
		}
		return cycle, c.Close, nil
	}
}
