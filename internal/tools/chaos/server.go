package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// serverProcess is a `fence serve` child on a loopback port.
type serverProcess struct {
	binary, dataDir string
	args            []string // more flags of fence serve
	cmd             *exec.Cmd
	addr            string // host:port
	exited          chan struct{}

	mu     sync.Mutex
	output []string // the last lines of its stderr
}

// startServer starts fence serve on dataDir, with args, and waits until it
// serves.
func startServer(binary, dataDir string, args ...string) (*serverProcess, error) {
	s := &serverProcess{binary: binary, dataDir: dataDir, args: args}
	return s, s.start()
}

// said returns the last lines the server wrote to stderr: why it did not
// start, when it did not.
func (s *serverProcess) said() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.output, "\n")
}

func (s *serverProcess) start() error {
	s.mu.Lock()
	s.output = nil
	s.mu.Unlock()
	cmd := exec.Command(s.binary, append([]string{"serve", "--listen", "127.0.0.1:0", "--data", s.dataDir}, s.args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: starting fence serve: %w", err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	addrC := make(chan string, 1)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			s.mu.Lock()
			if s.output = append(s.output, sc.Text()); len(s.output) > 20 {
				s.output = s.output[1:]
			}
			s.mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "fence serving" {
				addrC <- rec.Addr
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	// Exited once its stderr is read to the end, so that said has its
	// last words.
	go func() { <-read; cmd.Wait(); close(s.exited) }()
	select {
	case s.addr = <-addrC:
		return nil
	case <-s.exited:
		return fmt.Errorf("chaos: fence serve exited at start: %s", s.said())
	case <-time.After(30 * time.Second):
		s.kill()
		return errors.New("chaos: fence serve did not start in 30 s")
	}
}

// kill sends SIGKILL and waits for the process to die.
func (s *serverProcess) kill() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// stop asks the server to shut down gracefully.
func (s *serverProcess) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		s.kill()
	}
}
