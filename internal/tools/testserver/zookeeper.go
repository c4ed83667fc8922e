package testserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The jar of Debian's libzookeeper-java (a dependency of the zookeeper
// package): its manifest's Class-Path names the other jars it needs, under
// /usr/share/java. Debian's zkServer.sh runs the same class path.
const (
	zkJar         = "/usr/share/java/zookeeper.jar"
	zkSLF4JSimple = "/usr/share/java/slf4j-simple.jar" // a logger for the server's log, if installed
	zkMain        = "org.apache.zookeeper.server.ZooKeeperServerMain"
)

// ZooKeeper is a standalone ZooKeeper server started by StartZooKeeper: one
// JVM running ZooKeeperServerMain. Its methods are safe for concurrent use.
type ZooKeeper struct {
	// Addr is where the server serves clients: 127.0.0.1:Port.
	Addr string
	// Port is the client port, on 127.0.0.1.
	Port int
	// Dir is the server's directory: its zoo.cfg, its data in Dir/data and
	// its log in Dir/zookeeper.log.
	Dir string

	mu   sync.Mutex
	proc *process // nil after Close
}

// StartZooKeeper starts a standalone ZooKeeper server with its configuration,
// data and log under dir/zookeeper (dir must exist, dir/zookeeper must not),
// listening on a free port of 127.0.0.1 for clients and on no other port (no
// admin server, no JMX port, no quorum ports), and returns once it serves
// requests. It runs Debian's zookeeper (the jar at
// /usr/share/java/zookeeper.jar, with the java on PATH); without them, the
// error wraps ErrNotInstalled. The server keeps ZooKeeper's defaults, fsync of
// its transaction log included. A server that exits at start (its port taken
// meanwhile) makes StartZooKeeper try again on another port, twice. The
// caller must Close it; dir stays the caller's.
func StartZooKeeper(dir string) (*ZooKeeper, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("testserver: zookeeper: no java on PATH (apt-get install zookeeper): %w", ErrNotInstalled)
	}
	if fi, err := os.Stat(zkJar); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("testserver: zookeeper: no %s (apt-get install zookeeper): %w", zkJar, ErrNotInstalled)
	}
	if err := checkPlatform(); err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("testserver: zookeeper: %w", err)
	}
	z := &ZooKeeper{Dir: filepath.Join(dir, "zookeeper")}
	if err := os.Mkdir(z.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("testserver: zookeeper: %w", err)
	}
	if err := os.Mkdir(filepath.Join(z.Dir, "data"), 0o700); err != nil {
		return nil, fmt.Errorf("testserver: zookeeper: %w", err)
	}
	for attempt := 1; ; attempt++ {
		err := z.start(java)
		if err == nil {
			return z, nil
		}
		if !errors.Is(err, ErrNotRunning) || attempt == 3 {
			return nil, err
		}
	}
}

// zkConfig is the server's zoo.cfg: loopback only, no admin server (Jetty),
// and only the srvr four-letter word, which start waits on.
func zkConfig(dataDir string, port int) string {
	return fmt.Sprintf(`# Written by fence's internal/tools/testserver.
tickTime=2000
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr
`, dataDir, port)
}

// start makes one attempt on a new free port.
func (z *ZooKeeper) start(java string) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	port := ports[0]
	cfg := filepath.Join(z.Dir, "zoo.cfg")
	if err := os.WriteFile(cfg, []byte(zkConfig(filepath.Join(z.Dir, "data"), port)), 0o600); err != nil {
		return fmt.Errorf("testserver: zookeeper: %w", err)
	}
	classpath := zkJar
	if _, err := os.Stat(zkSLF4JSimple); err == nil {
		classpath += ":" + zkSLF4JSimple
	}
	f, err := openLog(z.logPath())
	if err != nil {
		return err
	}
	cmd := exec.Command(java,
		"-Xmx256m",
		"-Dzookeeper.admin.enableServer=false",
		"-Dzookeeper.jmx.log4j.disable=true",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-Dzookeeper.log.dir="+z.Dir,
		"-cp", classpath, zkMain, cfg)
	cmd.Dir = z.Dir
	cmd.Env = childEnv("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "ZOO", "JVMFLAGS", "SERVER_JVMFLAGS", "CLASSPATH")
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr(nil)
	p, err := spawn(cmd)
	f.Close() // the child has its own descriptor
	if err != nil {
		return fmt.Errorf("testserver: zookeeper: %w", err)
	}
	z.mu.Lock()
	z.proc, z.Port, z.Addr = p, port, fmt.Sprintf("127.0.0.1:%d", port)
	z.mu.Unlock()
	deadline := time.Now().Add(startTimeout)
	for {
		if p.exited() {
			z.mu.Lock()
			z.proc = nil
			z.mu.Unlock()
			return fmt.Errorf("testserver: zookeeper exited at start (%v): %w\n%s", p.err, ErrNotRunning, logTail(z.logPath(), 20))
		}
		if zkServing(z.Addr) {
			return nil
		}
		if time.Now().After(deadline) {
			p.kill()
			z.mu.Lock()
			z.proc = nil
			z.mu.Unlock()
			return fmt.Errorf("testserver: zookeeper not serving on %s after %v\n%s", z.Addr, startTimeout, logTail(z.logPath(), 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// zkServing reports whether the server at addr answers the srvr four-letter
// word as a serving standalone server (before it has loaded its database, it
// answers that it is not serving requests).
func zkServing(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "srvr"); err != nil {
		return false
	}
	out, _ := io.ReadAll(io.LimitReader(c, 1<<16))
	return bytes.Contains(out, []byte("Mode: standalone"))
}

func (z *ZooKeeper) logPath() string { return filepath.Join(z.Dir, "zookeeper.log") }

// PID returns the pid of the server's JVM, or 0 if it is not running.
func (z *ZooKeeper) PID() int {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.proc == nil || z.proc.exited() {
		return 0
	}
	return z.proc.pid
}

// LogTail returns the last n lines of the server's log, for errors.
func (z *ZooKeeper) LogTail(n int) string {
	return strings.TrimSpace(logTail(z.logPath(), n))
}

// Close kills the server (SIGKILL) and waits until its process has exited.
// It removes nothing: dir is the caller's. Closing twice does nothing.
func (z *ZooKeeper) Close() error {
	z.mu.Lock()
	p := z.proc
	z.proc = nil
	z.mu.Unlock()
	if p == nil {
		return nil
	}
	if err := p.kill(); err != nil {
		return fmt.Errorf("testserver: zookeeper: %w", err)
	}
	return nil
}
