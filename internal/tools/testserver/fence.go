package testserver

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
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

// Metrics returns the sum of the samples of every metric a fence server at
// url (http://HOST:PORT) serves on /metrics, by name: the figures the tools
// that measure fence read from the server itself.
func Metrics(url string) (map[string]float64, error) {
	hc := &http.Client{Timeout: 30 * time.Second}
	r, err := hc.Get(url + "/metrics")
	if err != nil {
		return nil, err
	}
	defer r.Body.Close()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	if r.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", r.Status)
	}
	sums := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		if i := strings.IndexByte(line, '{'); i >= 0 && (!ok || i < len(name)) {
			name, rest = line[:i], line[strings.LastIndexByte(line, '}')+1:]
		}
		fs := strings.Fields(rest)
		if len(fs) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fs[0], 64); err == nil {
			sums[name] += v
		}
	}
	return sums, sc.Err()
}
