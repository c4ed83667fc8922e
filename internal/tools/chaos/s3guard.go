package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/guard/object"
	s3guard "github.com/fence-lock/fence/guard/s3"
	"github.com/fence-lock/fence/internal/tools/chaos/history"
	"github.com/fence-lock/fence/internal/tools/chaos/proxy"
)

// isS3Guard reports whether a Config.Guard names an S3 location.
func isS3Guard(guard string) bool { return strings.HasPrefix(guard, "s3://") }

// GuardStore names the store of a Config.Guard: "S3" or "PostgreSQL"; ""
// for none.
func GuardStore(guard string) string {
	switch {
	case guard == "":
		return ""
	case isS3Guard(guard):
		return "S3"
	}
	return "PostgreSQL"
}

// parseS3Guard parses an S3 guard's location, which must name an http
// endpoint: the clients reach it through a TCP proxy on loopback.
func parseS3Guard(guard string) (s3guard.Location, string, error) {
	loc, err := s3guard.ParseLocation(guard)
	if err != nil {
		return s3guard.Location{}, "", fmt.Errorf("chaos: --guard: %w", err)
	}
	u, err := url.Parse(loc.Endpoint)
	if loc.Endpoint == "" || err != nil || u.Scheme != "http" {
		return s3guard.Location{}, "", fmt.Errorf("chaos: --guard %s: give an http endpoint (?endpoint=http://host:port): the clients reach it through a proxy on loopback", guard)
	}
	hostport := u.Host
	if u.Port() == "" {
		hostport = net.JoinHostPort(u.Hostname(), "80")
	}
	return loc, hostport, nil
}

// s3Target is the bucket of a run with an S3 guard: the harness's own
// guard (for the check and the final reads) and the proxy the clients
// reach the endpoint through. The run's objects are under a prefix of its
// own, which it leaves behind.
type s3Target struct {
	guard *object.Guard
	proxy *proxy.Proxy
}

func (g *s3Target) addr() string              { return g.proxy.Addr() }
func (g *s3Target) prefix() string            { return g.guard.Prefix }
func (g *s3Target) clientProxy() *proxy.Proxy { return g.proxy }
func (g *s3Target) close()                    { g.proxy.Close() }

// setUpS3Guard checks the endpoint (the guard's conformance check: an
// endpoint that fails it is refused, naming the case) and starts the
// clients' proxy to it.
func setUpS3Guard(ctx context.Context, cfg Config) (*s3Target, error) {
	loc, hostport, err := parseS3Guard(cfg.Guard)
	if err != nil {
		return nil, err
	}
	loc.Prefix += fmt.Sprintf("fence-chaos-%08x/", rand.Uint32())
	g := loc.Guard()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := g.Check(cctx); err != nil {
		return nil, fmt.Errorf("chaos: --guard: %w", err)
	}
	g.TrustEndpoint = true
	p, err := proxy.New("127.0.0.1:0", hostport)
	if err != nil {
		return nil, fmt.Errorf("chaos: --guard: %w", err)
	}
	return &s3Target{guard: g, proxy: p}, nil
}

// finalReads reads every key directly from the bucket, as client -1.
func (g *s3Target) finalReads(r *run) {
	for res := range r.cfg.Resources {
		for k := range r.cfg.Keys {
			resource, key := "r"+strconv.Itoa(res), r.keyPrefix+"k"+strconv.Itoa(k)
			op := history.Op{ID: r.harnessID(), Client: -1, Kind: history.KindRead, Resource: resource, Key: key, Call: r.now()}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			item, _, err := g.guard.Read(ctx, resource, key)
			cancel()
			op.Value, op.Rev, op.Outcome = string(item.Value), item.Rev, s3Outcome(err)
			if op.Outcome != history.Unknown {
				op.Return = r.now()
			}
			if err != nil {
				op.Error = err.Error()
			}
			r.record(op)
		}
	}
}

// s3Storage is S3 through fence's guard: each resource is a manifest of
// the guard's (its keys committed by compare-and-swap with the fence), and
// a write is one commit, whose revision is the resource's. It writes one
// resource at a time: S3 has no commit across two manifests, so the runs
// have no two-resource transactions. Unsafe writes with token 0 on
// resources that are all unfenced: the fence neither checked nor raised.
type s3Storage struct {
	guard   *object.Guard
	timeout time.Duration
	unsafe  bool
}

// newS3Storage returns the storage of location guard, reached at addr (the
// proxy), under prefix (the run's).
func newS3Storage(guard, addr, prefix string, timeout time.Duration, unsafe bool) (*s3Storage, error) {
	loc, _, err := parseS3Guard(guard)
	if err != nil {
		return nil, err
	}
	loc.Endpoint, loc.Prefix = "http://"+addr, prefix
	g := loc.Guard()
	g.TrustEndpoint = true // the harness checked it
	if unsafe {
		g.Unfenced = fence.Unfenced{""}
	}
	return &s3Storage{guard: g, timeout: timeout, unsafe: unsafe}, nil
}

func (s *s3Storage) get(ctx context.Context, resource, key string) (string, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	item, _, err := s.guard.Read(ctx, resource, key)
	return string(item.Value), item.Rev, err
}

func (s *s3Storage) put(ctx context.Context, resource, key, value string, token fence.Token) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if s.unsafe {
		token = 0
	}
	return s.guard.Write(ctx, resource, token, object.Change{Key: key, Value: []byte(value)})
}

func (s *s3Storage) txn(context.Context, map[string]fence.Token, []string, []history.Write) (uint64, error) {
	return 0, errors.New("chaos: the S3 guard commits one resource at a time: no two-resource transactions")
}

func (*s3Storage) outcome(err error) history.Outcome { return s3Outcome(err) }

// s3Outcome classifies an error of the S3 guard: what the history may
// assume about the operation. A refusal of the fence, a race lost every
// time, and an argument refused before sending are definite; anything else
// (no answer, a 5xx) may have been applied.
func s3Outcome(err error) history.Outcome {
	switch {
	case err == nil:
		return history.OK
	case errors.Is(err, fence.ErrFenced):
		return history.Fenced
	case errors.Is(err, object.ErrContended):
		return history.Rejected
	case errors.Is(err, fence.ErrBadRequest), errors.Is(err, fence.ErrInvalidToken), errors.Is(err, object.ErrEndpoint):
		return history.Fail
	}
	return history.Unknown
}
