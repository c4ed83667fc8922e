package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The tests share one PostgreSQL server, started by TestMain from the
// binaries of the local installation (initdb and postgres, on PATH or in
// /usr/lib/postgresql/*/bin, as Debian's postgresql package installs them),
// in a temporary directory, listening on 127.0.0.1 on a free port, with
// trust authentication, and fsync and synchronous_commit off. As root, it runs as the "postgres" user,
// since PostgreSQL refuses to run as root. Each test works in a schema of its own.

// requireServers names the variable that turns a missing server into a failure (CI sets it).
const requireServers = "FENCE_REQUIRE_SERVERS"

var (
	testPool *pgxpool.Pool
	noServer error // why there is no server: errNoBinaries, or a failed start
	schemaN  atomic.Int64
)

var errNoBinaries = errors.New("PostgreSQL is not installed (initdb and postgres not on PATH nor in /usr/lib/postgresql/*/bin, or no \"postgres\" user to run them as root): apt-get install postgresql")

func TestMain(m *testing.M) {
	// The server gets SIGQUIT (immediate shutdown) when the thread that
	// started it exits (Pdeathsig): keep this one until the process ends, so
	// that a test binary that dies or times out leaves no server behind.
	runtime.LockOSThread()
	srv, err := startServer()
	if err != nil {
		noServer = err
	} else {
		testPool, err = pgxpool.New(context.Background(), srv.url+"&pool_max_conns=16")
		if err != nil {
			noServer = err
		}
	}
	code := m.Run()
	stopReplicated()
	if testPool != nil {
		testPool.Close()
	}
	if srv != nil {
		srv.stop()
	}
	os.Exit(code)
}

// testDB returns the shared pool. It skips the test when PostgreSQL is not
// installed, unless FENCE_REQUIRE_SERVERS=1, and fails it when the server did
// not start.
func testDB(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	switch {
	case noServer == nil:
		return testPool
	case errors.Is(noServer, errNoBinaries) && os.Getenv(requireServers) != "1":
		tb.Skipf("%v (%s=1 makes this a failure)", noServer, requireServers)
	}
	tb.Fatalf("no PostgreSQL server: %v", noServer)
	return nil
}

// newSchema creates a schema for one test and returns its name.
func newSchema(tb testing.TB) string {
	tb.Helper()
	db := testDB(tb)
	name := fmt.Sprintf("test_%d", schemaN.Add(1))
	if _, err := db.Exec(context.Background(), "CREATE SCHEMA "+name); err != nil {
		tb.Fatal(err)
	}
	return name
}

type server struct {
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	url  string
}

// startServer runs initdb in a new temporary directory and starts postgres
// on a free loopback port, retrying with another port if that one is taken.
func startServer() (*server, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errNoBinaries, err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	dir, err := os.MkdirTemp(tempRoot(cred != nil), "fence-postgres-")
	if err != nil {
		return nil, err
	}
	s := &server{dir: dir}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			s.stop()
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		s.stop()
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	for attempt := 0; ; attempt++ {
		err := s.start(bin, data, cred)
		if err == nil {
			return s, nil
		}
		if attempt == 2 {
			s.stop()
			return nil, err
		}
	}
}

func (s *server) start(bin, data string, cred *syscall.Credential) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	logPath := filepath.Join(s.dir, "postgres.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
		"-h", "127.0.0.1", "-k", "", // TCP on loopback only, no Unix socket
		"-F", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", // a throwaway cluster
		"-c", "max_connections=50")
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	cmd, done := s.cmd, make(chan struct{})
	s.done = done
	go func() { cmd.Wait(); close(done) }()
	s.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		select {
		case <-s.done:
			log, _ := os.ReadFile(logPath)
			s.cmd = nil
			return fmt.Errorf("postgres exited at start:\n%s", log)
		case <-ctx.Done():
			s.halt()
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres not ready after 30s:\n%s", log)
		case <-time.After(50 * time.Millisecond):
		}
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgx.Connect(cctx, s.url)
		ccancel()
		if err == nil {
			conn.Close(ctx)
			return nil
		}
	}
}

// stop stops the server and removes its directory.
func (s *server) stop() {
	s.halt()
	os.RemoveAll(s.dir)
}

// halt shuts the server down at once: it holds nothing worth a checkpoint.
func (s *server) halt() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

// findBinaries returns the directory of initdb and postgres: on PATH, or
// the newest /usr/lib/postgresql/N/bin.
func findBinaries() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real // a link to /usr/lib/postgresql/N/bin/initdb: postgres is there
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	installed, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(installed, func(a, b string) int { return version(b) - version(a) })
	for _, dir := range append(dirs, installed...) {
		if isFile(filepath.Join(dir, "initdb")) && isFile(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	return "", errNoBinaries
}

// version returns N of /usr/lib/postgresql/N/bin.
func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// tempRoot returns os.TempDir(), or /tmp if the server's user could not
// reach a directory in it.
func tempRoot(otherUser bool) string {
	root := os.TempDir()
	if !otherUser {
		return root
	}
	for dir := root; ; dir = filepath.Dir(dir) {
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if dir == filepath.Dir(dir) {
			return root
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
