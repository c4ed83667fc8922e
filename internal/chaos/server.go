package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"
)

// serverProcess is a `fence serve` child on a loopback port.
type serverProcess struct {
	binary, dataDir string
	cmd             *exec.Cmd
	addr            string // host:port
	exited          chan struct{}
}

// startServer starts fence serve on dataDir and waits until it serves.
func startServer(binary, dataDir string) (*serverProcess, error) {
	s := &serverProcess{binary: binary, dataDir: dataDir}
	return s, s.start()
}

func (s *serverProcess) start() error {
	cmd := exec.Command(s.binary, "serve", "--listen", "127.0.0.1:0", "--data", s.dataDir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: starting fence serve: %w", err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	addrC := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "fence serving" {
				addrC <- rec.Addr
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() { cmd.Wait(); close(s.exited) }()
	select {
	case s.addr = <-addrC:
		return nil
	case <-s.exited:
		return errors.New("chaos: fence serve exited at start")
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
