package chaos

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence/wire"
)

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6368616f73)) }

func TestSchedule_SameAsBefore(t *testing.T) {
	// The order the harness drew before cluster mode, inline in
	// injectFaults: a seed must give the same runs as it did.
	old := func(rng *rand.Rand, faults []string, n int) []string {
		var out, round []string
		for range n {
			rng.IntN(1500) // the gap
			if len(round) == 0 {
				round = slices.Clone(faults)
				rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
			}
			out = append(out, round[0])
			round = round[1:]
		}
		return out
	}
	for _, faults := range [][]string{DefaultFaults(""), {FaultPause}, {FaultPause, FaultNet}, DefaultFaults(ClusterEtcd)} {
		for seed := range uint64(20) {
			want := old(newRNG(seed), faults, 20)
			rng, s := newRNG(seed), newSchedule(faults, "")
			var got []string
			for range 20 {
				rng.IntN(1500)
				k, ok := s.next(rng)
				if !ok {
					t.Fatalf("faults %v: next=false", faults)
				}
				got = append(got, k)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("faults %v seed %d: %v, want %v", faults, seed, got, want)
			}
		}
	}
}

func TestSchedule_Favour(t *testing.T) {
	t.Run("TwoInThree", func(t *testing.T) {
		s := newSchedule(DefaultFaults(ClusterEtcd), FaultLeaderPause)
		rng := newRNG(1)
		seen := map[string]int{}
		for i := range 45 { // three rounds of 3×5
			k, _ := s.next(rng)
			seen[k]++
			if (i%3 != 2) != (k == FaultLeaderPause) {
				t.Fatalf("fault %d is %s: want leader-pause but at every third position", i, k)
			}
		}
		for _, k := range DefaultFaults(ClusterEtcd) {
			if k != FaultLeaderPause && seen[k] != 3 {
				t.Errorf("%s came up %d times in three rounds, want 3", k, seen[k])
			}
		}
	})
	t.Run("Alone", func(t *testing.T) {
		s := newSchedule([]string{FaultLeaderPause}, FaultLeaderPause)
		rng := newRNG(1)
		for range 5 {
			if k, _ := s.next(rng); k != FaultLeaderPause {
				t.Fatalf("next=%s", k)
			}
		}
	})
	t.Run("NotInKinds", func(t *testing.T) {
		s := newSchedule([]string{FaultPause, FaultNet}, FaultLeaderPause)
		rng := newRNG(1)
		for range 6 {
			if k, _ := s.next(rng); k == FaultLeaderPause {
				t.Fatal("a kind not asked for came up")
			}
		}
	})
}

func TestInterleave(t *testing.T) {
	for _, tc := range []struct{ round, want []string }{
		{[]string{"a", "f", "b"}, []string{"f", "f", "a", "f", "f", "b"}},
		{[]string{"f"}, []string{"f"}},
		{[]string{"a"}, []string{"f", "f", "a"}},
		{nil, []string{"f"}},
	} {
		if got := interleave("f", tc.round); !slices.Equal(got, tc.want) {
			t.Errorf("interleave(f, %v)=%v, want %v", tc.round, got, tc.want)
		}
	}
}

func TestSchedule_Drop(t *testing.T) {
	s := newSchedule([]string{FaultEngineKill, FaultNet}, "")
	rng := newRNG(3)
	s.next(rng) // a round is under way
	s.drop(FaultEngineKill)
	for range 10 {
		if k, _ := s.next(rng); k != FaultNet {
			t.Fatalf("next=%s after drop, want net", k)
		}
	}
	s.drop(FaultNet)
	if k, ok := s.next(rng); ok {
		t.Fatalf("next=%s, true with every kind dropped", k)
	}
	// Dropping the favoured kind leaves the others.
	s = newSchedule([]string{FaultLeaderPause, FaultEngineKill}, FaultLeaderPause)
	s.drop(FaultLeaderPause)
	if k, _ := s.next(rng); k != FaultEngineKill {
		t.Fatalf("next=%s", k)
	}
}

