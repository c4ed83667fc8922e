package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// StandbyName is the standby's name: its application_name, and the primary's
// synchronous_standby_names.
const StandbyName = "standby1"

// pgConf is appended to the primary's postgresql.conf, which pg_basebackup
// copies to the standby. The durability settings are PostgreSQL's defaults,
// the production ones, written out so that nothing weakens them unseen.
const pgConf = `
# Written by fence's internal/tools/testserver.
listen_addresses = '127.0.0.1'
unix_socket_directories = ''	# TCP on loopback only
fsync = on
synchronous_commit = on
full_page_writes = on
wal_level = replica
max_wal_senders = 10
max_replication_slots = 10
hot_standby = on
`

// pgHBA replaces pg_hba.conf: the postgres user alone, from 127.0.0.1 alone,
// for sessions and for replication, without a password.
const pgHBA = `# Written by fence's internal/tools/testserver.
# TYPE  DATABASE     USER      ADDRESS        METHOD
host    all          postgres  127.0.0.1/32   trust
host    replication  postgres  127.0.0.1/32   trust
`

// PostgresOptions configure StartPostgres. The zero value starts a primary
// alone.
type PostgresOptions struct {
	// Standby adds one synchronous streaming standby, named StandbyName: a
	// commit on the primary returns once the standby has flushed its WAL.
	// False: no standby.
	Standby bool
	// Throwaway turns fsync, synchronous_commit and full_page_writes off,
	// for tests of code whose durability is not under test (the guards):
	// a crash of the machine can lose or corrupt the cluster. It cannot go
	// with Standby.
	Throwaway bool
	// MaxConnections is max_connections; zero means PostgreSQL's default.
	MaxConnections int
}

// Postgres is a PostgreSQL primary with, optionally, a synchronous streaming
// standby, started by StartPostgres. Its methods are safe for concurrent
// use.
type Postgres struct {
	// Primary is the node StartPostgres made primary. After a failover
	// (Kill it, Promote the Standby) it stays here, under this name.
	Primary *PGNode
	// Standby is the synchronous standby; nil without PostgresOptions.Standby.
	Standby *PGNode
}

// PGNode is one PostgreSQL server: a postmaster and its children. Its methods
// are safe for concurrent use, and each may be called again: Kill of a
// killed node, Start of a running one, Pause of a paused one do nothing.
type PGNode struct {
	// Name is "primary", or StandbyName.
	Name string
	// Port is the node's TCP port on 127.0.0.1.
	Port int
	// DataDir is the node's data directory, Dir/data.
	DataDir string
	// Dir is the node's directory: its data, and its log in Dir/postgres.log.
	Dir string

	bin   string              // the directory of postgres, initdb, pg_basebackup
	cred  *syscall.Credential // nil: run as this process's user
	extra []string            // more arguments of postgres

	opMu sync.Mutex // serializes Start, Kill, Pause and Resume; held across their waits, so that a Kill during a Start waits for it

	mu      sync.Mutex // guards the fields below; held only briefly
	proc    *process   // the postmaster; nil before the first Start and after Kill
	paused  bool       // by Pause, until Resume or Kill
	stopped []procID   // the postmaster's descendants, stopped by Pause
	dog     *watchdog  // made by the first Pause
	closed  bool       // by Postgres.Close: no more Start
}

