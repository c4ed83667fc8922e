package main

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fence-lock/fence/auth"
	"github.com/fence-lock/fence/internal/tools/chaos/runreport/reporttest"
	"github.com/fence-lock/fence/internal/tools/testserver"
)

// chaosResult is the part of fence chaos -o json that the tests look at.
type chaosResult struct {
	OK              bool           `json:"ok"`
	Ops             int            `json:"ops"`
	Faults          map[string]int `json:"faults"`
	PausesPastTTL   int            `json:"pauses_past_ttl"`
	FencedByPauses  int            `json:"fenced_by_pauses"`
	Accepted        int            `json:"accepted"`
	Fenced          int            `json:"fenced"`
	StaleAttempts   int            `json:"stale_attempts"`
	Violations      int            `json:"violations"`
	LostAckedWrites int            `json:"lost_acked_writes"`
	Checkers        map[string]int `json:"checkers"`
	Guard           bool           `json:"guard"`
	History         string         `json:"history"`
	FaultsBit       bool           `json:"faults_bit"`
	OpsByOutcome    map[string]int `json:"ops_by_outcome"`
	Report          string         `json:"report"`
	Linearizability struct {
		HTML string `json:"html"`
	} `json:"linearizability"`
}

// runChaos runs fence chaos -o json with args in this process, its server
// and clients being this test binary, and returns its report and exit code.
func runChaos(t *testing.T, args ...string) (chaosResult, int, string) {
	t.Helper()
	fenceBinary(t)
	hist := filepath.Join(t.TempDir(), "history.jsonl")
	code, stdout, stderr := runFence(t.Context(), "", append([]string{"chaos", "-o", "json", "--history", hist}, args...)...)
	var rep chaosResult
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("fence chaos %v: exit %d, stdout %q: %v\n%s", args, code, stdout, err, stderr)
	}
	t.Logf("fence chaos %v: exit %d\n%s", args, code, stderr)
	return rep, code, stderr
}

