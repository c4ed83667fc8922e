package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fence-lock/fence/internal/tools/chaos/history"
	"github.com/fence-lock/fence/internal/tools/chaos/proxy"
)

// partition cuts some of the paths between the fence servers and the
// engine's nodes, through the proxy of each path, for half an election TTL
// to three, then heals them. The engine's nodes keep talking to each
// other. One of:
//
//   - one server (the leader, two times in three) cut from a majority of
//     the nodes: it must go on through the others, or step down;
//   - a ring (etcd): server i reaches nodes i and i+1 only, so that each
//     reaches a majority, no two the same one;
//   - one node cut from every server;
//   - the leader's paths to every node held back, delivered late and in
//     order: its commits arrive after another server may have taken over,
//     and the writer epoch must refuse them (--unsafe-epoch without
//     leader-pause runs this one every time, and the checkers must find
//     what it lets through).
func (r *run) partition(ctx context.Context) {
	c := r.cl
	ttl := c.electionTTL
	d := ttl/2 + time.Duration(r.rng.Int64N(int64(5*ttl/2)))
	leader := r.rng.IntN(len(c.servers))
	zombie := r.cfg.UnsafeEpoch && !slices.Contains(r.cfg.Faults, FaultLeaderPause)
	if l, _, ok := c.leader(ctx, -1); ok && (r.rng.IntN(3) < 2 || zombie) {
		leader = l
	}
	var cut []*proxy.Proxy // blackholed
	var what string
	kind := r.rng.IntN(4)
	if zombie {
		kind = 3
	}
	if kind == 1 && len(c.nodes) < 3 {
		kind = 0
	}
	switch kind {
	case 0:
		majority := len(c.nodes)/2 + 1
		first := r.rng.IntN(len(c.nodes))
		var names []string
		for k := range majority {
			n := (first + k) % len(c.nodes)
			cut = append(cut, c.proxies[n][leader])
			names = append(names, c.nodes[n])
		}
		what = fmt.Sprintf("%s cut from %s", c.servers[leader].name, strings.Join(names, ", "))
	case 1:
		var parts []string
		for i, s := range c.servers {
			var reach []string
			for n := range c.nodes {
				if n == i%len(c.nodes) || n == (i+1)%len(c.nodes) {
					reach = append(reach, c.nodes[n])
				} else {
					cut = append(cut, c.proxies[n][i])
				}
			}
			parts = append(parts, s.name+" reaches "+strings.Join(reach, "+"))
		}
		what = "a ring: " + strings.Join(parts, "; ")
	case 2:
		n := r.rng.IntN(len(c.nodes))
		cut = c.proxies[n]
		what = c.nodes[n] + " cut from every fence server"
	case 3:
		lat := ttl + time.Duration(r.rng.Int64N(int64(2*ttl)))
		d = lat
		for n := range c.nodes {
			c.proxies[n][leader].SetLatency(lat, 0)
		}
		what = fmt.Sprintf("%s's paths to every node held back %s, delivered late", c.servers[leader].name, lat.Round(time.Millisecond))
	}
	start := r.now()
	for _, p := range cut {
		p.Blackhole(true)
	}
	sleep(ctx, d)
	for n := range c.nodes {
		for _, p := range c.proxies[n] {
			p.Heal()
		}
	}
	end := r.now()
	r.addWindow(start, end)
	r.addFault(history.Fault{Kind: FaultPartition, Client: -1, Start: start, End: end,
		Detail: fmt.Sprintf("%s, for %s", what, time.Duration(end-start).Round(time.Millisecond))})
}
