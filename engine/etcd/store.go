package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/state"
)

// DefaultStorePrefix is the key prefix of a Store when its URL names none.
const DefaultStorePrefix = "/fence/"

// DefaultElectionTTL is the default Store.ElectionTTL.
const DefaultElectionTTL = 2 * time.Second

// loadPage is how many keys one read of Load returns.
const loadPage = 1000

// Store is fence's whole state in an etcd cluster, for several fence
// servers that share it: a state.Remote (the lock state and the fenced
// storage, every commit one etcd Txn conditional on the writer epoch) and a
// state.Elector (leadership through an etcd election, liveness through etcd
// leases). Commits go through the connection to etcd's leader when it is
// known (see route). It is safe for concurrent use.
//
// Keys, all under the prefix: "epoch" (the writer epoch record, JSON),
// "commit" (the last commit of the current epoch, "<epoch>/<n>", n in 20
// digits), "rev" (the store revision), "r/<resource>" (a resource's
// record), "e/<resource>/<key>" (an entry), "election/..." (the election)
// and "members/<url>" (the servers, each with its lease). Resource names are
// escaped with url.PathEscape. Records are package state's binary records.
//
// etcd's own limits apply to one commit: --max-txn-ops (default 128) and
// --max-request-bytes (default 1.5 MiB). The DB sizes batches below them;
// a single change beyond them (a txn of more than about 120 writes, or of
// more than 1.5 MiB) is refused with fence.ErrTooLarge. To accept every
// transaction the API allows (4 MiB bodies), run etcd with
// --max-request-bytes 10485760, and raise --max-txn-ops for transactions of
// many keys.
type Store struct {
	cli       *clientv3.Client
	endpoints []*endpoint // for the calls that keep a leadership alive
	route     *route      // the connection commits go through
	prefix    string
	self      state.Member
	opts      state.EngineOptions

	mu      sync.Mutex
	records map[state.Epoch]string // the epoch record this server wrote for each of its terms

	stopC chan struct{}
	doneC chan struct{}
}

var (
	_ state.Remote   = (*Store)(nil)
	_ state.Elector  = (*Store)(nil)
	_ state.Resender = (*Store)(nil)
)

// OpenStore connects to the etcd cluster that rawURL names and registers
// opts.Self as one of its servers. The URL is
//
//	etcd://HOST:PORT[,HOST:PORT...][/PREFIX][?PARAMS]    plain gRPC
//	etcds://HOST:PORT[,HOST:PORT...][/PREFIX][?PARAMS]   TLS
//
// with PREFIX the key prefix of all of fence's keys (default "/fence/"; a
// trailing "/" is added), user name and password as user info
// (etcd://user:pass@host:2379), and the parameters cacert (PEM file of the
// CAs that verify the servers; default the system's), cert and key (PEM
// files of a client certificate), and dial_timeout (a Go duration, default
// 5s).
func OpenStore(ctx context.Context, rawURL string, opts state.EngineOptions) (*Store, error) {
	cfg, prefix, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	cfg.Context = context.WithoutCancel(ctx)
	cfg.Logger = zap.NewNop()
	// The etcd servers' --max-request-bytes decides how large a commit may
	// be; the client's own limit (2 MiB by default) must not cut it shorter.
	cfg.MaxCallSendMsgSize = maxRequestBytes
	// gRPC keepalive: a connection to a member that stopped answering (a
	// lost path, a frozen process) is found dead and left, and the
	// requests go to the other members. Not more often than etcd's
	// --grpc-keepalive-min-time (5s by default) allows.
	cfg.DialKeepAliveTime, cfg.DialKeepAliveTimeout = keepAliveTime, keepAliveTimeout
	cfg.PermitWithoutStream = true
	// A connection lost and restored (a path back) is made again within a
	// second, not after gRPC's default backoff (up to 2 minutes): the
	// leadership's keepalives need a member within a TTL.
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
		MinConnectTimeout: 5 * time.Second,
	}))
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd: connect to %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	return NewStore(cli, prefix, opts), nil
}

// The client's gRPC keepalive: a ping after keepAliveTime without traffic,
// and the connection is dead without an answer in keepAliveTimeout.
const (
	keepAliveTime    = 5 * time.Second
	keepAliveTimeout = 2 * time.Second
)

