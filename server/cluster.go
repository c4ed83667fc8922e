package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/fence-lock/fence/engine/etcd"
	"github.com/fence-lock/fence/engine/postgres"
	"github.com/fence-lock/fence/httpapi"
	"github.com/fence-lock/fence/state"
	"github.com/fence-lock/fence/wire"
)

// Engine is a replicated engine that several fence servers share: the state
// (state.Remote) and the leadership (state.Elector).
type Engine interface {
	state.Remote
	state.Elector
	// Close leaves the store: this server stops being a member.
	Close() error
}

// EngineName returns the engine a store URL names: "etcd", "postgres", or
// "" if none.
func EngineName(storeURL string) string {
	scheme, _, _ := strings.Cut(storeURL, "://")
	switch scheme {
	case "etcd", "etcds":
		return "etcd"
	case "postgres", "postgresql":
		return "postgres"
	}
	return ""
}

// OpenEngine connects to the replicated engine that storeURL names, as the
// server self:
//
//	etcd://HOST:PORT[,HOST:PORT...]/PREFIX    (etcds:// for TLS; see etcd.OpenStore)
//	postgres://USER@HOST:PORT[,HOST:PORT...]/DB?target_session_attrs=read-write  (see postgres.OpenStore)
//
// opts says who opens it and how.
func OpenEngine(ctx context.Context, storeURL string, opts state.EngineOptions) (Engine, error) {
	switch EngineName(storeURL) {
	case "etcd":
		return etcd.OpenStore(ctx, storeURL, opts)
	case "postgres":
		return postgres.OpenStore(ctx, storeURL, opts)
	}
	return nil, fmt.Errorf("server: store %q: want etcd://, etcds:// or postgres:// (without --store, the embedded store in --data)", redactURL(storeURL))
}

// redactURL hides a URL's password, for errors and logs.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}

// node is the part of a Server on a replicated engine: it campaigns, leads
// while it may, and stands by (forwarding to the leader) otherwise.
type node struct {
	s         *Server
	eng       Engine
	engName   string
	self      state.Member
	standby   *httpapi.Handler
	forwarder *httpapi.Forwarder

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu           sync.Mutex
	leading      *serving           // non-nil while this server leads
	epoch        state.Epoch        // the epoch this server leads under, or the last it saw
	leader       string             // the leader's URL, "" while none
	leaderCtx    context.Context    // ends when leader changes; forwarded requests end with it
	leaderCancel context.CancelFunc // ends leaderCtx
	members      []state.Member     // as last read
}

// setLeaderLocked records the leader's URL; when it changes, requests
// forwarded to the one before are cut short.
func (n *node) setLeaderLocked(url string) {
	if url == n.leader && n.leaderCtx != nil {
		return
	}
	if n.leaderCancel != nil {
		n.leaderCancel()
	}
	n.leader = url
	n.leaderCtx, n.leaderCancel = context.WithCancel(context.Background())
}

// openCluster starts the server on a replicated engine, as a standby that
// campaigns to lead.
func (s *Server) openCluster(ctx context.Context) error {
	cfg := s.cfg
	if cfg.Advertise == "" {
		return errors.New("server: a server on a shared store needs its advertise URL (--advertise)")
	}
	if u, err := url.Parse(cfg.Advertise); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" && u.Path != "/" {
		return fmt.Errorf("server: advertise URL %q: want http://host:port or https://host:port", cfg.Advertise)
	}
	self := state.Member{URL: strings.TrimSuffix(cfg.Advertise, "/")}
	if cfg.Signer != nil {
		self.KeyID = cfg.Signer.ID
	}
	eng, err := OpenEngine(ctx, cfg.Store, state.EngineOptions{Self: self, ElectionTTL: cfg.ElectionTTL, UnsafeSkipEpochCheck: cfg.UnsafeSkipEpochCheck})
	if err != nil {
		return err
	}
	n := &node{s: s, eng: eng, engName: EngineName(cfg.Store), self: self}
	if err := n.checkKeys(ctx); err != nil {
		eng.Close()
		return err
	}
	n.ctx, n.cancel = context.WithCancel(context.WithoutCancel(ctx))
	fwd := &httpapi.Forwarder{Self: self.URL, Leader: n.leaderURL, Transport: cfg.PeerTransport}
	n.standby = httpapi.NewHandler(nil, nil)
	s.configure(n.standby)
	n.standby.Forward = fwd
	n.forwarder = fwd
	n.standby.Ready = n.ready
	n.standby.Cluster = n.status
	var h http.Handler = n.standby
	s.handler.Store(&h)
	s.node = n
	n.wg.Add(2)
	go n.watch()
	go n.run()
	return nil
}

// ErrKeyMismatch is the error of Open when a server already on the store
// signs sequencers with another key than Config.Signer (or one of the two
// signs none): a configuration that cannot work, which waiting does not
// cure.
var ErrKeyMismatch = errors.New("every server on one store must use the same --signing-key")

// checkKeys refuses to join servers that sign with another key: a lease
// restored by a new leader is signed again, with the new leader's key.
func (n *node) checkKeys(ctx context.Context) error {
	members, err := n.eng.Members(ctx)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	for _, m := range members {
		if !strings.HasPrefix(m.URL, "http") {
			continue // a tool (fence migrate, fence bump), not a server
		}
		if m.URL != n.self.URL && m.KeyID != n.self.KeyID {
			return fmt.Errorf("server: %s signs sequencers with key %q and this server with %q: %w",
				m.URL, keyName(m.KeyID), keyName(n.self.KeyID), ErrKeyMismatch)
		}
	}
	return nil
}

func keyName(id string) string {
	if id == "" {
		return "(none)"
	}
	return id
}

