package testserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// MariaDBOptions configure StartMariaDB. The zero value keeps MariaDB's
// production durability settings.
type MariaDBOptions struct {
	// Throwaway sets innodb_flush_log_at_trx_commit=0 and turns the
	// doublewrite buffer off, for tests of code whose durability is not under
	// test (the guards): a crash can lose recent commits.
	Throwaway bool
	// MaxConnections is max_connections; zero means MariaDB's default.
	MaxConnections int
}

// MariaDB is one MariaDB server (Debian's mariadb-server) started by
// StartMariaDB, listening on 127.0.0.1 alone, with a user that has every
// privilege, a password, and a database of its own. Close it.
type MariaDB struct {
	// Port is the server's TCP port on 127.0.0.1.
	Port int
	// User, Password and Database are the account the tests use (from
	// 127.0.0.1 only) and its database.
	User, Password, Database string
	// Dir is the server's directory: its data in Dir/data, its socket, and
	// its log in Dir/mariadb.log.
	Dir string

	bin  mariaDBBin
	cred *syscall.Credential // nil: run as this process's user
	args []string            // more arguments of mariadbd

	mu     sync.Mutex
	proc   *process
	closed bool
}

type mariaDBBin struct{ server, installDB string }

// StartMariaDB initializes a data directory in dir/mariadb (dir must exist,
// dir/mariadb must not) with mariadb-install-db, and starts mariadbd on a
// free port of 127.0.0.1 (no other address; its socket stays in its
// directory), with a user "fence" whose random password is in Password, and
// a database "fence"; it returns once the server greets a connection. The
// binaries are Debian's mariadb-server's (mariadbd and mariadb-install-db,
// or mysqld and mysql_install_db), on PATH or in /usr/sbin and /usr/bin;
// without them, the error wraps ErrNotInstalled. As root, the server runs as
// the "mysql" user, and dir must be reachable by that user, as MkdirTemp
// makes. The server never outlives this process. The caller must Close it;
// dir stays the caller's.
func StartMariaDB(dir string, opts MariaDBOptions) (*MariaDB, error) {
	bin, err := mariaDBBinaries()
	if err != nil {
		return nil, err
	}
	cred, err := mariaDBCredential()
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("testserver: mariadb: %w", err)
	}
	if cred != nil {
		if err := reachable(dir, cred, "mysql"); err != nil {
			return nil, err
		}
	}
	pw := make([]byte, 16)
	if _, err := rand.Read(pw); err != nil {
		return nil, fmt.Errorf("testserver: mariadb: %w", err)
	}
	m := &MariaDB{User: "fence", Password: hex.EncodeToString(pw), Database: "fence",
		Dir: filepath.Join(dir, "mariadb"), bin: bin, cred: cred}
	ok := false
	defer func() {
		if !ok {
			m.Close()
		}
	}()
	if err := os.Mkdir(m.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("testserver: mariadb: %w", err)
	}
	if cred != nil {
		if err := os.Chown(m.Dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("testserver: mariadb: %w", err)
		}
	}
	// The init file runs at every start, before the server accepts
	// connections: the account exists by the time a connection is greeted.
	init := fmt.Sprintf(`CREATE USER IF NOT EXISTS '%[1]s'@'127.0.0.1' IDENTIFIED BY '%[2]s';
GRANT ALL PRIVILEGES ON *.* TO '%[1]s'@'127.0.0.1';
CREATE DATABASE IF NOT EXISTS %[3]s;
`, m.User, m.Password, m.Database)
	initPath := filepath.Join(m.Dir, "init.sql")
	if err := os.WriteFile(initPath, []byte(init), 0o600); err != nil {
		return nil, fmt.Errorf("testserver: mariadb: %w", err)
	}
	if cred != nil {
		if err := os.Chown(initPath, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("testserver: mariadb: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	dataDir := filepath.Join(m.Dir, "data")
	// --no-defaults first: nothing from /etc/mysql (its socket and data
	// directory are the package's service's).
	install := exec.Command(bin.installDB, "--no-defaults", "--datadir="+dataDir,
		"--skip-test-db", "--auth-root-authentication-method=socket")
	install.Dir = m.Dir
	install.Env = m.env()
	install.SysProcAttr = sysProcAttr(cred)
	if _, err := run(ctx, install); err != nil {
		return nil, fmt.Errorf("testserver: mariadb: install db: %w", err)
	}
	m.args = []string{"--no-defaults", "--datadir=" + dataDir,
		"--socket=" + filepath.Join(m.Dir, "mariadb.sock"), "--pid-file=" + filepath.Join(m.Dir, "mariadb.pid"),
		"--bind-address=127.0.0.1", "--skip-name-resolve", "--init-file=" + initPath}
	if opts.Throwaway {
		m.args = append(m.args, "--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0", "--sync-binlog=0")
	}
	if opts.MaxConnections > 0 {
		m.args = append(m.args, "--max-connections="+strconv.Itoa(opts.MaxConnections))
	}
	for attempt := 1; ; attempt++ { // another free port if this one was taken meanwhile
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		m.Port = ports[0]
		err = m.start(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrNotRunning) || attempt == 3 {
			return nil, err
		}
	}
	ok = true
	return m, nil
}

// DSN returns the data source name of the account, in the form of
// github.com/go-sql-driver/mysql: fence:PASSWORD@tcp(127.0.0.1:PORT)/fence.
func (m *MariaDB) DSN() string {
	return fmt.Sprintf("%s:%s@tcp(127.0.0.1:%d)/%s", m.User, m.Password, m.Port, m.Database)
}

// Close kills the server (SIGKILL: it is one process) and waits until it
// has exited. It removes nothing: dir is the caller's.
func (m *MariaDB) Close() error {
	m.mu.Lock()
	p := m.proc
	m.proc, m.closed = nil, true
	m.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.kill()
}

// start starts mariadbd on m.Port and waits until it greets a connection.
func (m *MariaDB) start(ctx context.Context) error {
	logPath := filepath.Join(m.Dir, "mariadb.log")
	f, err := openLog(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(m.bin.server, append(m.args, "--port="+strconv.Itoa(m.Port))...)
	cmd.Dir = m.Dir
	cmd.Env = m.env()
	cmd.Stdout, cmd.Stderr = f, f // no --log-error: the log goes to stderr
	cmd.SysProcAttr = sysProcAttr(m.cred)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		f.Close()
		return fmt.Errorf("testserver: start mariadb: %w", errClosed)
	}
	p, err := spawn(cmd)
	if err == nil {
		m.proc = p
	}
	m.mu.Unlock()
	f.Close() // the child has its own descriptor
	if err != nil {
		return fmt.Errorf("testserver: mariadb: %w", err)
	}
	for {
		err := greeted(m.Port)
		if err == nil {
			return nil
		}
		select {
		case <-p.doneC:
			m.mu.Lock()
			m.proc = nil
			m.mu.Unlock()
			return fmt.Errorf("testserver: mariadb exited at start (%v): %w\n%s", p.err, ErrNotRunning, logTail(logPath, 20))
		case <-ctx.Done():
			return fmt.Errorf("testserver: mariadb not ready after %v: %w\n%s", startTimeout, err, logTail(logPath, 20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// greeted connects to 127.0.0.1:port and returns nil if the server sends
// its handshake (protocol version 10), which it does only once it accepts
// connections.
func greeted(port int) error {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	var hdr [5]byte // 3 bytes of length, a sequence number, the first byte of the payload
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return err
	}
	if hdr[4] != 10 {
		return fmt.Errorf("mariadb answered packet type %#x, not a handshake", hdr[4])
	}
	return nil
}

func (m *MariaDB) env() []string {
	return append(childEnv("MYSQL", "MARIADB", "HOME="), "HOME="+m.Dir)
}

// mariaDBBinaries returns the paths of the server and of its install
// script: mariadbd and mariadb-install-db (or the older mysqld and
// mysql_install_db) on PATH, in /usr/sbin or in /usr/bin.
func mariaDBBinaries() (mariaDBBin, error) {
	find := func(names ...string) string {
		for _, n := range names {
			if p, err := exec.LookPath(n); err == nil {
				return p
			}
			for _, d := range []string{"/usr/sbin", "/usr/bin"} {
				if p := filepath.Join(d, n); isFile(p) {
					return p
				}
			}
		}
		return ""
	}
	b := mariaDBBin{server: find("mariadbd", "mysqld"), installDB: find("mariadb-install-db", "mysql_install_db")}
	if b.server == "" || b.installDB == "" {
		return b, fmt.Errorf("testserver: MariaDB not installed (mariadbd and mariadb-install-db not on PATH nor in /usr/sbin, /usr/bin): apt-get install mariadb-server: %w", ErrNotInstalled)
	}
	return b, nil
}

// mariaDBCredential returns the user to run MariaDB as (see runAs).
func mariaDBCredential() (*syscall.Credential, error) {
	return runAs("mariadbd", "mysql", "mariadb-server")
}