// maxRequestBytes is the largest request the client sends: a transaction of
// the API's largest body (4 MiB of values, base64-decoded less) fits.
const maxRequestBytes = 16 << 20

// NewStore returns a Store on cli with all of its keys under prefix (a
// trailing "/" is added if missing), for the server opts.Self. Close closes
// cli.
func NewStore(cli *clientv3.Client, prefix string, opts state.EngineOptions) *Store {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	eps := dialEndpoints(cli)
	s := &Store{cli: cli, endpoints: eps, route: newRoute(eps), prefix: prefix, self: opts.Self, opts: opts, records: map[state.Epoch]string{},
		stopC: make(chan struct{}), doneC: make(chan struct{})}
	go s.register()
	return s
}

// parseURL parses a Store URL into a client configuration and a key prefix.
func parseURL(rawURL string) (clientv3.Config, string, error) {
	fail := func(format string, args ...any) (clientv3.Config, string, error) {
		return clientv3.Config{}, "", fmt.Errorf("etcd: store URL %q: %s", redact(rawURL), fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return fail("%v", errors.Unwrap(err))
	}
	var cfg clientv3.Config
	scheme := "http://"
	switch u.Scheme {
	case "etcd":
	case "etcds":
		scheme = "https://"
		cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	default:
		return fail("want etcd:// or etcds://")
	}
	if u.Host == "" {
		return fail("no host:port")
	}
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" || !strings.Contains(h, ":") {
			return fail("endpoint %q: want host:port", h)
		}
		cfg.Endpoints = append(cfg.Endpoints, scheme+h)
	}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	prefix := u.Path
	if prefix == "" || prefix == "/" {
		prefix = DefaultStorePrefix
	}
	q := u.Query()
	cfg.DialTimeout = 5 * time.Second
	for name, vals := range q {
		v := vals[len(vals)-1]
		switch name {
		case "cacert", "cert", "key":
			if cfg.TLS == nil {
				return fail("%s needs etcds://", name)
			}
		case "dial_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fail("dial_timeout %q: want a positive duration", v)
			}
			cfg.DialTimeout = d
		default:
			return fail("unknown parameter %q (known: cacert, cert, key, dial_timeout)", name)
		}
	}
	if ca := q.Get("cacert"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return fail("cacert: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fail("cacert %s: no PEM certificate", ca)
		}
		cfg.TLS.RootCAs = pool
	}
	if cert, key := q.Get("cert"), q.Get("key"); cert != "" || key != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return fail("cert and key: %v", err)
		}
		cfg.TLS.Certificates = []tls.Certificate{pair}
	}
	return cfg, prefix, nil
}

// redact hides the password of a URL, for errors.
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}

// Close stops this server's membership and closes the client.
func (s *Store) Close() error {
	select {
	case <-s.stopC:
	default:
		close(s.stopC)
	}
	<-s.doneC
	s.route.close()
	closeEndpoints(s.endpoints)
	return s.cli.Close()
}

func (s *Store) ttl() int {
	secs := int((s.opts.ElectionTTL + time.Second - 1) / time.Second)
	if s.opts.ElectionTTL == 0 {
		secs = int(DefaultElectionTTL / time.Second)
	}
	return max(secs, 2)
}

func (s *Store) key(parts ...string) string { return s.prefix + strings.Join(parts, "") }

func (s *Store) resourceKey(name string) string { return s.key("r/", url.PathEscape(name)) }

func (s *Store) entryKey(resource, key string) string {
	return s.key("e/", url.PathEscape(resource), "/", key)
}

// epochRecord is the value of the epoch key.
type epochRecord struct {
	Epoch  state.Epoch `json:"epoch"`
	Leader string      `json:"leader"`
	KeyID  string      `json:"key_id"`
}

// memberRecord is the value of a member key.
type memberRecord struct {
	URL   string `json:"url"`
	KeyID string `json:"key_id"`
}