// StartPostgres runs initdb in dir/primary (dir must exist, dir/primary
// must not) and starts the primary on a free port of 127.0.0.1; with
// opts.Standby, it copies the primary with pg_basebackup to dir/standby1,
// starts the standby, and returns once the primary reports it as its
// synchronous standby. The binaries are
// PostgreSQL's initdb, postgres and pg_basebackup, on PATH or in the newest
// /usr/lib/postgresql/N/bin (Debian's postgresql); without them, the error
// wraps ErrNotInstalled. As root, the servers run as the "postgres" user,
// since PostgreSQL refuses root, and dir must be reachable by that user:
// every directory above it searchable by others, as MkdirTemp makes (not
// t.TempDir, whose directories are private). The caller must Close it; dir
// stays the caller's.
func StartPostgres(dir string, opts PostgresOptions) (*Postgres, error) {
	bin, err := pgBinaries()
	if err != nil {
		return nil, err
	}
	cred, err := pgCredential()
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil { // the servers run in their own directories
		return nil, fmt.Errorf("testserver: postgres: %w", err)
	}
	if cred != nil {
		if err := reachable(dir, cred, "postgres"); err != nil {
			return nil, err
		}
	}
	p := &Postgres{Primary: newPGNode(dir, "primary", bin, cred)}
	ok := false
	defer func() {
		if !ok {
			p.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()

	primary := p.Primary
	if err := primary.makeDir(); err != nil {
		return nil, err
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", primary.DataDir,
		"-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-instructions")
	if _, err := primary.run(ctx, initdb); err != nil {
		return nil, fmt.Errorf("testserver: postgres primary: %w", err)
	}
	if err := appendFile(filepath.Join(primary.DataDir, "postgresql.conf"), pgConf); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(primary.DataDir, "pg_hba.conf"), []byte(pgHBA), 0o600); err != nil {
		return nil, fmt.Errorf("testserver: postgres primary: %w", err)
	}
	if opts.Throwaway {
		if opts.Standby {
			return nil, errors.New("testserver: a throwaway postgres has no standby")
		}
		primary.extra = append(primary.extra, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	if opts.MaxConnections > 0 {
		primary.extra = append(primary.extra, "-c", fmt.Sprintf("max_connections=%d", opts.MaxConnections))
	}
	if opts.Standby {
		// On the command line, not in postgresql.conf: the standby copies
		// that file, and a promoted standby with no standby of its own must
		// not wait for one.
		primary.extra = append(primary.extra, "-c", "synchronous_standby_names="+StandbyName)
	}
	if err := primary.startFirst(); err != nil {
		return nil, err
	}
	if !opts.Standby {
		ok = true
		return p, nil
	}

	standby := newPGNode(dir, StandbyName, bin, cred)
	p.Standby = standby
	if err := standby.makeDir(); err != nil {
		return nil, err
	}
	// -R writes primary_conninfo (with the application_name given in -d) and
	// standby.signal; -C -S makes a replication slot, so that the primary
	// keeps the WAL the standby has not received; -c fast starts the backup
	// at once instead of after a spread checkpoint.
	basebackup := exec.Command(filepath.Join(bin, "pg_basebackup"),
		"-D", standby.DataDir, "-R", "-X", "stream", "-c", "fast", "-C", "-S", StandbyName, "-w",
		"-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port), "-U", "postgres",
		"-d", "application_name="+StandbyName)
	if _, err := standby.run(ctx, basebackup); err != nil {
		return nil, fmt.Errorf("testserver: postgres standby: %w", err)
	}
	auto, err := os.ReadFile(filepath.Join(standby.DataDir, "postgresql.auto.conf"))
	if err != nil {
		return nil, fmt.Errorf("testserver: postgres standby: %w", err)
	}
	if !strings.Contains(string(auto), "application_name="+StandbyName) {
		return nil, fmt.Errorf("testserver: postgres standby: pg_basebackup -R wrote no application_name=%s in primary_conninfo:\n%s", StandbyName, auto)
	}
	if err := standby.startFirst(); err != nil {
		return nil, err
	}
	if err := p.waitSync(ctx); err != nil {
		return nil, err
	}
	ok = true
	return p, nil
}

// waitSync waits until the primary reports the standby as streaming and
// synchronous.
func (p *Postgres) waitSync(ctx context.Context) error {
	const q = `SELECT count(*) FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming' AND sync_state = 'sync'`
	var last error
	for {
		n, err := queryInt(ctx, p.Primary.URL(), q, StandbyName)
		if err == nil && n == 1 {
			return nil
		}
		if err != nil {
			last = err
		}
		if werr := sleepCtx(ctx, 50*time.Millisecond); werr != nil {
			return fmt.Errorf("testserver: postgres: standby not synchronous: %w (last: %v)\n%s", werr, last, p.Standby.logTail())
		}
	}
}

// URL returns a connection string listing every node, primary first, that
// connects to the one that accepts writes (target_session_attrs=read-write):
// postgres://postgres@127.0.0.1:P1,127.0.0.1:P2/postgres?sslmode=disable&target_session_attrs=read-write.
// A paused node makes a connection wait for it; add connect_timeout to bound that.
func (p *Postgres) URL() string {
	hosts := []string{fmt.Sprintf("127.0.0.1:%d", p.Primary.Port)}
	if p.Standby != nil {
		hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", p.Standby.Port))
	}
	return "postgres://postgres@" + strings.Join(hosts, ",") + "/postgres?sslmode=disable&target_session_attrs=read-write"
}

// Close kills every node (Kill) and waits until none of their processes is
// left; Start fails after it. It removes nothing: dir is the caller's.
func (p *Postgres) Close() error {
	var errs []error
	for _, n := range []*PGNode{p.Standby, p.Primary} {
		if n != nil {
			n.mu.Lock()
			n.closed = true
			n.mu.Unlock()
			errs = append(errs, n.Kill(), n.closeWatchdog())
		}
	}
	return errors.Join(errs...)
}

func newPGNode(dir, name, bin string, cred *syscall.Credential) *PGNode {
	n := &PGNode{Name: name, Dir: filepath.Join(dir, name), bin: bin, cred: cred}
	n.DataDir = filepath.Join(n.Dir, "data")
	return n
}

// URL returns a connection string to this node alone:
// postgres://postgres@127.0.0.1:P/postgres?sslmode=disable.
func (n *PGNode) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", n.Port)
}

// Start starts the node's postmaster on its data directory and port, and
// returns once it accepts connections (after crash recovery, if it was
// killed). It does nothing if the node is running. An error wraps
// ErrNotRunning if the postmaster exited, and includes its last log lines.
// It fails after Close.
func (n *PGNode) Start() error {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	n.mu.Lock()
	running, closed := n.proc != nil && !n.proc.exited(), n.closed
	n.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("testserver: start postgres %s: %w", n.Name, errClosed)
	case running:
		return nil
	}
	logPath := filepath.Join(n.Dir, "postgres.log")
	f, err := openLog(logPath)
	if err != nil {
		return err
	}
	args := append([]string{"-D", n.DataDir, "-p", strconv.Itoa(n.Port), "-h", "127.0.0.1", "-k", ""}, n.extra...)
	cmd := exec.Command(filepath.Join(n.bin, "postgres"), args...)
	cmd.Dir = n.Dir
	cmd.Env = n.env()
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr(n.cred)
	p, err := spawn(cmd)
	f.Close() // the child has its own descriptor
	if err != nil {
		return fmt.Errorf("testserver: postgres %s: %w", n.Name, err)
	}
	n.mu.Lock()
	n.proc, n.paused, n.stopped = p, false, nil
	n.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgx.Connect(cctx, n.URL())
		ccancel()
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case <-p.doneC:
			return fmt.Errorf("testserver: postgres %s exited at start (%v): %w\n%s", n.Name, p.err, ErrNotRunning, n.logTail())
		case <-ctx.Done():
			return fmt.Errorf("testserver: postgres %s not ready after %v: %w\n%s", n.Name, startTimeout, err, n.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startFirst starts a new node on a free port, and on another if the
// postmaster exits (the port was taken meanwhile), twice.
func (n *PGNode) startFirst() error {
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			return err
		}
		n.Port = ports[0]
		err = n.Start()
		if err == nil || !errors.Is(err, ErrNotRunning) || attempt == 3 {
			return err
		}
	}
}

// Kill crashes the node: it stops the postmaster (so that it forks no
// more), sends SIGKILL to it and to every process below it, and waits until
// all have exited. It does nothing if the node is not running.
//
// The postmaster's children would exit by themselves once they saw it die,
// but not at once, and not at all while paused; killing them too is what a
// machine's crash does, and Start needs them gone (a new postmaster refuses
// a data directory whose shared memory is still attached).
func (n *PGNode) Kill() error {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	n.mu.Lock()
	p, kids := n.proc, n.stopped
	n.mu.Unlock()
	if p == nil {
		return nil
	}
	if !p.exited() {
		if err := p.signal(syscall.SIGSTOP); err != nil {
			return fmt.Errorf("testserver: kill postgres %s: %w", n.Name, err)
		}
		below, err := descendants(p.pid)
		if err != nil {
			return fmt.Errorf("testserver: kill postgres %s: %w", n.Name, err)
		}
		kids = append(kids, below...)
		if err := p.signal(syscall.SIGKILL); err != nil {
			return fmt.Errorf("testserver: kill postgres %s: %w", n.Name, err)
		}
	}
	for _, k := range kids {
		k.signal(syscall.SIGKILL)
	}
	<-p.doneC
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := waitState(ctx, kids, 0); err != nil {
		return fmt.Errorf("testserver: kill postgres %s: %w", n.Name, err)
	}
	n.mu.Lock()
	n.proc, n.paused, n.stopped = nil, false, nil
	dog := n.dog
	n.mu.Unlock()
	if dog != nil {
		dog.set(nil)
	}
	return nil
}

// Pause stops the postmaster and every process below it with SIGSTOP, and
// returns once all are stopped. It returns an error wrapping ErrNotRunning
// if the node is not running. Until Resume or Kill, a watchdog process holds
// the stopped pids, and kills them if this process dies: stopped, they could
// not see their postmaster die.
func (n *PGNode) Pause() error {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	n.mu.Lock()
	p, paused, dog := n.proc, n.paused, n.dog
	n.mu.Unlock()
	switch {
	case p == nil || p.exited():
		return fmt.Errorf("testserver: pause postgres %s: %w", n.Name, ErrNotRunning)
	case paused:
		return nil
	}
	if dog == nil {
		var err error
		if dog, err = startWatchdog(); err != nil {
			return fmt.Errorf("testserver: pause postgres %s: %w", n.Name, err)
		}
		n.mu.Lock()
		n.dog = dog
		n.mu.Unlock()
	}
	if err := pauseProcess(p); err != nil { // first, so that it forks no more
		return fmt.Errorf("testserver: pause postgres %s: %w", n.Name, err)
	}
	kids, err := descendants(p.pid)
	if err == nil {
		_, _, start, serr := procStat(p.pid)
		err = errors.Join(serr, dog.set(append(slices.Clone(kids), procID{pid: p.pid, start: start})))
	}
	if err != nil {
		p.signal(syscall.SIGCONT)
		return fmt.Errorf("testserver: pause postgres %s: %w", n.Name, err)
	}
	for _, k := range kids {
		k.signal(syscall.SIGSTOP)
	}
	n.mu.Lock()
	n.paused, n.stopped = true, kids
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := waitState(ctx, kids, 'T'); err != nil {
		return fmt.Errorf("testserver: pause postgres %s: %w", n.Name, err)
	}
	return nil
}

// Resume continues a paused node with SIGCONT, the postmaster last. It does
// nothing if the node is not paused.
func (n *PGNode) Resume() error {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	n.mu.Lock()
	p, paused, kids, dog := n.proc, n.paused, n.stopped, n.dog
	n.mu.Unlock()
	if p == nil || !paused {
		return nil
	}
	for _, k := range kids {
		k.signal(syscall.SIGCONT)
	}
	if err := p.signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("testserver: resume postgres %s: %w", n.Name, err)
	}
	n.mu.Lock()
	n.paused, n.stopped = false, nil
	n.mu.Unlock()
	if err := dog.set(nil); err != nil {
		return fmt.Errorf("testserver: resume postgres %s: %w", n.Name, err)
	}
	return nil
}