func TestChaos_Flags(t *testing.T) {
	fenceBinary(t) // should a case start a run, its children are fence, not these tests
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--fault-every", "0s"}, "fault-every must be 10ms..1h, not 0s"},
		{[]string{"--fault-every", "-1s"}, "fault-every must be 10ms..1h, not -1s"},
		{[]string{"--fault-every", "5ms"}, "fault-every must be 10ms..1h, not 5ms"},
		{[]string{"--fault-every", "2h"}, "fault-every must be 10ms..1h, not 2h0m0s"},
		{[]string{"--fault-every", "3m", "--duration", "1m"}, "its shortest gap, 1m12s, is not shorter than the duration 1m0s"},
		{[]string{"--fault-every", "1"}, `--fault-every "1": a duration needs a unit, e.g. 1s`},
		{[]string{"--auth-token", "s3cret"}, "--auth-token is for a server at --addr"},
		{[]string{"--cacert", "ca.pem"}, "--cacert is for a server at --addr"},
		{[]string{"--addr", "http://127.0.0.1:1", "--client-cert", "c.pem", "--faults", "pause"}, "--client-cert and --client-key go together"},
		{[]string{"--addr", "http://127.0.0.1:1,http://127.0.0.1:2", "--faults", "pause"}, "--addr: one server, not a list"},
		{[]string{"--guard", "postgres://127.0.0.1:1/db", "--cluster", "etcd"}, "--guard takes the leases from one fence server"},
		{[]string{"--guard", "postgres://127.0.0.1:1/db?sslmode=nonsense"}, "--guard:"},
		{[]string{"--progress", "sometimes"}, `--progress "sometimes": want auto, always or never`},
		{[]string{"--report", t.TempDir()}, "is a directory"},
		{[]string{"--report", filepath.Join(t.TempDir(), "no", "such", "dir", "r.html")}, "--report: open "},
	} {
		code, _, stderr := runFence(t.Context(), "", append([]string{"chaos"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("fence chaos %v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
	// FENCE_AUTH_TOKEN, for the other commands, is not an error without
	// --addr: it is not read.
	t.Setenv("FENCE_AUTH_TOKEN", "s3cret")
	if code, _, stderr := runFence(t.Context(), "", "chaos", "--duration", "1s", "--faults", "", "--clients", "1", "--resources", "1", "--keys", "1"); code != 0 {
		t.Errorf("fence chaos with FENCE_AUTH_TOKEN set: exit %d\n%s", code, stderr)
	}
}

// TestChaos_TLSAuth aims fence chaos at a deployment with TLS, client
// certificates and bearer tokens: a fence serve with --tls-cert,
// --client-ca and --auth-file. The token comes from FENCE_AUTH_TOKEN, as
// for the other commands.
func TestChaos_TLSAuth(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.issue(t, "server", "127.0.0.1", true)
	// A certificate whose name has no grant: the token is what authorises.
	clientCert, clientKey := pki.issue(t, "chaos", "chaos-client", false)
	authFile := filepath.Join(t.TempDir(), "auth")
	content := "chaos " + auth.HashToken("chaos-token") + " lock:r read:r write:r\n" +
		"reader " + auth.HashToken("reader-token") + " read:*\n"
	if err := os.WriteFile(authFile, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := "https://" + startServe(t, "--tls-cert", cert, "--tls-key", key, "--client-ca", pki.caFile, "--auth-file", authFile)
	tlsArgs := []string{"--addr", addr, "--cacert", pki.caFile, "--client-cert", clientCert, "--client-key", clientKey}

	t.Run("OK", func(t *testing.T) {
		t.Setenv("FENCE_AUTH_TOKEN", "chaos-token")
		// Twice: the second run must not see the first's data.
		for _, seed := range []string{"1", "2"} {
			rep, code, _ := runChaos(t, append(tlsArgs, "--duration", "8s", "--seed", seed, "--faults", "pause,net", "--fault-every", "500ms")...)
			if code != 0 || !rep.OK || rep.Violations != 0 || rep.LostAckedWrites != 0 {
				t.Fatalf("seed %s: exit %d, report %+v", seed, code, rep)
			}
			if rep.Accepted == 0 || rep.Faults["pause"] == 0 || rep.Faults["net"] == 0 {
				t.Fatalf("seed %s: the run did not write through the faults: %+v", seed, rep)
			}
		}
	})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"NoToken", nil, "fence: chaos: the server at " + addr + ": unauthorized"},
		{"WrongToken", []string{"--auth-token", "wrong"}, "unauthorized"},
		{"ReadOnlyToken", []string{"--auth-token", "reader-token"}, `forbidden: "reader" has no lock permission on "r0" (the run needs lock, read and write on r0..r3)`},
		{"NoClientCert", []string{"--auth-token", "chaos-token", "--client-cert", "", "--client-key", ""}, "the server at " + addr + " wants a client certificate: give --client-cert and --client-key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("FENCE_AUTH_TOKEN", "")
			fenceBinary(t)
			args := append(append([]string{"chaos", "--duration", "5s", "--faults", "pause"}, tlsArgs...), tc.args...)
			code, _, stderr := runFence(t.Context(), "", args...)
			if code != exitFailure || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, exitFailure, tc.want)
			}
		})
	}
}