// register keeps this server's member key alive, with a lease of its own,
// until Close.
func (s *Store) register() {
	defer close(s.doneC)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-s.stopC; cancel() }()
	value, _ := json.Marshal(memberRecord{URL: s.self.URL, KeyID: s.self.KeyID})
	for ctx.Err() == nil {
		sess, err := concurrency.NewSession(s.cli, concurrency.WithTTL(s.ttl()), concurrency.WithContext(ctx))
		if err == nil {
			_, err = s.cli.Put(ctx, s.key("members/", url.PathEscape(s.self.URL)), string(value), clientv3.WithLease(sess.Lease()))
			if err == nil {
				select {
				case <-sess.Done():
				case <-ctx.Done():
				}
			}
			rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
			sess.Orphan()
			s.cli.Revoke(rctx, sess.Lease())
			rcancel()
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Members implements state.Elector.
func (s *Store) Members(ctx context.Context) ([]state.Member, error) {
	resp, err := s.cli.Get(ctx, s.key("members/"), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("etcd: members: %w", err)
	}
	var ms []state.Member
	for _, kv := range resp.Kvs {
		var m memberRecord
		if json.Unmarshal(kv.Value, &m) == nil {
			ms = append(ms, state.Member{URL: m.URL, KeyID: m.KeyID})
		}
	}
	return ms, nil
}

// Leader implements state.Elector: the server that holds the election and
// has raised the epoch; ok is false while none does (an election or a
// takeover in progress).
func (s *Store) Leader(ctx context.Context) (m state.Member, epoch state.Epoch, ok bool, err error) {
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.key("election/"), clientv3.WithFirstCreate()...),
		clientv3.OpGet(s.key("epoch")),
	).Commit()
	if err != nil {
		return state.Member{}, 0, false, fmt.Errorf("etcd: leader: %w", err)
	}
	elected := resp.Responses[0].GetResponseRange().Kvs
	rec, _, err := decodeEpoch(resp.Responses[1].GetResponseRange().Kvs)
	if err != nil {
		return state.Member{}, 0, false, err
	}
	if len(elected) == 0 || string(elected[0].Value) != rec.Leader {
		return state.Member{}, rec.Epoch, false, nil
	}
	return state.Member{URL: rec.Leader, KeyID: rec.KeyID}, rec.Epoch, true, nil
}

func decodeEpoch(kvs []*mvccpb.KeyValue) (epochRecord, int64, error) {
	if len(kvs) == 0 {
		return epochRecord{}, 0, nil
	}
	var rec epochRecord
	if err := json.Unmarshal(kvs[0].Value, &rec); err != nil {
		return epochRecord{}, 0, fmt.Errorf("etcd: epoch record %q: %w", kvs[0].Value, err)
	}
	return rec, kvs[0].ModRevision, nil
}

// term is one leadership of this server.
type term struct {
	s     *Store
	el    *concurrency.Election
	key   string // the election key, read once: Resign clears el's
	epoch state.Epoch
	lease clientv3.LeaseID

	mu    sync.Mutex
	sess  *concurrency.Session // the one keeping the lease alive now
	doneC chan struct{}        // closed when the leadership may be lost
	stopC chan struct{}        // closed by Resign
}

func newTerm(s *Store, sess *concurrency.Session, el *concurrency.Election, epoch state.Epoch) *term {
	t := &term{s: s, el: el, key: el.Key(), epoch: epoch, lease: sess.Lease(), sess: sess,
		doneC: make(chan struct{}), stopC: make(chan struct{})}
	go t.keep()
	return t
}

func (t *term) Epoch() state.Epoch    { return t.epoch }
func (t *term) Done() <-chan struct{} { return t.doneC }

// keep keeps the leadership's lease alive through what etcd recovers from
// by itself. A session ends when its keepalives go unanswered for a TTL (an
// etcd leader election, a lost path to the member they went to) or a
// member that does not know the lease yet answers one; the lease itself
// may be alive. It is, as long as the election key it holds is there: keep
// then asks for it, until a TTL has passed, and keeps the lease alive in a
// new session. Only when the key is gone (the lease expired: another
// server may lead) or cannot be read in time does the term end. Safety does
// not rest on this: every commit checks the epoch.
func (t *term) keep() {
	defer close(t.doneC)
	go t.refresh()
	for {
		t.mu.Lock()
		sess := t.sess
		t.mu.Unlock()
		select {
		case <-sess.Done():
		case <-t.stopC:
			return
		}
		if !t.leaseAlive() {
			return
		}
		next, err := concurrency.NewSession(t.s.cli, concurrency.WithLease(t.lease), concurrency.WithTTL(t.s.ttl()))
		if err != nil {
			return
		}
		t.mu.Lock()
		select {
		case <-t.stopC:
			// Resigned meanwhile, with the session before: this one must
			// not keep the lease alive.
			t.mu.Unlock()
			next.Close()
			return
		default:
		}
		t.sess = next
		t.mu.Unlock()
	}
}

