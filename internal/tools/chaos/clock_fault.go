package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fence-lock/fence/internal/tools/chaos/history"
)

// clockFile is the name, in a server's directory, of the file that holds
// its wall clock's offset (fence serve --test-clock-file).
const clockFile = "clock.offset"

// clockArgs are a server's flags for the clock-skew fault: the file it
// reads its wall clock's offset from, in dir, and with UnsafeClock leases
// timed by that clock.
func (c *Config) clockArgs(dir string) []string {
	if !slices.Contains(c.Faults, FaultClockSkew) {
		return nil
	}
	args := []string{"--test-clock-file", filepath.Join(dir, clockFile)}
	if c.UnsafeClock {
		args = append(args, "--unsafe-wall-clock-leases")
	}
	return args
}

// clockSkew steps one fence server's wall clock ahead by two to four TTLs,
// and again every 20 ms for a TTL or two (a clock that runs far too fast),
// strobes it between there and as far behind for a second, and sets it
// right: leases must neither end early for their
// holders nor be granted twice (lease-exclusive and the fencing checkers
// say). With a cluster the server is the leader two times in three, which
// times the leases; else any. With UnsafeClock the servers time leases by
// that clock, and the step ahead ends every lease held: the checkers must
// find the grants that came too early.
func (r *run) clockSkew(ctx context.Context) {
	dir, name := r.dataDir, "fence serve"
	if r.cl != nil {
		i := r.rng.IntN(len(r.cl.servers))
		if r.rng.IntN(3) < 2 {
			if l, _, ok := r.cl.leader(ctx, -1); ok {
				i = l
			}
		}
		dir, name = r.cl.servers[i].dir, r.cl.servers[i].name
	}
	file := filepath.Join(dir, clockFile)
	ttl := r.cfg.TTL
	step := ttl * time.Duration(2+r.rng.IntN(3))
	set := func(d time.Duration) {
		tmp := file + ".tmp"
		err := os.WriteFile(tmp, []byte(d.String()+"\n"), 0o600)
		if err == nil {
			err = os.Rename(tmp, file)
		}
		if err != nil {
			r.cfg.Log.Error("clock-skew: setting the offset", "file", file, "error", err)
		}
	}
	start := r.now()
	r.mu.Lock()
	grantsBefore := r.grantsAcked
	r.mu.Unlock()
	ahead := step
	set(ahead)
	for end := time.Now().Add(max(ttl+time.Duration(r.rng.Int64N(int64(ttl))), 500*time.Millisecond)); time.Now().Before(end) && ctx.Err() == nil; {
		time.Sleep(20 * time.Millisecond)
		ahead += step
		set(ahead)
	}
	strobe := time.Duration(20+r.rng.IntN(80)) * time.Millisecond
	for end := time.Now().Add(time.Second); time.Now().Before(end) && ctx.Err() == nil; {
		set(-ahead)
		time.Sleep(strobe)
		set(ahead)
		time.Sleep(strobe)
	}
	set(0)
	end := r.now()
	r.mu.Lock()
	if r.grantsAcked > grantsBefore {
		r.skewedGrants++
	}
	r.mu.Unlock()
	r.addWindow(start, end)
	r.addFault(history.Fault{Kind: FaultClockSkew, Client: -1, Start: start, End: end,
		Detail: fmt.Sprintf("%s's wall clock stepped %s ahead every 20 ms to %s, strobed ±%s every %s, set right", name, step, ahead, ahead, strobe)})
}
