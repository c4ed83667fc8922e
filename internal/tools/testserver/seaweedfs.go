package testserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// SeaweedFSModule and SeaweedFSVersion name the SeaweedFS source whose weed
// binary SeaweedFSBinary builds: a version with S3 conditional writes
// (If-Match, If-None-Match on PutObject, conditional DeleteObject), which
// the S3 guard is tested against.
const (
	SeaweedFSModule  = "github.com/seaweedfs/seaweedfs"
	SeaweedFSVersion = "v0.0.0-20261109003541-7506e5f91cd6"
)

// seaweedBuild builds the binary once per process.
var seaweedBuild struct {
	once sync.Once
	path string
	err  error
}

// SeaweedFSBinary returns the path of SeaweedFS's weed binary, built from
// SeaweedFSModule at SeaweedFSVersion with the go command on PATH, once per
// machine: it is kept in the user's cache directory
// (fence-testserver/weed-VERSION/weed) for the next test run, and a file
// lock there keeps test processes that start at once from building it
// twice. The first build downloads the module and its dependencies from
// the Go module proxy and takes minutes; without a go command the error
// wraps ErrNotInstalled.
func SeaweedFSBinary() (string, error) {
	seaweedBuild.once.Do(func() { seaweedBuild.path, seaweedBuild.err = buildSeaweedFS() })
	return seaweedBuild.path, seaweedBuild.err
}

func buildSeaweedFS() (string, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("testserver: seaweedfs: no go command on PATH to build weed with: %w", ErrNotInstalled)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("testserver: seaweedfs: %w", err)
	}
	dir := filepath.Join(cache, "fence-testserver", "weed-"+SeaweedFSVersion)
	bin := filepath.Join(dir, "weed")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("testserver: seaweedfs: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("testserver: seaweedfs: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("testserver: seaweedfs: locking the build: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin, nil // built by an earlier run
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	// The module's go.mod has replace directives, which go install
	// refuses: build it as a main module of its own, in a copy.
	work, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", fmt.Errorf("testserver: seaweedfs: %w", err)
	}
	defer os.RemoveAll(work)
	env := append(childEnv("GOFLAGS", "GOWORK", "GO111MODULE"), "GOFLAGS=-mod=mod", "GOWORK=off", "GO111MODULE=on")
	download := exec.CommandContext(ctx, goCmd, "mod", "download", "-json", SeaweedFSModule+"@"+SeaweedFSVersion)
	download.Dir, download.Env = work, env
	out, err := download.Output()
	if err != nil {
		return "", fmt.Errorf("testserver: seaweedfs: downloading %s@%s: %w", SeaweedFSModule, SeaweedFSVersion, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("testserver: seaweedfs: go mod download answered %q (%v)", out, err)
	}
	src := filepath.Join(work, "src")
	if out, err := exec.CommandContext(ctx, "cp", "-r", mod.Dir, src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("testserver: seaweedfs: copying its source: %w: %s", err, out)
	}
	if out, err := exec.CommandContext(ctx, "chmod", "-R", "u+w", src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("testserver: seaweedfs: %w: %s", err, out)
	}
	tmp := bin + ".tmp"
	// No symbol table or DWARF: a quicker link and a third less to keep.
	build := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-ldflags=-s -w", "-o", tmp, "./weed")
	build.Dir, build.Env = src, env
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("testserver: seaweedfs: building weed: %w\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("testserver: seaweedfs: %w", err)
	}
	return bin, nil
}

// SeaweedFS is a SeaweedFS server started by StartSeaweedFS: one weed
// server process running a master, a volume server, a filer and the S3
// gateway, on 127.0.0.1. Its S3 gateway accepts anonymous requests (no
// identities are configured). Its methods are safe for concurrent use.
type SeaweedFS struct {
	// S3 is the base URL of the S3 gateway: http://127.0.0.1:PORT.
	S3 string
	// Dir is the server's directory: its data and its log, seaweedfs.log.
	Dir string

	mu   sync.Mutex
	proc *process // nil after Close
}

// StartSeaweedFS builds weed if needed (SeaweedFSBinary) and starts it
// with its data and log under dir/seaweedfs (dir must exist,
// dir/seaweedfs must not), every port on 127.0.0.1, and returns once its
// S3 gateway answers. A server that exits at start (a port taken
// meanwhile) makes it try again on other ports, twice. The caller must
// Close it; dir stays the caller's.
func StartSeaweedFS(dir string) (*SeaweedFS, error) {
	if err := checkPlatform(); err != nil {
		return nil, err
	}
	bin, err := SeaweedFSBinary()
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("testserver: seaweedfs: %w", err)
	}
	s := &SeaweedFS{Dir: filepath.Join(dir, "seaweedfs")}
	if err := os.Mkdir(s.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("testserver: seaweedfs: %w", err)
	}
	for attempt := 1; ; attempt++ {
		err := s.start(bin)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, ErrNotRunning) || attempt == 3 {
			return nil, err
		}
	}
}