// refresh keeps the lease alive with a keepalive of its own every sixth of
// the TTL, until Resign, besides the session's: the session sends its
// keepalives on one stream, to one member, and a member that stops
// answering (a lost path to it) holds them until gRPC finds the connection
// dead, longer than the TTL. Each of these goes to every endpoint at once
// and is given an eighth of the TTL: one member that still answers keeps
// the lease.
func (t *term) refresh() {
	ttl := time.Duration(t.s.ttl()) * time.Second
	tick := time.NewTicker(ttl / 6)
	defer tick.Stop()
	for {
		select {
		case <-t.stopC:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), ttl/8)
		everyEndpoint(ctx, t.s.endpoints, func(ctx context.Context, ep *endpoint) (*clientv3.LeaseKeepAliveResponse, error) {
			return ep.lease.KeepAliveOnce(ctx, t.lease)
		})
		cancel()
	}
}

// leaseAlive reports whether the election key, and so the lease, is still
// there, asking every endpoint at once for up to a TTL, each time for a
// tenth of it.
func (t *term) leaseAlive() bool {
	ttl := time.Duration(t.s.ttl()) * time.Second
	deadline := time.Now().Add(ttl)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), ttl/10)
		resp, err := everyEndpoint(ctx, t.s.endpoints, func(ctx context.Context, ep *endpoint) (*clientv3.GetResponse, error) {
			return ep.kv.Get(ctx, t.key)
		})
		cancel()
		if err == nil {
			return len(resp.Kvs) == 1 && clientv3.LeaseID(resp.Kvs[0].Lease) == t.lease
		}
		select {
		case <-t.stopC:
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return false
}

func (t *term) Resign(ctx context.Context) error {
	t.s.mu.Lock()
	delete(t.s.records, t.epoch)
	t.s.mu.Unlock()
	t.mu.Lock()
	select {
	case <-t.stopC:
	default:
		close(t.stopC)
	}
	sess := t.sess
	t.mu.Unlock()
	err := t.el.Resign(ctx)
	sess.Close() // revokes the lease
	if err != nil {
		return fmt.Errorf("etcd: resign: %w", err)
	}
	return nil
}

// Campaign implements state.Elector: it waits until this server wins the
// election, then raises the writer epoch in a Txn that holds only while it
// still leads the election.
func (s *Store) Campaign(ctx context.Context) (state.Term, error) {
	sess, err := concurrency.NewSession(s.cli, concurrency.WithTTL(s.ttl()), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, fmt.Errorf("etcd: campaign: %w", err)
	}
	el := concurrency.NewElection(sess, s.key("election/"))
	if err := el.Campaign(ctx, s.self.URL); err != nil {
		sess.Close()
		return nil, fmt.Errorf("etcd: campaign: %w", err)
	}
	for {
		resp, err := s.cli.Get(ctx, s.key("epoch"))
		if err != nil {
			break
		}
		old, modRev, err := decodeEpoch(resp.Kvs)
		if err != nil {
			sess.Close()
			return nil, err
		}
		rec := epochRecord{Epoch: old.Epoch + 1, Leader: s.self.URL, KeyID: s.self.KeyID}
		value, _ := json.Marshal(rec)
		txn, err := s.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(el.Key()), "=", el.Rev()),
			clientv3.Compare(clientv3.ModRevision(s.key("epoch")), "=", modRev),
		).Then(
			clientv3.OpPut(s.key("epoch"), string(value)),
			clientv3.OpPut(s.key("commit"), commitID(rec.Epoch, 0)),
		).Commit()
		if err != nil {
			break
		}
		if txn.Succeeded {
			s.mu.Lock()
			s.records[rec.Epoch] = string(value)
			s.mu.Unlock()
			return newTerm(s, sess, el, rec.Epoch), nil
		}
		// The epoch moved (a tool such as fence migrate raised it) or we no
		// longer lead the election: read again, or give up.
		select {
		case <-sess.Done():
			return nil, errors.New("etcd: campaign: the election lease expired before the epoch was raised")
		default:
		}
	}
	sess.Close()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, errors.New("etcd: campaign: raising the writer epoch failed")
}

