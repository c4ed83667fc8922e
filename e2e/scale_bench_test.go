package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/engine/journal"
	fenceserver "github.com/fence-lock/fence/server"
	"github.com/fence-lock/fence/state"
)

// BenchmarkScale measures fence serve on a store of many idle resources
// (each granted once, its lease ended), next to the same server on an empty
// store in the same run: the resident memory each idle resource costs, the
// time from start to serving, and the 16-client cycle rate. Run:
//
//	go test -run '^$' -bench Scale -benchtime 20000x ./e2e/
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprintf("resources=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			if err := populate(dir, n); err != nil {
				b.Fatal(err)
			}
			empty := startQuiet(b, b.TempDir())
			rssEmpty := vmRSS(b, empty.cmd.Process.Pid)
			empty.kill()

			started := time.Now()
			srv := startQuiet(b, dir) // returns once it logs that it serves
			restart := time.Since(started)
			time.Sleep(time.Second) // the load's garbage collected
			rss := vmRSS(b, srv.cmd.Process.Pid)

			rate := parallel(b, 16, func(client *http.Client, c, k int) error {
				return cycles(client, srv.URL, fmt.Sprintf("bench-%d", c), k)
			})
			b.ReportMetric(rate, "cycles/s")
			b.ReportMetric(restart.Seconds(), "start-s")
			b.ReportMetric(float64(rss-rssEmpty)/float64(n), "rss-B/resource")
		})
	}
}

// populate makes dir the data directory of a store with n idle resources.
func populate(dir string, n int) error {
	return journal.Import(filepath.Join(dir, fenceserver.JournalDir), func(ctx context.Context, resource func(string, state.Resource) error, entry func(string, string, state.Entry) error) (fence.Rev, error) {
		for i := range n {
			if err := resource(fmt.Sprintf("idle/%07d", i), state.Resource{LastToken: 3, LastFence: 3}); err != nil {
				return 0, err
			}
		}
		return 0, nil
	})
}

// vmRSS returns the resident memory of process pid, in bytes.
func vmRSS(b *testing.B, pid int) int64 {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