// TestChaos_Workloads runs each workload of holds but the default one
// under pauses and kills: sessions (a paused client's session, and every
// lease in it, expires at once), shared holds (readers and writers of one
// resource never hold beside each other), permits (never more than a
// semaphore's limit) and multi-acquires (a refused one holds nothing); a
// paused holder's write is fenced. A run too short
// for a fenced write runs again, longer.
func TestChaos_Workloads(t *testing.T) {
	for _, workload := range []string{"session", "shared", "semaphore", "multi"} {
		t.Run(workload, func(t *testing.T) {
			var rep chaosResult
			for _, dur := range []string{"6s", "12s", "24s"} {
				var code int
				rep, code, _ = runChaos(t, "--workload", workload, "--duration", dur, "--seed", "7", "--faults", "pause,kill", "--fault-every", "500ms")
				if code != 0 || !rep.OK || rep.Violations != 0 || rep.LostAckedWrites != 0 {
					t.Fatalf("%s: exit %d, report %+v; history %s", dur, code, rep, rep.History)
				}
				if rep.Accepted > 0 && rep.PausesPastTTL > 0 && rep.Fenced > 0 {
					return
				}
			}
			t.Fatalf("no run fenced a paused client's write: %+v", rep)
		})
	}
}

// TestChaos_WorkloadsUnsafe is the negative control of each workload of
// holds: on storage that ignores tokens, the stale writes of paused
// holders (whose sessions expired, whose shared or exclusive holds, permits
// or multi-acquired leases were taken over) must be found. The runs go on,
// longer, until a stale write is sent.
func TestChaos_WorkloadsUnsafe(t *testing.T) {
	for _, workload := range []string{"session", "shared", "semaphore", "multi"} {
		t.Run(workload, func(t *testing.T) {
			var rep chaosResult
			var code int
			for _, d := range []string{"6s", "12s", "24s", "48s"} {
				rep, code, _ = runChaos(t, "--workload", workload, "--duration", d, "--seed", "2", "--unsafe", "--faults", "pause", "--fault-every", "300ms")
				if rep.StaleAttempts > 0 {
					break
				}
			}
			if rep.StaleAttempts == 0 {
				t.Fatalf("no stale write was sent in 90 s of pauses: %+v", rep)
			}
			if code != exitViolation || rep.Violations == 0 || rep.Checkers["stale-accepted"] == 0 {
				t.Fatalf("exit %d, report %+v: want stale-accepted violations", code, rep)
			}
		})
	}
}

// startGuardDB starts a throwaway PostgreSQL for a guard run and returns
// its connection URL; it skips the test where PostgreSQL is not installed,
// unless FENCE_REQUIRE_SERVERS=1.
func startGuardDB(t *testing.T) string {
	t.Helper()
	pg, err := testserver.StartPostgres(testserver.TempDir(t), testserver.PostgresOptions{Throwaway: true})
	testserver.Require(t, err)
	t.Cleanup(func() { pg.Close() })
	return pg.Primary.URL()
}