// Load implements state.Remote: every resource record and the revision, read
// at one etcd revision.
func (s *Store) Load(ctx context.Context, fn func(name string, r state.Resource) error) (fence.Rev, error) {
	resp, err := s.cli.Get(ctx, s.key("rev"))
	if err != nil {
		return 0, fmt.Errorf("etcd: load: %w", err)
	}
	at := resp.Header.Revision
	var rev fence.Rev
	if len(resp.Kvs) > 0 {
		n, err := strconv.ParseUint(string(resp.Kvs[0].Value), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("etcd: load: revision %q: %w", resp.Kvs[0].Value, state.ErrCorrupt)
		}
		rev = fence.Rev(n)
	}
	from, end := s.key("r/"), clientv3.GetPrefixRangeEnd(s.key("r/"))
	for {
		resp, err := s.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithRev(at), clientv3.WithLimit(loadPage))
		if err != nil {
			return 0, fmt.Errorf("etcd: load: %w", err)
		}
		for _, kv := range resp.Kvs {
			name, err := url.PathUnescape(strings.TrimPrefix(string(kv.Key), s.key("r/")))
			if err != nil {
				return 0, fmt.Errorf("etcd: load: key %q: %w", kv.Key, state.ErrCorrupt)
			}
			r, err := state.DecodeResource(kv.Value)
			if err != nil {
				return 0, fmt.Errorf("etcd: load %q: %w", name, err)
			}
			if err := fn(name, r); err != nil {
				return 0, err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// Entry implements state.Remote.
func (s *Store) Entry(ctx context.Context, resource, key string) (state.Entry, bool, error) {
	resp, err := s.cli.Get(ctx, s.entryKey(resource, key))
	if err != nil {
		return state.Entry{}, false, fmt.Errorf("etcd: get %q/%q: %w", resource, key, err)
	}
	if len(resp.Kvs) == 0 {
		return state.Entry{}, false, nil
	}
	e, err := state.DecodeEntry(resp.Kvs[0].Value)
	if err != nil {
		return state.Entry{}, false, fmt.Errorf("etcd: get %q/%q: %w", resource, key, err)
	}
	return e, true, nil
}

// Commit implements state.Remote: one Txn that applies c if the epoch key
// still holds the record this server wrote for epoch.
func (s *Store) Commit(ctx context.Context, epoch state.Epoch, c *state.Changes) error {
	s.mu.Lock()
	record, ok := s.records[epoch]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("etcd: commit: epoch %d is not this server's: %w", epoch, state.ErrDeposed)
	}
	ops := make([]clientv3.Op, 0, len(c.Resources)+len(c.Entries)+1)
	for name, r := range c.Resources {
		ops = append(ops, clientv3.OpPut(s.resourceKey(name), string(state.EncodeResource(r))))
	}
	for id, e := range c.Entries {
		if e == nil {
			ops = append(ops, clientv3.OpDelete(s.entryKey(id.Resource, id.Key)))
		} else {
			ops = append(ops, clientv3.OpPut(s.entryKey(id.Resource, id.Key), string(state.EncodeEntry(*e))))
		}
	}
	if c.RevSet {
		ops = append(ops, clientv3.OpPut(s.key("rev"), strconv.FormatUint(uint64(c.Rev), 10)))
	}
	// The commit key numbers the commits of the epoch (c.Seq): commit n
	// applies only after commit n-1, so that a commit sent again after an
	// unknown outcome (see state.LeaderEngine) applies once, a first
	// attempt that arrives late cannot apply after a later commit, and a
	// commit sent before the one it follows was applied (several are in
	// flight) waits for it. A commit that writes nothing (it confirms
	// reads) is not numbered and checks the epoch only: etcd answers it as
	// a read.
	numbered := !s.opts.UnsafeSkipEpochCheck && len(ops) > 0
	if numbered && c.Seq == 0 {
		return fmt.Errorf("etcd: commit: a commit that writes has no number: %w", state.ErrNotApplied)
	}
	next := commitID(epoch, c.Seq)
	if numbered {
		ops = append(ops, clientv3.OpPut(s.key("commit"), next))
	}
	kv, via := s.route.kv(s.cli)
	txn := kv.Txn(ctx)
	switch {
	case numbered:
		// c carries the commits from c.From() on (state.Remote): it
		// applies if the commit key is at one of c.From()-1 .. c.Seq-1.
		// The commit numbers have a fixed width, so the values of one
		// epoch sort as their numbers do.
		txn = txn.If(
			clientv3.Compare(clientv3.Value(s.key("epoch")), "=", record),
			clientv3.Compare(clientv3.Value(s.key("commit")), ">", commitBelow(epoch, c.From()-1)),
			clientv3.Compare(clientv3.Value(s.key("commit")), "<", next),
		).Then(ops...).Else(clientv3.OpGet(s.key("epoch")), clientv3.OpGet(s.key("commit")))
	case !s.opts.UnsafeSkipEpochCheck:
		txn = txn.If(clientv3.Compare(clientv3.Value(s.key("epoch")), "=", record)).
			Then(ops...).Else(clientv3.OpGet(s.key("epoch")))
	default:
		txn = txn.Then(ops...)
	}
	resp, err := txn.Commit()
	if err != nil && !isLimit(err) {
		s.route.failed(via)
	}
	switch {
	case isLimit(err):
		return fmt.Errorf("etcd refused a commit of %d operations and %d bytes of values as too large (its --max-txn-ops or --max-request-bytes): %w: %w",
			len(ops), c.Bytes(), state.ErrNotApplied, fence.ErrTooLarge)
	case err != nil:
		return fmt.Errorf("etcd: commit: %w", err)
	case resp.Succeeded:
		return nil
	case firstValue(resp.Responses[0]) != record:
		return fmt.Errorf("etcd: commit: the writer epoch moved past %d: %w", epoch, state.ErrDeposed)
	case !numbered:
		return fmt.Errorf("etcd: commit: the epoch check failed without the epoch moving: %w", state.ErrNotApplied)
	}
	commitNow := firstValue(resp.Responses[1])
	switch at, ok := commitNumber(epoch, commitNow); {
	case ok && at >= c.Seq:
		return nil // applied already: by an earlier attempt, or carried by a later commit
	case ok && at < c.From()-1:
		return fmt.Errorf("etcd: commit %d: %w (the commit key is at %d)", c.Seq, state.ErrOutOfOrder, at)
	default:
		return fmt.Errorf("etcd: commit %d: the commit key is at %q: another writer under epoch %d", c.Seq, commitNow, epoch)
	}
}

// Resends implements state.Resender: the commit key numbers the commits,
// unless the epoch check is off (a test's negative control).
func (s *Store) Resends() bool { return !s.opts.UnsafeSkipEpochCheck }

// commitID names commit n of epoch, the value of the commit key. The
// number has a fixed width, so that the values of one epoch sort as their
// numbers do (a server of an earlier version wrote it without, and read
// either).
func commitID(epoch state.Epoch, n uint64) string { return fmt.Sprintf("%d/%020d", epoch, n) }

// commitBelow returns a value just below commitID(epoch, n) among the
// values of epoch: a value of epoch is greater than it if and only if its
// number is n or more.
func commitBelow(epoch state.Epoch, n uint64) string {
	if n == 0 {
		return fmt.Sprintf("%d/", epoch)
	}
	return commitID(epoch, n-1)
}

// commitNumber returns n of a commit key's value commitID(epoch, n), and
// whether the value is one of epoch.
func commitNumber(epoch state.Epoch, id string) (uint64, bool) {
	e, n, ok := strings.Cut(id, "/")
	if !ok || e != strconv.FormatUint(uint64(epoch), 10) {
		return 0, false
	}
	v, err := strconv.ParseUint(n, 10, 64)
	return v, err == nil
}

// firstValue returns the value of the first key a Get of a Txn's found, ""
// if none.
func firstValue(r *etcdserverpb.ResponseOp) string {
	if kvs := r.GetResponseRange().GetKvs(); len(kvs) > 0 {
		return string(kvs[0].Value)
	}
	return ""
}

// Limits implements state.Limiter: batches below etcd's default limits of
// 128 operations and 1.5 MiB per request. A change writes up to three keys
// (resource, entry, revision; a txn more), and requests carry some overhead.
func (s *Store) Limits() (maxChanges, maxBytes int) { return 40, 1 << 20 }

// isLimit reports whether err is etcd (or gRPC) refusing a request for its
// size or its number of operations: nothing of it was applied.
func isLimit(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, rpctypes.ErrTooManyOps) || errors.Is(err, rpctypes.ErrRequestTooLarge) {
		return true
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.ResourceExhausted
}
