package etcd_test

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// The etcd server that TestMain embeds in the test binary, shared by every
// test: its client URLs, and a client of it.
var (
	endpoints []string
	cli       *clientv3.Client
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "fence-etcd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	e, err := startEtcd(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd tests: starting an embedded etcd:", err)
		return 1
	}
	defer e.Close()
	endpoints = []string{e.Config().AdvertiseClientUrls[0].String()}
	cli, err = clientv3.New(clientConfig(clientv3.Config{}))
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd tests: clientv3.New:", err)
		return 1
	}
	defer cli.Close()
	defer stopCluster()
	return m.Run()
}

// startEtcd starts a one-member etcd on loopback ports, with its data in dir.
func startEtcd(dir string) (*embed.Etcd, error) {
	clientURL, err := freeURL()
	if err != nil {
		return nil, err
	}
	peerURL, err := freeURL()
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = "fence-test"
	cfg.Dir = dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*clientURL}, []url.URL{*clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peerURL}, []url.URL{*peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop()) // not even the errors of Close
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, err
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, fmt.Errorf("not ready after 30s")
	}
}

// freeURL returns an http URL on a loopback port that was free a moment ago.
func freeURL() (*url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return &url.URL{Scheme: "http", Host: l.Addr().String()}, nil
}

// clientConfig returns cfg with the embedded etcd's endpoints.
func clientConfig(cfg clientv3.Config) clientv3.Config {
	cfg.Endpoints = endpoints
	cfg.DialTimeout = 5 * time.Second
	cfg.Logger = zap.NewNop() // else the client logs failed calls on stderr
	return cfg
}

// newClient returns a new client of the embedded etcd, configured by cfg and
// closed when t ends. Most tests share cli instead.
func newClient(t testing.TB, cfg clientv3.Config) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientConfig(cfg))
	if err != nil {
		t.Fatalf("clientv3.New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