// Promote ends the node's recovery (SELECT pg_promote()) and returns once a
// new session on it accepts writes. It does nothing if the node is already
// out of recovery. A promoted standby has no synchronous standby: its commits
// are durable on its own disk only.
func (n *PGNode) Promote(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, n.URL())
	if err != nil {
		return fmt.Errorf("testserver: promote postgres %s: %w", n.Name, err)
	}
	defer conn.Close(context.Background())
	var inRecovery bool
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil {
		return fmt.Errorf("testserver: promote postgres %s: %w", n.Name, err)
	}
	if inRecovery {
		var promoted bool
		if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&promoted); err != nil {
			return fmt.Errorf("testserver: promote postgres %s: %w", n.Name, err)
		}
		if !promoted {
			return fmt.Errorf("testserver: promote postgres %s: not promoted within 60 s\n%s", n.Name, n.logTail())
		}
	}
	for {
		readOnly, err := queryString(ctx, n.URL(), "SHOW transaction_read_only")
		if err == nil && readOnly == "off" {
			return nil
		}
		if werr := sleepCtx(ctx, 20*time.Millisecond); werr != nil {
			return fmt.Errorf("testserver: promote postgres %s: still read-only: %w (last: %v)", n.Name, werr, err)
		}
	}
}

// PID returns the pid of the node's postmaster, or 0 if it is not running.
func (n *PGNode) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil || n.proc.exited() {
		return 0
	}
	return n.proc.pid
}

