package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fence-lock/fence/internal/tools/testserver"
)

// server is a `fence serve` started by startServer.
type server struct {
	url  string // http://127.0.0.1:PORT
	addr string // 127.0.0.1:PORT
	port int
	pid  int
	log  string // its stderr
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited
}

// Ports are chosen in [minPort, maxPort]: below the kernel's ephemeral range
// (32768-60999 by default), so that no outgoing connection takes the port
// before the server binds it, and no watcher's port is the server's.
const (
	minPort = 10000
	maxPort = 32767
)

// startServer starts bin serving from dir/data on a free loopback port
// below 32768 and returns once it is ready. A start that fails (a port
// taken meanwhile) is tried again with another port, twice.
func startServer(bin, dir string) (*server, error) {
	var err error
	for range 3 {
		var s *server
		if s, err = startServerOnce(bin, dir); err == nil {
			return s, nil
		}
	}
	return nil, err
}

func startServerOnce(bin, dir string) (*server, error) {
	port, err := freeLowPort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s := &server{url: "http://" + addr, addr: addr, port: port, log: filepath.Join(dir, "fence.log"), done: make(chan struct{})}
	f, err := os.OpenFile(s.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own descriptor
	s.cmd = exec.Command(bin, "serve", "--listen", addr, "--data", filepath.Join(dir, "data"),
		"--max-client-watchers", "0", "--max-total-watchers", "0", "--max-conns", "0")
	s.cmd.Stdout, s.cmd.Stderr = f, f
	if err := testserver.StartChild(s.cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s.pid = s.cmd.Process.Pid
	go func() {
		s.cmd.Wait()
		close(s.done)
	}()
	hc := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(60 * time.Second); ; {
		select {
		case <-s.done:
			return nil, fmt.Errorf("fence serve exited at start (%v); its log:\n%s", s.cmd.ProcessState, tail(s.log, 20))
		default:
		}
		if r, err := hc.Get(s.url + "/readyz"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.close()
			return nil, fmt.Errorf("fence serve not ready in 60s; its log:\n%s", tail(s.log, 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// close kills the server and waits for it to exit.
func (s *server) close() {
	s.cmd.Process.Kill()
	<-s.done
}

// exited reports whether the server has exited.
func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// freeLowPort returns a port in [minPort, maxPort] that was free on
// 127.0.0.1.
func freeLowPort() (int, error) {
	for range 100 {
		port := minPort + rand.IntN(maxPort-minPort+1)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			l.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port on 127.0.0.1 in %d-%d after 100 tries", minPort, maxPort)
}

// tail returns the last n lines of the file at path, for errors.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// memory is a process's resident memory, from /proc/PID/status.
type memory struct {
	rss, hwm int64 // VmRSS and VmHWM, bytes
}

// readMemory reads pid's VmRSS and VmHWM.
func readMemory(pid int) (memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	var m memory
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		f := strings.Fields(value) // "12345 kB"
		if len(f) != 2 || f[1] != "kB" {
			return memory{}, fmt.Errorf("/proc/%d/status: %s: %q is not a size in kB", pid, name, value)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return memory{}, fmt.Errorf("/proc/%d/status: %s: %w", pid, name, err)
		}
		if name == "VmRSS" {
			m.rss = kb << 10
		} else {
			m.hwm = kb << 10
		}
	}
	if m.rss == 0 || m.hwm == 0 {
		return memory{}, fmt.Errorf("/proc/%d/status has no VmRSS or VmHWM", pid)
	}
	return m, nil
}

// clockTick is the unit of the CPU times in /proc (USER_HZ): 100 per second
// on every Linux platform Go supports.
const clockTick = 10 * time.Millisecond

// processCPU returns the CPU time pid has used, user and system, from
// /proc/PID/stat.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3, state; utime is field 14, stime 15
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// ownCPU returns the CPU time this process has used.
func ownCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineCPU returns the CPU time all CPUs have been busy (not idle, not
// waiting for I/O), from /proc/stat.
func machineCPU() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line)) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: %q", line)
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// fileLimit returns pid's soft limit on open files, from /proc/PID/limits.
func fileLimit(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := strings.Fields(rest) // soft hard "files"
			if len(f) < 1 {
				break
			}
			if f[0] == "unlimited" {
				return 1 << 62, nil
			}
			return strconv.ParseUint(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/limits has no Max open files", pid)
}

// openFiles returns how many descriptors pid has open.
func openFiles(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents), err
}

// listenCounters returns the kernel's TcpExt ListenOverflows (a connection
// found the accept queue full) and ListenDrops, from /proc/net/netstat.
func listenCounters() (overflows, drops int64, err error) {
	b, err := os.ReadFile("/proc/net/netstat")
	if err != nil {
		return 0, 0, err
	}
	var names []string
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "TcpExt:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i := 1; i < len(f) && i < len(names); i++ {
			switch names[i] {
			case "ListenOverflows":
				overflows, _ = strconv.ParseInt(f[i], 10, 64)
			case "ListenDrops":
				drops, _ = strconv.ParseInt(f[i], 10, 64)
			}
		}
		return overflows, drops, nil
	}
	return 0, 0, errors.New("/proc/net/netstat has no TcpExt counters")
}

// tcpQueues are the bytes waiting in the sockets of the server's port.
type tcpQueues struct {
	serverSend, serverRecv   int64 // the server's side of the connections
	watcherRecv, watcherSend int64 // the clients' side (watchers and driver)
	conns                    int   // connections established, server side
}

// readTCPQueues sums the send and receive queues of the IPv4 sockets on
// port, from /proc/net/tcp (tx_queue: bytes written and not yet
// acknowledged, so on loopback the bytes the receiver's window has no room
// for; rx_queue: bytes received and not yet read).
func readTCPQueues(port int) (tcpQueues, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return tcpQueues{}, err
	}
	defer f.Close()
	hexPort := fmt.Sprintf(":%04X", port)
	var q tcpQueues
	br := bufio.NewReaderSize(f, 1<<16)
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			return q, nil
		}
		if err != nil {
			return q, err
		}
		// sl local_address rem_address st tx_queue:rx_queue ...
		fs := strings.Fields(line)
		if len(fs) < 5 || fs[3] != "01" { // established only
			continue
		}
		txs, rxs, ok := strings.Cut(fs[4], ":")
		if !ok {
			continue
		}
		tx, err1 := strconv.ParseInt(txs, 16, 64)
		rx, err2 := strconv.ParseInt(rxs, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		switch {
		case strings.HasSuffix(fs[1], hexPort):
			q.serverSend += tx
			q.serverRecv += rx
			q.conns++
		case strings.HasSuffix(fs[2], hexPort):
			q.watcherSend += tx
			q.watcherRecv += rx
		}
	}
}