// start makes one attempt on new free ports.
func (s *SeaweedFS) start(bin string) error {
	ports, err := freePorts(8)
	if err != nil {
		return err
	}
	data := filepath.Join(s.Dir, fmt.Sprintf("data-%d", ports[0]))
	if err := os.Mkdir(data, 0o700); err != nil {
		return fmt.Errorf("testserver: seaweedfs: %w", err)
	}
	f, err := openLog(s.logPath())
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir="+data, "-volume.max=8",
		fmt.Sprintf("-master.port=%d", ports[0]), fmt.Sprintf("-master.port.grpc=%d", ports[1]),
		fmt.Sprintf("-volume.port=%d", ports[2]), fmt.Sprintf("-volume.port.grpc=%d", ports[3]),
		"-filer", fmt.Sprintf("-filer.port=%d", ports[4]), fmt.Sprintf("-filer.port.grpc=%d", ports[5]),
		"-s3", fmt.Sprintf("-s3.port=%d", ports[6]), fmt.Sprintf("-s3.port.grpc=%d", ports[7]))
	cmd.Dir = s.Dir
	cmd.Env = childEnv("AWS_", "WEED_")
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr(nil)
	p, err := spawn(cmd)
	f.Close() // the child has its own descriptor
	if err != nil {
		return fmt.Errorf("testserver: seaweedfs: %w", err)
	}
	s.mu.Lock()
	s.proc, s.S3 = p, fmt.Sprintf("http://127.0.0.1:%d", ports[6])
	s.mu.Unlock()
	deadline := time.Now().Add(2 * startTimeout)
	for {
		if p.exited() {
			s.mu.Lock()
			s.proc = nil
			s.mu.Unlock()
			return fmt.Errorf("testserver: seaweedfs exited at start (%v): %w\n%s", p.err, ErrNotRunning, logTail(s.logPath(), 20))
		}
		if s.serving() {
			return nil
		}
		if time.Now().After(deadline) {
			p.kill()
			s.mu.Lock()
			s.proc = nil
			s.mu.Unlock()
			return fmt.Errorf("testserver: seaweedfs S3 not serving on %s after %v\n%s", s.S3, 2*startTimeout, logTail(s.logPath(), 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// serving reports whether the S3 gateway lists the buckets, which it does
// once the filer behind it is up.
func (s *SeaweedFS) serving() bool {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(s.S3 + "/")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// CreateBucket creates the bucket name through the S3 gateway.
func (s *SeaweedFS) CreateBucket(name string) error {
	req, err := http.NewRequest(http.MethodPut, s.S3+"/"+name, nil)
	if err != nil {
		return fmt.Errorf("testserver: seaweedfs: %w", err)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("testserver: seaweedfs: create bucket %q: %w", name, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("testserver: seaweedfs: create bucket %q: %s", name, resp.Status)
	}
	return nil
}

func (s *SeaweedFS) logPath() string { return filepath.Join(s.Dir, "seaweedfs.log") }

// LogTail returns the last n lines of the server's log, for errors.
func (s *SeaweedFS) LogTail(n int) string {
	return strings.TrimSpace(logTail(s.logPath(), n))
}

// Close kills the server (SIGKILL) and waits until its process has exited.
// It removes nothing: dir is the caller's. Closing twice does nothing.
func (s *SeaweedFS) Close() error {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.kill()
}