// makeDir makes the node's directory, owned by the servers' user.
func (n *PGNode) makeDir() error {
	if err := os.Mkdir(n.Dir, 0o700); err != nil {
		return fmt.Errorf("testserver: postgres %s: %w", n.Name, err)
	}
	if n.cred != nil {
		if err := os.Chown(n.Dir, int(n.cred.Uid), int(n.cred.Gid)); err != nil {
			return fmt.Errorf("testserver: postgres %s: %w", n.Name, err)
		}
	}
	return nil
}

// run runs one of PostgreSQL's programs as the servers' user.
func (n *PGNode) run(ctx context.Context, cmd *exec.Cmd) ([]byte, error) {
	cmd.Dir = n.Dir
	cmd.Env = n.env()
	cmd.SysProcAttr = sysProcAttr(n.cred)
	return run(ctx, cmd)
}

// env returns the environment of the node's programs: this process's,
// without libpq's PG* defaults, and with HOME in the node's directory, where
// libpq finds no ~/.pgpass (pg_basebackup -R writes its path into
// primary_conninfo).
func (n *PGNode) env() []string {
	return append(childEnv("PG", "HOME="), "HOME="+n.Dir)
}

func (n *PGNode) closeWatchdog() error {
	n.mu.Lock()
	dog := n.dog
	n.dog = nil
	n.mu.Unlock()
	if dog == nil {
		return nil
	}
	return dog.close()
}

