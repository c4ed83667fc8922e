package testserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"
)

// The local Azure Blob Storage server is Azurite (Microsoft's emulator of
// Azure Storage, a Node program), as the npm package azurite ships it,
// pinned with its lockfile in the directory azurite beside this file.
// Only its blob service runs.

// AzuriteAccount and AzuriteKey are Azurite's well-known development
// account and its key (documented by Microsoft; not a secret).
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Azurite is an Azurite blob service started by StartAzurite: one Node
// process, its data on disk under Dir, on a free port of 127.0.0.1.
type Azurite struct {
	// BlobURL is the account's blob service URL,
	// http://127.0.0.1:port/devstoreaccount1: a container is at
	// BlobURL/NAME.
	BlobURL string
	// Dir is the server's directory: its data, and its log azurite.log.
	Dir string

	proc *process
}

// AzuriteDir returns the directory whose package.json and
// package-lock.json pin Azurite: npm ci there installs it.
func AzuriteDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("testserver: azurite: cannot locate the testserver sources")
	}
	return filepath.Join(filepath.Dir(file), "azurite"), nil
}

// StartAzurite starts Azurite's blob service on a free port of 127.0.0.1,
// with its data and log under dir (which must exist), and returns once it
// accepts connections. If the package is not installed yet, it runs npm ci
// (from the committed lockfile) in AzuriteDir first. Without node or npm,
// or when npm ci fails, the error wraps ErrNotInstalled. A start that fails
// (a port taken meanwhile) is tried again with another port, twice. The
// caller must Close the server.
func StartAzurite(dir string) (*Azurite, error) {
	if err := checkPlatform(); err != nil {
		return nil, err
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("testserver: azurite: node not on PATH (apt-get install nodejs): %w", ErrNotInstalled)
	}
	pkg, err := AzuriteDir()
	if err != nil {
		return nil, err
	}
	main := filepath.Join(pkg, "node_modules", "azurite", "dist", "src", "blob", "main.js")
	if _, err := os.Stat(main); err != nil {
		if err := npmInstall("azurite", pkg); err != nil {
			return nil, err
		}
		if _, err := os.Stat(main); err != nil {
			return nil, fmt.Errorf("testserver: azurite: npm ci in %s did not install %s: %w", pkg, main, err)
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("testserver: azurite: %w", err)
	}
	for attempt := 1; ; attempt++ {
		a, err := startAzurite(node, main, dir)
		if err == nil {
			return a, nil
		}
		if !errors.Is(err, ErrNotRunning) || attempt == 3 {
			return nil, err
		}
	}
}

// startAzurite makes one attempt of StartAzurite. An error wraps
// ErrNotRunning if the server exited while starting.
func startAzurite(node, main, dir string) (*Azurite, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	a := &Azurite{BlobURL: "http://" + addr + "/" + AzuriteAccount, Dir: dir}
	data := filepath.Join(dir, fmt.Sprintf("azurite-%d", ports[0]))
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, fmt.Errorf("testserver: azurite: %w", err)
	}
	f, err := openLog(a.logPath())
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(node, main, "--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(ports[0]),
		"--location", data, "--silent", "--skipApiVersionCheck", "--disableTelemetry")
	cmd.Dir = dir
	cmd.Env = childEnv("AZURITE_", "AZURE_")
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr(nil)
	p, err := spawn(cmd)
	f.Close() // the child has its own descriptor
	if err != nil {
		return nil, fmt.Errorf("testserver: azurite: %w", err)
	}
	a.proc = p
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		if p.exited() {
			return nil, fmt.Errorf("testserver: azurite exited at start (%v): %w\n%s", p.err, ErrNotRunning, logTail(a.logPath(), 20))
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return a, nil
		}
		if werr := sleepCtx(ctx, 50*time.Millisecond); werr != nil {
			a.Close()
			return nil, fmt.Errorf("testserver: azurite not listening on %s after %v\n%s", addr, startTimeout, logTail(a.logPath(), 20))
		}
	}
}

// Close kills the server and waits for its process to exit. It removes
// nothing: Dir is the caller's.
func (a *Azurite) Close() error {
	if a == nil || a.proc == nil {
		return nil
	}
	if err := a.proc.kill(); err != nil {
		return fmt.Errorf("testserver: azurite: %w", err)
	}
	return nil
}

func (a *Azurite) logPath() string { return filepath.Join(a.Dir, "azurite.log") }

// LogTail returns the last n lines of the server's log, for errors.
func (a *Azurite) LogTail(n int) string { return logTail(a.logPath(), n) }
