package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the fence binary built once for the package's tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fence-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "fence")
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../cmd/fence")...)
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building fence:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	stopEngines()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is a running fence serve process.
type server struct {
	t      testing.TB
	cmd    *exec.Cmd
	URL    string
	logs   *lockedBuffer
	exited chan struct{}
}

// start runs fence serve on a free loopback port with the given extra args
// and waits until it logs the address it listens on.
func start(t testing.TB, dataDir string, args ...string) *server {
	t.Helper()
	return startServer(t, dataDir, true, args...)
}

// startQuiet is start for benchmarks: the server logs as usual, but its lines
// after the first are read and dropped instead of kept.
func startQuiet(t testing.TB, dataDir string, args ...string) *server {
	t.Helper()
	return startServer(t, dataDir, false, args...)
}

func startServer(t testing.TB, dataDir string, keepLogs bool, args ...string) *server {
	t.Helper()
	args = append([]string{"serve", "--listen", "127.0.0.1:0", "--data", dataDir}, args...)
	cmd := exec.Command(binary, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, cmd: cmd, logs: &lockedBuffer{}, exited: make(chan struct{})}
	addrC := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			var rec struct{ Msg, Addr, Level string }
			json.Unmarshal([]byte(line), &rec)
			// A quiet server keeps its start-up lines and its warnings
			// and errors, which a failing test shows.
			if s.URL != "" && !keepLogs && rec.Level != "WARN" && rec.Level != "ERROR" {
				continue
			}
			s.logs.WriteLine(line)
			if rec.Msg == "fence serving" {
				s.URL = "http://" + rec.Addr
				addrC <- rec.Addr
			}
		}
	}()
	go func() { cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() { s.kill() })
	select {
	case <-addrC:
	case <-s.exited:
		t.Fatalf("fence serve exited at start:\n%s", s.logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("fence serve did not start:\n%s", s.logs)
	}
	return s
}

func (s *server) kill() {
	if s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-s.exited
}

// call sends a request and decodes a JSON answer into out (if not nil); it
// returns the status code.
func call(t *testing.T, method, url string, body string, header map[string]string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if p, ok := out.(*[]byte); ok {
			*p = b
		} else if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, url, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

type lease struct {
	Resource string `json:"resource"`
	Holder   string `json:"holder"`
	Token    uint64 `json:"token"`
}

type problem struct {
	Code      string `json:"code"`
	Presented uint64 `json:"presented"`
	LastFence uint64 `json:"last_fence"`
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) WriteLine(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
	b.buf.WriteByte('\n')
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func post(client *http.Client, url, body string, header map[string]string, out any) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	code := resp.StatusCode
	if err := decodeClose(resp, out); err != nil {
		return code, err
	}
	return code, nil
}

func decodeClose(resp *http.Response, out any) error {
	b, err := readClose(resp)
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func readClose(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}
