package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fence-lock/fence/internal/tools/testserver"
	fenceserver "github.com/fence-lock/fence/server"
)

// newServiceFunc starts a fence server for t and returns its base URL and a
// buffer that receives its logs; the server stops when t ends. newService is
// one.
type newServiceFunc func(t testing.TB) (url string, logs *lockedBuffer)

// engines are the stores a fence server can keep its state in, each with a
// newServiceFunc that serves from it: the embedded journal (the default), a 3-member
// etcd cluster, and PostgreSQL with a synchronous standby. Suites that take
// a newServiceFunc run once per engine, as subtests named after it.
var engines = []struct {
	name       string
	newService newServiceFunc
}{
	{"embedded", newService},
	{"etcd", newEtcdService},
	{"postgres", newPostgresService},
}

// The replicated engines' servers are started on first use and shared by
// every test of the package (each test on a key prefix or a schema of its
// own); TestMain stops them through stopEngines.
var (
	etcdOnce    sync.Once
	etcdCluster *testserver.Etcd
	etcdDir     string
	etcdErr     error
	etcdPrefixN atomic.Int64

	pgOnce    sync.Once
	pgServer  *testserver.Postgres
	pgDir     string
	pgErr     error
	pgSchemaN atomic.Int64
)

// sharedEtcd returns the shared 3-member etcd cluster, or skips t (fails it
// with FENCE_REQUIRE_SERVERS=1) when etcd is not installed.
func sharedEtcd(t testing.TB) *testserver.Etcd {
	t.Helper()
	etcdOnce.Do(func() {
		etcdDir, etcdErr = os.MkdirTemp("", "fence-e2e-etcd-")
		if etcdErr == nil {
			etcdCluster, etcdErr = testserver.StartEtcd(etcdDir, 3)
		}
	})
	testserver.Require(t, etcdErr)
	return etcdCluster
}

// sharedPostgres returns the shared PostgreSQL primary with its synchronous
// standby, or skips t (fails it with FENCE_REQUIRE_SERVERS=1) when
// PostgreSQL is not installed.
func sharedPostgres(t testing.TB) *testserver.Postgres {
	t.Helper()
	pgOnce.Do(func() {
		pgDir, pgErr = testserver.MkdirTemp("fence-e2e-pg-")
		if pgErr == nil {
			pgServer, pgErr = testserver.StartPostgres(pgDir, testserver.PostgresOptions{Standby: true})
		}
	})
	testserver.Require(t, pgErr)
	return pgServer
}

// stopEngines stops the shared etcd and PostgreSQL servers, if they were
// started, and removes their directories. TestMain calls it.
func stopEngines() {
	if etcdCluster != nil {
		etcdCluster.Close()
	}
	if etcdDir != "" {
		os.RemoveAll(etcdDir)
	}
	if pgServer != nil {
		pgServer.Close()
	}
	if pgDir != "" {
		os.RemoveAll(pgDir)
	}
}

// newEtcdService is newService on the shared etcd cluster, under a key
// prefix that no other server uses.
func newEtcdService(t testing.TB) (url string, logs *lockedBuffer) {
	t.Helper()
	e := sharedEtcd(t)
	hosts := make([]string, 0, len(e.Members))
	for _, ep := range e.Endpoints() {
		hosts = append(hosts, strings.TrimPrefix(ep, "http://"))
	}
	store := fmt.Sprintf("etcd://%s/fence-e2e/%d", strings.Join(hosts, ","), etcdPrefixN.Add(1))
	return newClusterService(t, store)
}

// newPostgresService is newService on the shared PostgreSQL pair, in a
// schema of its own.
func newPostgresService(t testing.TB) (url string, logs *lockedBuffer) {
	t.Helper()
	pg := sharedPostgres(t)
	name := fmt.Sprintf("e2e_%d", pgSchemaN.Add(1))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	return newClusterService(t, pg.URL()+"&search_path="+name)
}

// newClusterService runs a fence server on the shared store that store
// names (fenceserver.Open with Store and Advertise), behind the HTTP API in
// this process, on a loopback port, with the logs in a buffer, and returns
// once it leads.
func newClusterService(t testing.TB, store string) (url string, logs *lockedBuffer) {
	t.Helper()
	logs = &lockedBuffer{}
	srv := httptest.NewUnstartedServer(nil)
	url = "http://" + srv.Listener.Addr().String()
	s, err := fenceserver.Open(t.Context(), fenceserver.Config{
		Store:     store,
		Advertise: url,
		Logger:    slog.New(slog.NewJSONHandler(lineWriter{logs}, nil)),
	})
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	srv.Config.Handler = s
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		s.Close()
	})
	if err := engineWaitLeading(t.Context(), url, 30*time.Second); err != nil {
		t.Fatalf("fence server on %s: %v\n%s", fenceserver.EngineName(store), err, logs)
	}
	return url, logs
}

// engineWaitLeading polls the server at url until GET /v1/cluster says it leads
// and GET /readyz answers 200, or until timeout.
func engineWaitLeading(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	var last string
	for {
		role, err := engineRole(ctx, client, url)
		switch {
		case err != nil:
			last = err.Error()
		case role != "leader":
			last = "GET /v1/cluster: role " + role
		default:
			status, err := engineStatus(ctx, client, url+"/readyz")
			if err == nil && status == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("GET /readyz: %d %v", status, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not leading after %v (last: %s)", timeout, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// engineRole returns the role in the server's GET /v1/cluster.
func engineRole(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/cluster", nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /v1/cluster: status %d", resp.StatusCode)
	}
	var st struct {
		Role string `json:"role"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return "", fmt.Errorf("GET /v1/cluster: %w", err)
	}
	return st.Role, nil
}

// engineStatus returns the status code of a GET of url.
func engineStatus(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
