package testserver_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fence-lock/fence/internal/tools/testserver"
)

func TestStartEtcd(t *testing.T) {
	e, err := testserver.StartEtcd(t.TempDir(), 3)
	testserver.Require(t, err)
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})

	// Every member serves clients.
	for _, m := range e.Members {
		cli := newEtcdClient(t, m.ClientURL)
		if _, err := cli.Put(timeout(t, 10*time.Second), "k/"+m.Name, m.Name); err != nil {
			t.Fatalf("Put through %s: %v", m.Name, err)
		}
	}
	cli := newEtcdClient(t, e.Endpoints()...)
	resp, err := cli.Get(timeout(t, 10*time.Second), "k/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 3 {
		t.Fatalf("Get k/: %d keys, want 3", len(resp.Kvs))
	}

	leader, err := e.Leader(timeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := leader.Kill(); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
	if pid := leader.PID(); pid != 0 {
		t.Fatalf("PID=%d after Kill, want 0", pid)
	}

	// The other two elect a leader and accept writes.
	start := time.Now()
	next, err := e.Leader(timeout(t, 20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if next == leader {
		t.Fatalf("Leader=%s, the killed member", next.Name)
	}
	t.Logf("%s killed, %s elected in %v", leader.Name, next.Name, time.Since(start).Round(time.Millisecond))
	putRetry(t, cli, "after-kill", "1")

	// The killed member restarts on its data and rejoins.
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	rctx := timeout(t, 20*time.Second)
	for {
		st, err := leader.Status(timeout(t, time.Second))
		if err == nil && st.Leader != 0 {
			break
		}
		if rctx.Err() != nil {
			t.Fatalf("%s restarted: Status: %v", leader.Name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	got, err := newEtcdClient(t, leader.ClientURL).Get(timeout(t, 10*time.Second), "after-kill")
	if err != nil {
		t.Fatalf("Get through the restarted %s: %v", leader.Name, err)
	}
	if len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "1" {
		t.Fatalf("Get after-kill through the restarted %s: %v, want 1", leader.Name, got.Kvs)
	}

	// A paused follower does not answer; the quorum still does.
	follower := e.Members[0]
	if follower == next {
		follower = e.Members[1]
	}
	if err := follower.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := follower.Pause(); err != nil {
		t.Fatalf("second Pause: %v", err)
	}
	if _, err := follower.Status(timeout(t, 300*time.Millisecond)); err == nil {
		t.Fatalf("paused %s answered Status", follower.Name)
	}
	if err := e.WaitHealthy(timeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := follower.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := follower.Resume(); err != nil {
		t.Fatalf("second Resume: %v", err)
	}
	if _, err := follower.Status(timeout(t, 5*time.Second)); err != nil {
		t.Fatalf("resumed %s: Status: %v", follower.Name, err)
	}
}

func TestEtcdMember_PauseKilled(t *testing.T) {
	e, err := testserver.StartEtcd(t.TempDir(), 1)
	testserver.Require(t, err)
	m := e.Members[0]
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := m.Pause(); !errors.Is(err, testserver.ErrNotRunning) {
		t.Fatalf("Pause of a killed member: %v, want ErrNotRunning", err)
	}
	if err := m.Resume(); err != nil {
		t.Fatalf("Resume of a killed member: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestStartPostgres(t *testing.T) {
	pg, err := testserver.StartPostgres(testserver.TempDir(t), testserver.PostgresOptions{Standby: true})
	testserver.Require(t, err)
	t.Cleanup(func() {
		if err := pg.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	ctx := t.Context()

	primary := pgConnect(t, pg.Primary.URL())
	mustExec := func(conn *pgx.Conn, sql string) {
		t.Helper()
		if _, err := conn.Exec(timeout(t, 10*time.Second), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for _, setting := range []string{"fsync", "synchronous_commit", "full_page_writes"} {
		if got := pgShow(t, primary, setting); got != "on" {
			t.Fatalf("%s=%s, want on", setting, got)
		}
	}
	if got := pgShow(t, primary, "synchronous_standby_names"); got != testserver.StandbyName {
		t.Fatalf("synchronous_standby_names=%q, want %q", got, testserver.StandbyName)
	}
	mustExec(primary, "SET synchronous_commit = on")
	mustExec(primary, "CREATE TABLE t (v text)")
	mustExec(primary, "INSERT INTO t VALUES ('before')")
	primary.Close(ctx)

	// synchronous_commit=on waits for the standby's flush, not its replay:
	// the row is durable there, and becomes visible a moment later.
	standby := pgConnect(t, pg.Standby.URL())
	waitRows(t, standby, "before")
	standby.Close(ctx)

	if err := pg.Primary.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := pg.Primary.Kill(); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
	if pid := pg.Primary.PID(); pid != 0 {
		t.Fatalf("PID=%d after Kill, want 0", pid)
	}
	if err := pg.Standby.Promote(timeout(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := pg.Standby.Promote(timeout(t, 30*time.Second)); err != nil {
		t.Fatalf("second Promote: %v", err)
	}

	// The multi-host URL skips the dead primary and finds the promoted node.
	conn := pgConnect(t, pg.URL())
	if got, want := remotePort(conn), pg.Standby.Port; got != want {
		t.Fatalf("URL connected to port %d, want the promoted standby's %d", got, want)
	}
	waitRows(t, conn, "before")
	mustExec(conn, "INSERT INTO t VALUES ('after')")
	conn.Close(ctx)

	// A paused node does not answer; a resumed one does.
	if err := pg.Standby.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := pg.Standby.Pause(); err != nil {
		t.Fatalf("second Pause: %v", err)
	}
	if c, err := pgx.Connect(timeout(t, 300*time.Millisecond), pg.Standby.URL()); err == nil {
		c.Close(ctx)
		t.Fatal("paused node accepted a connection")
	}
	if err := pg.Standby.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := pg.Standby.Resume(); err != nil {
		t.Fatalf("second Resume: %v", err)
	}

	// kill -9 loses no committed row: crash recovery on Start.
	if err := pg.Standby.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := pg.Standby.Start(); err != nil {
		t.Fatal(err)
	}
	conn = pgConnect(t, pg.URL())
	waitRows(t, conn, "before", "after")
	conn.Close(ctx)
}

func TestPGNode_KillPaused(t *testing.T) {
	pg, err := testserver.StartPostgres(testserver.TempDir(t), testserver.PostgresOptions{})
	testserver.Require(t, err)
	t.Cleanup(func() { pg.Close() })
	n := pg.Primary
	postmaster, err := testserver.NewProcID(n.PID())
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	kids, err := testserver.Descendants(postmaster.PID())
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) == 0 {
		t.Fatal("the postmaster has no children")
	}
	for _, k := range append(kids, postmaster) {
		if s := k.State(); s != 'T' {
			t.Fatalf("paused: pid %d in state %c, want T", k.PID(), s)
		}
	}
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	for _, k := range append(kids, postmaster) {
		if k.Alive() {
			t.Fatalf("pid %d alive after Kill", k.PID())
		}
	}
	if err := n.Pause(); !errors.Is(err, testserver.ErrNotRunning) {
		t.Fatalf("Pause of a killed node: %v, want ErrNotRunning", err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	conn := pgConnect(t, pg.URL())
	conn.Close(t.Context())
	if err := pg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pg.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// childEnv names the variable that makes TestNoServerOutlivesItsStarter the
// child: it holds the directory to start the servers in.
const childEnv = "TESTSERVER_CHILD_DIR"

// TestNoServerOutlivesItsStarter runs this test binary again as a child that
// starts etcd and PostgreSQL, pauses PostgreSQL, prints the pids of all its
// descendants and waits; it kills the child with SIGKILL, and checks that
// every one of those processes is gone soon after.
func TestNoServerOutlivesItsStarter(t *testing.T) {
	if dir := os.Getenv(childEnv); dir != "" {
		runChild(t, dir)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoServerOutlivesItsStarter$", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), childEnv+"="+testserver.TempDir(t))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var procs []testserver.ProcID
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		line := lines.Text()
		if rest, ok := strings.CutPrefix(line, "SKIP "); ok {
			cmd.Process.Kill()
			cmd.Wait()
			testserver.Require(t, fmt.Errorf("child: %s: %w", rest, testserver.ErrNotInstalled))
		}
		rest, ok := strings.CutPrefix(line, "PIDS ")
		if !ok {
			continue
		}
		for _, f := range strings.Fields(rest) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			p, err := testserver.NewProcID(pid)
			if err != nil {
				t.Fatal(err)
			}
			procs = append(procs, p)
		}
		break
	}
	if procs == nil {
		cmd.Wait()
		t.Fatalf("child printed no pids")
	}
	t.Logf("child %d started %d processes", cmd.Process.Pid, len(procs))
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for _, p := range procs {
		for p.Alive() {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d (state %c) outlived the child", p.PID(), p.State())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// runChild is the child of TestNoServerOutlivesItsStarter.
func runChild(t *testing.T, dir string) {
	e, err := testserver.StartEtcd(dir, 1)
	if errors.Is(err, testserver.ErrNotInstalled) {
		fmt.Printf("SKIP %v\n", err)
		return
	} else if err != nil {
		t.Fatal(err)
	}
	pg, err := testserver.StartPostgres(dir, testserver.PostgresOptions{})
	if errors.Is(err, testserver.ErrNotInstalled) {
		fmt.Printf("SKIP %v\n", err)
		return
	} else if err != nil {
		t.Fatal(err)
	}
	if err := pg.Primary.Pause(); err != nil {
		t.Fatal(err)
	}
	procs, err := testserver.Descendants(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, p := range procs {
		pids = append(pids, strconv.Itoa(p.PID()))
	}
	fmt.Printf("PIDS %s\n", strings.Join(pids, " "))
	time.Sleep(time.Minute) // until the parent kills this process
	e.Close()
	pg.Close()
	t.Fatal("not killed")
}

func newEtcdClient(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// putRetry puts key until it succeeds, for 10 s: the client may first try
// a connection to the killed member.
func putRetry(t *testing.T, cli *clientv3.Client, key, value string) {
	t.Helper()
	ctx := timeout(t, 10*time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Put(pctx, key, value)
		cancel()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("Put %s: %v", key, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func pgConnect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(timeout(t, 10*time.Second), url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	return conn
}

func pgShow(t *testing.T, conn *pgx.Conn, setting string) string {
	t.Helper()
	var v string
	if err := conn.QueryRow(timeout(t, 10*time.Second), "SHOW "+setting).Scan(&v); err != nil {
		t.Fatalf("SHOW %s: %v", setting, err)
	}
	return v
}

// waitRows waits, for 10 s, until table t holds exactly want.
func waitRows(t *testing.T, conn *pgx.Conn, want ...string) {
	t.Helper()
	ctx := timeout(t, 10*time.Second)
	var got []string
	for {
		rows, err := conn.Query(ctx, "SELECT v FROM t ORDER BY v DESC")
		if err == nil {
			got, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err == nil && strings.Join(got, ",") == strings.Join(want, ",") {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("rows=%v (%v), want %v", got, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func remotePort(conn *pgx.Conn) int {
	return conn.PgConn().Conn().RemoteAddr().(*net.TCPAddr).Port
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