// TestChaos_Guard runs the workload through fence's PostgreSQL guard: leases
// from the embedded server, writes to a real PostgreSQL with their tokens,
// every fault; the guard must hold, and the run must leave no table behind.
func TestChaos_Guard(t *testing.T) {
	db := startGuardDB(t)
	t.Setenv("FENCE_GUARD", db) // the flag's twin: a connection string may hold a password
	// A fault can take seconds (a damaged record is found and repaired), so
	// a run too short for every kind and a fenced write runs again, longer.
	var (
		rep  chaosResult
		html string
		dur  string
	)
	for _, dur = range []string{"12s", "24s", "48s"} {
		html = filepath.Join(t.TempDir(), "guard.html")
		var code int
		rep, code, _ = runChaos(t, "--duration", dur, "--seed", "3", "--fault-every", "500ms", "--report", html)
		if code != 0 || !rep.OK || !rep.Guard || rep.Violations != 0 || rep.LostAckedWrites != 0 {
			t.Fatalf("exit %d, report %+v; history %s", code, rep, rep.History)
		}
		if rep.Faults["pause"] > 0 && rep.Faults["kill"] > 0 && rep.Faults["net"] > 0 && rep.Accepted > 0 && rep.PausesPastTTL > 0 && rep.Fenced > 0 {
			break
		}
	}
	// The report draws the run through the guard, and keeps its secret.
	doc := reporttest.ReadPage(t, html)
	ops, faults := reporttest.HistoryOps(t, rep.History)
	reporttest.CheckMarks(t, doc, ops, nil)
	reporttest.CheckFaults(t, doc, faults, rep.Faults)
	if !strings.Contains(doc, "writes through the PostgreSQL guard") || !strings.Contains(doc, "FENCE_GUARD=… fence chaos --duration "+dur+" --seed 3") {
		t.Error("the report does not say that the run wrote through the guard, or how to run it again")
	}
	if u, err := url.Parse(db); err != nil || strings.Contains(doc, u.Host) || strings.Contains(doc, db) {
		t.Errorf("the report shows the guard's connection string (%v)", err)
	}
	for _, kind := range []string{"pause", "kill", "net"} {
		if rep.Faults[kind] == 0 {
			t.Errorf("no %s fault in %s: %v", kind, dur, rep.Faults)
		}
	}
	t.Logf("%+v", rep)
	if rep.Accepted == 0 || rep.PausesPastTTL == 0 || rep.Fenced == 0 {
		t.Fatalf("the run proves nothing (nothing fenced by the guard): %+v", rep)
	}
	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var left int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_class WHERE relname LIKE 'fence_chaos_%'`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d of the run's tables and sequences left behind (%v)", left, err)
	}
}

// TestChaos_GuardUnsafe is the guard's negative control: the same workload,
// its writes bypassing the guard, must be caught by the checker.
func TestChaos_GuardUnsafe(t *testing.T) {
	db := startGuardDB(t)
	rep, code, _ := runChaos(t, "--guard", db, "--unsafe", "--duration", "12s", "--seed", "2", "--faults", "pause", "--fault-every", "300ms")
	if code != exitViolation || rep.Violations == 0 || rep.Checkers["stale-accepted"] == 0 {
		t.Fatalf("exit %d, report %+v: want violations (exit %d)", code, rep, exitViolation)
	}
}

// startS3Guard starts SeaweedFS with a bucket for a guard run, and returns
// the run's --guard location.
func startS3Guard(t *testing.T) string {
	t.Helper()
	s, err := testserver.StartSeaweedFS(testserver.TempDir(t))
	testserver.Require(t, err)
	t.Cleanup(func() { s.Close() })
	if err := s.CreateBucket("chaos"); err != nil {
		t.Fatal(err)
	}
	return "s3://chaos/runs?endpoint=" + s.S3
}

// TestChaos_GuardS3 runs the workload through the S3 guard against
// SeaweedFS, under pauses, kills of the lock server and network faults on
// the way to the endpoint: fencing must hold, and a paused holder's write
// must be fenced by the guard. Its negative control, with --unsafe (the
// writes skip the fence), must find the stale writes.
func TestChaos_GuardS3(t *testing.T) {
	guard := startS3Guard(t)
	t.Setenv("FENCE_GUARD", guard)
	var rep chaosResult
	for _, dur := range []string{"12s", "24s", "48s"} {
		var code int
		rep, code, _ = runChaos(t, "--duration", dur, "--seed", "3", "--fault-every", "500ms", "--faults", "pause,kill,net")
		if code != 0 || !rep.OK || !rep.Guard || rep.Violations != 0 || rep.LostAckedWrites != 0 {
			t.Fatalf("%s: exit %d, report %+v; history %s", dur, code, rep, rep.History)
		}
		if rep.Faults["pause"] > 0 && rep.Faults["net"] > 0 && rep.Accepted > 0 && rep.PausesPastTTL > 0 && rep.Fenced > 0 {
			break
		}
	}
	t.Logf("%+v", rep)
	if rep.Accepted == 0 || rep.PausesPastTTL == 0 || rep.Fenced == 0 {
		t.Fatalf("the run proves nothing (nothing fenced by the guard): %+v", rep)
	}

	t.Run("Unsafe", func(t *testing.T) {
		for _, dur := range []string{"8s", "16s", "32s"} {
			var code int
			rep, code, _ = runChaos(t, "--unsafe", "--duration", dur, "--seed", "2", "--faults", "pause", "--fault-every", "300ms")
			if rep.StaleAttempts == 0 {
				continue
			}
			if code != exitViolation || rep.Violations == 0 || rep.Checkers["stale-accepted"] == 0 {
				t.Fatalf("exit %d, report %+v: want stale-accepted violations (exit %d)", code, rep, exitViolation)
			}
			return
		}
		t.Fatalf("no stale write was sent: %+v", rep)
	})
}

// TestChaos_FaultEvery: a shorter gap makes more faults in the same time.
// With a TTL of 100ms a net fault lasts 0.3 to 0.5 s.
func TestChaos_FaultEvery(t *testing.T) {
	count := func(every string) int {
		rep, code, _ := runChaos(t, "--duration", "4s", "--seed", "4", "--faults", "net", "--fault-every", every, "--clients", "2", "--resources", "1", "--ttl", "100ms")
		if code != 0 {
			t.Fatalf("--fault-every %s: exit %d, report %+v", every, code, rep)
		}
		return rep.Faults["net"]
	}
	start := time.Now()
	often, rarely := count("50ms"), count("2s")
	if often < 2*rarely {
		t.Fatalf("net faults: %d with --fault-every 50ms, %d with 2s; want at least twice as many with the shorter gap", often, rarely)
	}
	t.Logf("%d and %d faults in %s", often, rarely, time.Since(start))
}

// TestChaos_Restore backs the embedded server's store up and restores it,
// bumped, under load: the checkers hold the restored state to the backup
// and what follows to tokens above every one issued before. Its negative
// control restores without the bump: the checkers must find tokens issued
// twice, as the issue's restore did.
func TestChaos_Restore(t *testing.T) {
	t.Run("bumped", func(t *testing.T) {
		rep, code, _ := runChaos(t, "--faults", "restore,pause", "--duration", "12s", "--seed", "3", "--fault-every", "300ms")
		if code != 0 || !rep.OK || rep.Violations != 0 {
			t.Fatalf("exit %d, report %+v", code, rep)
		}
		if rep.Faults["restore"] < 2 || rep.OpsByOutcome["restore/ok"] == 0 {
			t.Fatalf("no backup restored: faults %v, ops %v", rep.Faults, rep.OpsByOutcome)
		}
	})
	t.Run("not bumped", func(t *testing.T) {
		rep, code, _ := runChaos(t, "--faults", "restore", "--unsafe-journal", "--duration", "10s", "--seed", "5", "--fault-every", "300ms")
		if code != 7 || rep.Checkers["token-monotonic"] == 0 {
			t.Fatalf("exit %d, report %+v: want tokens issued twice found (exit 7)", code, rep)
		}
	})
}

// TestChaos_ClockSkew steps the embedded server's wall clock ahead, again
// and again, and strobes it: leases are timed by the monotonic clock, so
// none ends early (lease-exclusive) and fencing holds. The negative control
// times them by that wall clock: the checkers must find the grants that
// came while another client's lease still ran. e2e's
// TestChaos_ClusterSkewAndPartitions does the same on an etcd cluster.
func TestChaos_ClockSkew(t *testing.T) {
	args := []string{"--faults", "clock-skew,pause", "--duration", "10s", "--seed", "4", "--fault-every", "1s"}
	t.Run("monotonic", func(t *testing.T) {
		rep, code, _ := runChaos(t, args...)
		if code != 0 || !rep.OK || rep.Violations != 0 || rep.Faults["clock-skew"] == 0 {
			t.Fatalf("exit %d, report %+v", code, rep)
		}
	})
	t.Run("unsafe", func(t *testing.T) {
		rep, code, _ := runChaos(t, append(args, "--unsafe-clock", "--duration", "8s")...)
		if code != 7 || rep.Checkers["lease-exclusive"] == 0 {
			t.Fatalf("exit %d, report %+v: want early grants found (exit 7)", code, rep)
		}
	})
}
