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
				faultGap(DefaultFaultEvery, rng)
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
		return Config{Binary: "fence", History: "h.jsonl", Duration: time.Second, Clients: 3, Resources: 2, TTL: time.Second}
	}
	ok := map[string]func(*Config){
		"Default":      func(c *Config) { c.Faults = DefaultFaults("") },
		"ClusterEtcd":  func(c *Config) { c.Cluster, c.Faults = ClusterEtcd, DefaultFaults(ClusterEtcd) },
		"ClusterPG":    func(c *Config) { c.Cluster, c.Faults = ClusterPostgres, []string{FaultEngineKill} },
		"UnsafeEpoch":  func(c *Config) { c.Cluster, c.UnsafeEpoch = ClusterEtcd, true },
		"ElectionTTL":  func(c *Config) { c.Cluster, c.ElectionTTL = ClusterEtcd, 3*time.Second },
		"AddrPauseNet": func(c *Config) { c.Addr, c.Faults = "http://x:1", []string{FaultPause, FaultNet} },
		"AddrHTTPSToken": func(c *Config) {
			c.Addr, c.AuthToken, c.CACert, c.Faults = "https://x", "t", "ca.pem", []string{FaultPause}
		},
		"Guard":          func(c *Config) { c.Guard, c.Faults = "postgres://u:p@127.0.0.1:5432/db", DefaultFaults("") },
		"GuardUnsafe":    func(c *Config) { c.Guard, c.Unsafe = "host=127.0.0.1 port=5432 dbname=db", true },
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
		"NoHistory":           {func(c *Config) { c.History = "" }, "no history file"},
		"AddrHTTPS":           {func(c *Config) { c.Addr = "ftp://x:1" }, "want http://host:port or https://host:port"},
		"TokenWithoutAddr":    {func(c *Config) { c.AuthToken = "t" }, "are for a server at --addr"},
		"TLSWithoutAddr":      {func(c *Config) { c.CACert = "ca.pem" }, "are for a server at --addr"},
		"GuardInCluster":      {func(c *Config) { c.Cluster, c.Guard = ClusterEtcd, "postgres://127.0.0.1:1/db" }, "--guard takes the leases"},
		"GuardBadURL":         {func(c *Config) { c.Guard = "postgres://127.0.0.1:1/db?sslmode=nonsense" }, "--guard"},
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
	if got, want := DefaultFaults(""), []string{FaultPause, FaultKill, FaultNet, FaultBitflip, FaultLoseUnsynced}; !slices.Equal(got, want) {
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

func TestFaultGap(t *testing.T) {
	t.Run("SameAsBefore", func(t *testing.T) {
		// The gap the harness drew before --fault-every: 500 + IntN(1500) ms.
		a, b := newRNG(7), newRNG(7)
		for range 100 {
			if got, want := faultGap(DefaultFaultEvery, a), time.Duration(500+b.IntN(1500))*time.Millisecond; got != want {
				t.Fatalf("gap %s, want %s", got, want)
			}
		}
	})
	t.Run("Range", func(t *testing.T) {
		for _, every := range []time.Duration{10 * time.Millisecond, 300 * time.Millisecond, 5 * time.Second, time.Hour} {
			rng := newRNG(1)
			var sum time.Duration
			const n = 2000
			for range n {
				g := faultGap(every, rng)
				if g < every*2/5 || g >= every*8/5 {
					t.Fatalf("every %s: gap %s outside [0.4, 1.6) of it", every, g)
				}
				sum += g
			}
			if mean := sum / n; mean < every*9/10 || mean > every*11/10 {
				t.Errorf("every %s: mean gap %s", every, mean)
			}
		}
	})
}

func TestConfig_ValidateFaultEvery(t *testing.T) {
	base := Config{Binary: "fence", History: "h.jsonl", Duration: time.Minute, Clients: 2, Resources: 1, TTL: time.Second, Faults: []string{FaultNet}}
	for _, tc := range []struct {
		every time.Duration
		want  string // "" valid
	}{
		{0, ""}, // the default
		{10 * time.Millisecond, ""},
		{time.Minute, ""},
		{-time.Second, "fault-every must be 10ms..1h, not -1s"},
		{9 * time.Millisecond, "fault-every must be 10ms..1h, not 9ms"},
		{2 * time.Hour, "fault-every must be 10ms..1h, not 2h0m0s"},
		{2 * time.Minute, ""}, // gaps of 48s to 3m12s: a fault may come
		{150 * time.Second, "fault-every 2m30s: its shortest gap, 1m0s, is not shorter than the duration 1m0s"},
	} {
		cfg := base
		cfg.FaultEvery = tc.every
		err := cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("FaultEvery %s: %v", tc.every, err)
		case tc.want == "" && cfg.FaultEvery == 0:
			t.Errorf("FaultEvery 0: not filled with the default")
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("FaultEvery %s: %v, want %q", tc.every, err, tc.want)
		}
	}
	// No fault, no gap to mind.
	cfg := base
	cfg.Faults, cfg.FaultEvery = nil, 150*time.Second
	if err := cfg.Validate(); err != nil {
		t.Errorf("no faults, FaultEvery 2m: %v", err)
	}
}