// run campaigns and leads until Close.
func (n *node) run() {
	defer n.wg.Done()
	log := n.s.logger
	backoff := 100 * time.Millisecond
	for n.ctx.Err() == nil {
		t, err := n.eng.Campaign(n.ctx)
		if err != nil {
			if n.ctx.Err() != nil {
				return
			}
			log.Warn("campaign failed; retrying", "store", n.engName, "error", err, "retry_in", backoff.String())
			sleep(n.ctx, backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		n.lead(t)
	}
}

// lead serves as the leader of t until t ends, the state fails (deposed,
// or a commit of unknown outcome), or Close.
func (n *node) lead(t state.Term) {
	log := n.s.logger
	start := time.Now()
	resign := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := t.Resign(ctx); err != nil {
			log.Warn("resigning the leadership failed; it ends with its lease", "epoch", uint64(t.Epoch()), "error", err)
		}
	}
	cache, err := state.NewLeaderEngine(n.ctx, n.eng, t.Epoch())
	if err != nil {
		log.Error("taking over failed; standing by", "epoch", uint64(t.Epoch()), "error", err)
		resign()
		sleep(n.ctx, time.Second)
		return
	}
	db := state.NewDB(n.engName, cache)
	ready := func() error { return db.Err() }
	tm, err := n.s.newServing(n.ctx, db, db, ready, db.Close)
	if err != nil {
		log.Error("taking over failed; standing by", "epoch", uint64(t.Epoch()), "error", err)
		resign()
		return
	}
	tm.api.Cluster = n.status
	var h http.Handler = tm.api
	n.s.handler.Store(&h)
	n.mu.Lock()
	n.leading, n.epoch = tm, t.Epoch()
	n.setLeaderLocked(n.self.URL)
	n.mu.Unlock()
	log.Info("leading", "store", n.engName, "epoch", uint64(t.Epoch()), "resources", cache.Len(),
		"takeover_ms", time.Since(start).Milliseconds())

	var reason string
	select {
	case <-t.Done():
		reason = "the leadership's lease was lost"
	case <-db.Done():
		reason = db.Err().Error()
	case <-n.ctx.Done():
		reason = "shutting down"
	}
	var standby http.Handler = n.standby
	n.s.handler.Store(&standby)
	n.mu.Lock()
	n.leading = nil
	n.setLeaderLocked("")
	n.mu.Unlock()
	tm.drain()
	db.Close()
	resign()
	log.Warn("stepped down", "store", n.engName, "epoch", uint64(t.Epoch()), "reason", reason)
}

// watch keeps what this server knows of the leader and the members fresh,
// for forwarding and for GET /v1/cluster.
func (n *node) watch() {
	defer n.wg.Done()
	for n.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(n.ctx, time.Second)
		leader, epoch, ok, err := n.eng.Leader(ctx)
		members, merr := n.eng.Members(ctx)
		cancel()
		n.mu.Lock()
		if n.leading == nil {
			switch {
			case err != nil || !ok:
				n.setLeaderLocked("")
			default:
				n.setLeaderLocked(leader.URL)
			}
			if err == nil {
				n.epoch = max(n.epoch, epoch)
			}
		}
		if merr == nil {
			n.members = members
		}
		n.mu.Unlock()
		sleep(n.ctx, 200*time.Millisecond)
	}
}

// leaderURL returns the leader to forward to, and a context that ends when
// it is no longer the leader.
func (n *node) leaderURL() (string, context.Context, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.leading != nil || n.leader == "" || n.leader == n.self.URL {
		// Leading: the API serves; a standby that believes itself leader
		// is between terms.
		return "", nil, false
	}
	return n.leader, n.leaderCtx, true
}

// ready reports whether a standby would serve a request: it knows a leader
// to forward to.
func (n *node) ready() error {
	if _, _, ok := n.leaderURL(); !ok {
		return errors.New("no server leads the store right now")
	}
	return nil
}

// status answers GET /v1/cluster.
func (n *node) status(ctx context.Context) (wire.ClusterStatus, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := wire.ClusterStatus{Role: wire.RoleStandby, Leader: n.leader, Epoch: uint64(n.epoch), Store: n.engName}
	if n.leading != nil {
		st.Role = wire.RoleLeader
	}
	seen := false
	for _, m := range n.members {
		role := wire.RoleStandby
		if m.URL == st.Leader {
			role = wire.RoleLeader
		}
		st.Servers = append(st.Servers, wire.ClusterServer{URL: m.URL, Role: role})
		seen = seen || m.URL == n.self.URL
	}
	if !seen {
		st.Servers = append(st.Servers, wire.ClusterServer{URL: n.self.URL, Role: st.Role})
	}
	return st, nil
}

// drain stops the lock service this server serves as the leader, if any.
func (n *node) drain() {
	n.mu.Lock()
	tm := n.leading
	n.mu.Unlock()
	if tm != nil {
		tm.drain()
	}
	n.forwarder.EndStreams()
}

// closeWait is how long close waits for the campaign and the leadership to
// end before it closes the engine under them: longer than a resignation
// takes (2 s at most).
const closeWait = 3 * time.Second

// close steps down, stops campaigning and leaves the store.
func (n *node) close() error {
	n.cancel()
	stopped := make(chan struct{})
	go func() {
		n.wg.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(closeWait):
		// A call to an engine that does not answer may outlive its
		// context: etcd's election, cancelled while it campaigns, resigns
		// with its client's context, which only closing the client ends.
		n.s.logger.Warn("the store does not answer; closing it under the campaign", "store", n.engName, "waited", closeWait.String())
	}
	n.mu.Lock()
	if n.leaderCancel != nil {
		n.leaderCancel()
	}
	n.mu.Unlock()
	err := n.eng.Close()
	<-stopped
	return err
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
