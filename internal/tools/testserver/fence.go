package testserver

import (
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"time"
)

// Fence is a `fence serve` on its embedded store, on loopback, for the
// tools that measure fence next to its peers.
type Fence struct {
	URL string // http://127.0.0.1:PORT
	cmd *exec.Cmd
}

// StartFence starts the fence binary bin serving from the directory
// dir/fence on a free loopback port, and returns once it is ready.
func StartFence(bin, dir string) (*Fence, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	hostPort := fmt.Sprintf("127.0.0.1:%d", ports[0])
	cmd := exec.Command(bin, "serve", "--listen", hostPort, "--data", dir+"/fence")
	if err := StartChild(cmd); err != nil {
		return nil, fmt.Errorf("testserver: start %s: %w", bin, err)
	}
	f := &Fence{URL: "http://" + hostPort, cmd: cmd}
	for deadline := time.Now().Add(startTimeout); ; {
		if r, err := http.Get(f.URL + "/readyz"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return f, nil
			}
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, errors.New("testserver: fence serve not ready in time")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Close kills the server and waits for it.
func (f *Fence) Close() {
	f.cmd.Process.Kill()
	f.cmd.Wait()
}