func (n *PGNode) logTail() string {
	return logTail(filepath.Join(n.Dir, "postgres.log"), 20)
}

// pgBinaries returns the directory of initdb, postgres and pg_basebackup: on
// PATH, or the newest /usr/lib/postgresql/N/bin.
func pgBinaries() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real // a link to /usr/lib/postgresql/N/bin/initdb: postgres is there
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	installed, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(installed, func(a, b string) int { return pgVersion(b) - pgVersion(a) })
	for _, dir := range append(dirs, installed...) {
		if isFile(filepath.Join(dir, "initdb")) && isFile(filepath.Join(dir, "postgres")) && isFile(filepath.Join(dir, "pg_basebackup")) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("testserver: PostgreSQL not installed (initdb, postgres and pg_basebackup not on PATH nor in /usr/lib/postgresql/*/bin): apt-get install postgresql: %w", ErrNotInstalled)
}

// pgVersion returns N of /usr/lib/postgresql/N/bin.
func pgVersion(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// pgCredential returns the user to run PostgreSQL as (see runAs).
func pgCredential() (*syscall.Credential, error) {
	return runAs("PostgreSQL", "postgres", "postgresql")
}

// MkdirTemp creates a new directory in os.TempDir() (or /tmp, if the user
// that runs PostgreSQL could not reach that), like os.MkdirTemp, that
// StartPostgres accepts when running as root: mode 0711, so that the
// "postgres" user may enter it without listing it. The caller removes it.
func MkdirTemp(pattern string) (string, error) {
	cred, err := pgCredential()
	if err != nil || cred == nil {
		cred = nil // not root, or no postgres user: any directory will do
	}
	root := os.TempDir()
	if cred != nil && reachable(root, cred, "postgres") != nil {
		root = "/tmp"
	}
	dir, err := os.MkdirTemp(root, pattern)
	if err != nil {
		return "", fmt.Errorf("testserver: %w", err)
	}
	if cred != nil {
		if err := os.Chmod(dir, 0o711); err != nil {
			os.Remove(dir)
			return "", fmt.Errorf("testserver: %w", err)
		}
	}
	return dir, nil
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("testserver: %w", err)
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("testserver: %w", err)
	}
	return nil
}