func TestPickLeader(t *testing.T) {
	st := func(role string, epoch uint64) *wire.ClusterStatus {
		return &wire.ClusterStatus{Role: role, Epoch: epoch}
	}
	for name, tc := range map[string]struct {
		sts  []*wire.ClusterStatus
		want int
	}{
		"None":          {[]*wire.ClusterStatus{nil, st(wire.RoleStandby, 3), nil}, -1},
		"Empty":         {nil, -1},
		"One":           {[]*wire.ClusterStatus{st(wire.RoleStandby, 3), nil, st(wire.RoleLeader, 3)}, 2},
		"HigherEpoch":   {[]*wire.ClusterStatus{st(wire.RoleLeader, 4), st(wire.RoleLeader, 5), st(wire.RoleStandby, 5)}, 1},
		"OldLeaderLast": {[]*wire.ClusterStatus{st(wire.RoleLeader, 7), nil, st(wire.RoleLeader, 6)}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			if got := pickLeader(tc.sts); got != tc.want {
				t.Fatalf("pickLeader=%d, want %d", got, tc.want)
			}
		})
	}
}

func TestStoreURL(t *testing.T) {
	addrs := []string{"127.0.0.1:1", "127.0.0.1:2"}
	if got, want := storeURL(ClusterEtcd, addrs), "etcd://127.0.0.1:1,127.0.0.1:2/fence-chaos/"; got != want {
		t.Errorf("etcd: %q, want %q", got, want)
	}
	pg := storeURL(ClusterPostgres, addrs)
	for _, part := range []string{"postgres://postgres@127.0.0.1:1,127.0.0.1:2/postgres?", "target_session_attrs=read-write", "connect_timeout="} {
		if !strings.Contains(pg, part) {
			t.Errorf("postgres: %q lacks %q", pg, part)
		}
	}
}

func TestPin(t *testing.T) {
	var got []int
	for c := range 7 {
		got = append(got, pin(c, 3))
	}
	if want := []int{0, 1, 2, 0, 1, 2, 0}; !slices.Equal(got, want) {
		t.Fatalf("pins %v, want %v", got, want)
	}
}

func TestTimings(t *testing.T) {
	for _, tc := range []struct{ election, ttl time.Duration }{
		{2 * time.Second, time.Second}, {time.Second, 100 * time.Millisecond}, {5 * time.Second, 3 * time.Second},
	} {
		rng := newRNG(1)
		for range 200 {
			d := leaderPauseFor(tc.election, tc.ttl, rng)
			if d <= tc.election+tc.ttl || d > maxLeaderPause(tc.election, tc.ttl) {
				t.Fatalf("leaderPauseFor(%s, %s)=%s: want > election TTL + TTL, <= %s", tc.election, tc.ttl, d, maxLeaderPause(tc.election, tc.ttl))
			}
			if down := leaderDown(tc.election, rng); down < tc.election/2 || down >= tc.election*3/2 {
				t.Fatalf("leaderDown(%s)=%s", tc.election, down)
			}
		}
		cfg := Config{Cluster: ClusterEtcd, ElectionTTL: tc.election, TTL: tc.ttl}
		if to := clientTimeout(cfg); to <= maxLeaderPause(tc.election, tc.ttl) || to < 2*tc.ttl {
			t.Errorf("clientTimeout=%s: a request queued on a paused leader would time out before it wakes", to)
		}
	}
	// Without a cluster the timeout is what it always was.
	if to := clientTimeout(Config{TTL: time.Second}); to != 3*time.Second {
		t.Errorf("clientTimeout without a cluster=%s, want 3s", to)
	}
}

