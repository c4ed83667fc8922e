// Command sessionbench measures what a session saves, side by side in one
// run: N leases kept alive for a while, either each by its own keepalive
// (a fence.Session per lease, which renews it about every TTL/3), or all by
// one session (a fence.Session on a session resource, the leases acquired
// in it). For each it reports, per second of the hold, the renew requests
// the server answered (fence_lock_renewals_total), its durable commits
// (fence_storage_commit_duration_seconds_count), the server's CPU
// (process_cpu_seconds_total) and this process's, the clients' CPU. Every
// lease must still be held at the end.
//
// It starts `fence serve` (the binary given) on its embedded store on
// loopback, data in a new temporary directory, runs both cases in each
// round (the order reversed every other round: the machine is shared), and
// prints each measurement and then each case's median.
//
//	go build -o /tmp/fence ./cmd/fence
//	go run ./internal/tools/sessionbench -fence /tmp/fence -rounds 3
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
	"strings"
	"syscall"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/client"
	"github.com/fence-lock/fence/internal/tools/testserver"
)

func main() {
	fenceBin := flag.String("fence", "", "the fence binary to serve from (required)")
	holds := flag.Int("holds", 1000, "leases held at once")
	ttl := flag.Duration("ttl", 3*time.Second, "the leases' (and the session's) TTL")
	hold := flag.Duration("hold", 9*time.Second, "how long the leases are held in each measurement")
	rounds := flag.Int("rounds", 3, "rounds of both cases")
	flag.Parse()
	if *fenceBin == "" || *holds < 1 || *ttl < fence.MinTTL || *hold <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*fenceBin, *holds, *ttl, *hold, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "sessionbench:", err)
		os.Exit(1)
	}
}

// figures are one measurement, per second of the hold.
type figures struct {
	renews, commits, serverCPU, clientCPU float64
}

type benchCase struct {
	name string
	// keep acquires the leases under prefix, kept alive its way, and
	// returns them and what lets them go.
	keep func(ctx context.Context, api *client.API, prefix string, holds int, ttl time.Duration) (leases []fence.Lease, done []<-chan struct{}, stop func(), err error)
}

func run(fenceBin string, holds int, ttl, hold time.Duration, rounds int) error {
	dir, err := os.MkdirTemp("", "sessionbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fs, err := testserver.StartFence(fenceBin, dir)
	if err != nil {
		return err
	}
	defer fs.Close()
	url := fs.URL
	api, err := client.NewAPI(url)
	if err != nil {
		return err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	api.HTTPClient = &http.Client{Transport: tr}
	cases := []benchCase{
		{"a keepalive per lease", keepEach},
		{"one session", keepInSession},
	}
	fmt.Printf("%d leases, TTL %s, held %s per measurement, %d rounds\n", holds, ttl, hold, rounds)
	results := map[string][]figures{}
	for round := range rounds {
		order := slices.Clone(cases)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for i, c := range order {
			f, err := measure(url, api, c, fmt.Sprintf("sb/%d/%d/", round, i), holds, ttl, hold)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			fmt.Printf("round %d  %-22s %8.1f renew requests/s %8.1f commits/s  server CPU %6.1f ms/s  clients' CPU %6.1f ms/s\n",
				round+1, c.name, f.renews, f.commits, f.serverCPU*1000, f.clientCPU*1000)
			results[c.name] = append(results[c.name], f)
		}
	}
	fmt.Println("medians:")
	for _, c := range cases {
		fs := results[c.name]
		pick := func(get func(figures) float64) float64 {
			vs := make([]float64, len(fs))
			for i, f := range fs {
				vs[i] = get(f)
			}
			slices.Sort(vs)
			return vs[len(vs)/2]
		}
		fmt.Printf("  %-22s %8.1f renew requests/s %8.1f commits/s  server CPU %6.1f ms/s  clients' CPU %6.1f ms/s\n", c.name,
			pick(func(f figures) float64 { return f.renews }), pick(func(f figures) float64 { return f.commits }),
			pick(func(f figures) float64 { return f.serverCPU * 1000 }), pick(func(f figures) float64 { return f.clientCPU * 1000 }))
	}
	return nil
}

// measure keeps holds leases alive for hold and returns its figures.
func measure(url string, api *client.API, c benchCase, prefix string, holds int, ttl, hold time.Duration) (figures, error) {
	ctx := context.Background()
	leases, done, stop, err := c.keep(ctx, api, prefix, holds, ttl)
	if err != nil {
		return figures{}, err
	}
	defer stop()
	before, err := testserver.Metrics(url)
	if err != nil {
		return figures{}, err
	}
	cpu0 := ownCPU()
	time.Sleep(hold)
	cpu1 := ownCPU()
	after, err := testserver.Metrics(url)
	if err != nil {
		return figures{}, err
	}
	for _, d := range done {
		select {
		case <-d:
			return figures{}, errors.New("a keepalive ended during the hold")
		default:
		}
	}
	for _, l := range leases[:min(len(leases), 20)] { // the server agrees, on a sample
		st, err := api.Status(ctx, l.Resource)
		if err != nil || !st.Held || st.Token != l.Token {
			return figures{}, fmt.Errorf("%s not held at the end: %+v, %v", l.Resource, st, err)
		}
	}
	s := hold.Seconds()
	return figures{
		renews:    (after["fence_lock_renewals_total"] - before["fence_lock_renewals_total"]) / s,
		commits:   (after["fence_storage_commit_duration_seconds_count"] - before["fence_storage_commit_duration_seconds_count"]) / s,
		serverCPU: (after["process_cpu_seconds_total"] - before["process_cpu_seconds_total"]) / s,
		clientCPU: (cpu1 - cpu0).Seconds() / s,
	}, nil
}

// keepEach keeps each lease alive by its own fence.Session.
func keepEach(ctx context.Context, api *client.API, prefix string, holds int, ttl time.Duration) ([]fence.Lease, []<-chan struct{}, func(), error) {
	var sessions []*fence.Session
	stop := func() {
		for _, s := range sessions {
			s.Release(ctx)
		}
	}
	for i := range holds {
		s, err := fence.NewSession(ctx, api, prefix+strconv.Itoa(i), fence.WithTTL(ttl), fence.WithHolder("bench"))
		if err != nil {
			stop()
			return nil, nil, nil, err
		}
		sessions = append(sessions, s)
	}
	leases := make([]fence.Lease, len(sessions))
	done := make([]<-chan struct{}, len(sessions))
	for i, s := range sessions {
		leases[i], done[i] = s.Lease(), s.Done()
	}
	return leases, done, stop, nil
}

// keepInSession acquires the leases in one session kept alive by one
// fence.Session on its resource.
func keepInSession(ctx context.Context, api *client.API, prefix string, holds int, ttl time.Duration) ([]fence.Lease, []<-chan struct{}, func(), error) {
	keep, err := fence.NewSession(ctx, api, fence.SessionResource(strings.ReplaceAll(prefix, "/", "-")), fence.WithTTL(ttl), fence.WithHolder("bench"))
	if err != nil {
		return nil, nil, nil, err
	}
	in := fence.WithSession(ctx, keep.SessionRef())
	leases := make([]fence.Lease, 0, holds)
	for i := range holds {
		l, err := api.Acquire(in, prefix+strconv.Itoa(i), "bench", 0, 0)
		if err != nil {
			keep.Release(ctx)
			return nil, nil, nil, err
		}
		leases = append(leases, l)
	}
	return leases, []<-chan struct{}{keep.Done()}, func() { keep.Release(ctx) }, nil
}

// ownCPU returns the CPU time this process has used.
func ownCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