// queryInt runs a query returning one integer on a new connection to url.
func queryInt(ctx context.Context, url, query string, args ...any) (int64, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int64
	err = conn.QueryRow(ctx, query, args...).Scan(&n)
	return n, err
}

// queryString runs a query returning one string on a new connection to url.
func queryString(ctx context.Context, url, query string) (string, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var s string
	err = conn.QueryRow(ctx, query).Scan(&s)
	return s, err
}

// watchdog is a /bin/sh process that kills the pids last written to it when
// its stdin reaches end of file: when this process dies, the kernel closes
// the pipe's write end. It has no parent-death signal, since it must outlive
// this process to do its work; it exits right after.
type watchdog struct {
	mu   sync.Mutex // serializes writes and close
	w    *os.File   // the pipe to its stdin; nil once closed
	proc *process
}

const watchdogScript = `pids=
while IFS= read -r line; do pids=$line; done
[ -z "$pids" ] || kill -KILL $pids 2>/dev/null
exit 0`

func startWatchdog() (*watchdog, error) {
	r, w, err := os.Pipe() // close-on-exec: no other child holds the write end
	if err != nil {
		return nil, fmt.Errorf("testserver: watchdog: %w", err)
	}
	cmd := exec.Command("/bin/sh", "-c", watchdogScript)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p, err := spawn(cmd)
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("testserver: watchdog: %w", err)
	}
	return &watchdog{w: w, proc: p}, nil
}

// set makes ps the processes to kill if this process dies; nil: none.
func (d *watchdog) set(ps []procID) error {
	var b strings.Builder
	for _, p := range ps {
		if p.pid > 0 {
			fmt.Fprintf(&b, "%d ", p.pid)
		}
	}
	b.WriteByte('\n')
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.w == nil {
		return errors.New("testserver: watchdog closed")
	}
	if _, err := d.w.WriteString(b.String()); err != nil {
		return fmt.Errorf("testserver: watchdog: %w", err)
	}
	return nil
}

// close tells the watchdog there is nothing to kill, and waits for its exit.
func (d *watchdog) close() error {
	err := d.set(nil)
	d.mu.Lock()
	if d.w != nil {
		d.w.Close()
		d.w = nil
	}
	d.mu.Unlock()
	<-d.proc.doneC
	return err
}