func TestConfig_Validate(t *testing.T) {
	base := func() Config {
		return Config{Binary: "fence", Duration: time.Second, Clients: 3, Resources: 2, TTL: time.Second}
	}
	ok := map[string]func(*Config){
		"Default":        func(c *Config) { c.Faults = DefaultFaults("") },
		"ClusterEtcd":    func(c *Config) { c.Cluster, c.Faults = ClusterEtcd, DefaultFaults(ClusterEtcd) },
		"ClusterPG":      func(c *Config) { c.Cluster, c.Faults = ClusterPostgres, []string{FaultEngineKill} },
		"UnsafeEpoch":    func(c *Config) { c.Cluster, c.UnsafeEpoch = ClusterEtcd, true },
		"ElectionTTL":    func(c *Config) { c.Cluster, c.ElectionTTL = ClusterEtcd, 3*time.Second },
		"AddrPauseNet":   func(c *Config) { c.Addr, c.Faults = "http://x:1", []string{FaultPause, FaultNet} },
		"ClusterNoFault": func(c *Config) { c.Cluster = ClusterPostgres },
	}
	for name, f := range ok {
		t.Run(name, func(t *testing.T) {
			c := base()
			f(&c)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
	bad := map[string]struct {
		f    func(*Config)
		want string
	}{
		"UnknownCluster":      {func(c *Config) { c.Cluster = "redis" }, `cluster "redis"`},
		"ClusterAndAddr":      {func(c *Config) { c.Cluster, c.Addr = ClusterEtcd, "http://x:1" }, "drop --addr"},
		"ClusterAndUnsafe":    {func(c *Config) { c.Cluster, c.Unsafe = ClusterEtcd, true }, "--unsafe-epoch"},
		"UnsafeEpochAlone":    {func(c *Config) { c.UnsafeEpoch = true }, "needs --cluster"},
		"ElectionTTLAlone":    {func(c *Config) { c.ElectionTTL = 3 * time.Second }, "needs --cluster"},
		"ElectionTTLTooShort": {func(c *Config) { c.Cluster, c.ElectionTTL = ClusterEtcd, 500*time.Millisecond }, "1s..1m"},
		"KillInCluster":       {func(c *Config) { c.Cluster, c.Faults = ClusterEtcd, []string{FaultKill} }, "leader-kill"},
		"LeaderKillAlone":     {func(c *Config) { c.Faults = []string{FaultLeaderKill} }, "needs a cluster"},
		"LeaderPauseAlone":    {func(c *Config) { c.Faults = []string{FaultPause, FaultLeaderPause} }, "needs a cluster"},
		"EngineKillAlone":     {func(c *Config) { c.Faults = []string{FaultEngineKill} }, "needs a cluster"},
		"EngineNetWithAddr":   {func(c *Config) { c.Addr, c.Faults = "http://x:1", []string{FaultEngineNet} }, "needs a cluster"},
		"Unknown":             {func(c *Config) { c.Cluster, c.Faults = ClusterEtcd, []string{"leader-nap"} }, "unknown fault"},
	}
	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			c := base()
			tc.f(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate()=%v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func TestConfig_ElectionTTL(t *testing.T) {
	for _, tc := range []struct {
		cluster string
		set     time.Duration
		want    time.Duration
	}{
		{ClusterEtcd, 0, 2 * time.Second},
		{ClusterEtcd, time.Second, 2 * time.Second},
		{ClusterEtcd, 2500 * time.Millisecond, 3 * time.Second},
		{ClusterEtcd, 5 * time.Second, 5 * time.Second},
		{ClusterPostgres, 0, 2 * time.Second},
		{ClusterPostgres, 1500 * time.Millisecond, 1500 * time.Millisecond},
	} {
		c := Config{Cluster: tc.cluster, ElectionTTL: tc.set}
		if got := c.electionTTL(); got != tc.want {
			t.Errorf("%s, --election-ttl %s: %s, want %s", tc.cluster, tc.set, got, tc.want)
		}
	}
}

func TestDefaultFaults(t *testing.T) {
	if got, want := DefaultFaults(""), []string{FaultPause, FaultKill, FaultNet}; !slices.Equal(got, want) {
		t.Errorf("DefaultFaults(\"\")=%v, want %v", got, want)
	}
	want := []string{FaultPause, FaultNet, FaultLeaderKill, FaultLeaderPause, FaultEngineKill, FaultEngineNet}
	for _, c := range []string{ClusterEtcd, ClusterPostgres} {
		got := DefaultFaults(c)
		if !slices.Equal(got, want) {
			t.Errorf("DefaultFaults(%q)=%v, want %v", c, got, want)
		}
		got[0] = "changed" // a copy: the next call is unharmed
	}
	if DefaultFaults(ClusterEtcd)[0] != FaultPause {
		t.Error("DefaultFaults returns a shared slice")
	}
}
