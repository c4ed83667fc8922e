package etcd

import (
	"context"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// route sends commits to etcd's leader. A member that is not the leader
// forwards a proposal to it and answers only once it has applied the entry
// itself, and the client balances its calls over every endpoint: measured
// on a 3-member etcd on loopback, one Txn at a time, the leader answered
// 596 a second, a follower 527, the balanced client 458. So commits go
// through the connection to the member that says it leads, found by asking
// every member; through the balanced client while none is known, and for
// a while after a commit through the leader's connection failed (the
// member may be frozen or cut off: a resend must go elsewhere).
type route struct {
	endpoints []*endpoint

	mu       sync.Mutex
	leader   *endpoint // nil: the balanced client
	next     time.Time // when to look for the leader again
	finding  bool      // a look is under way
	failures int       // commits through the leader's connection that failed
	findStop chan struct{}
}

const (
	// routeRecheck is how often the leader is looked for again: etcd may
	// elect another, and a commit through a follower still works.
	routeRecheck = 5 * time.Second
	// routeCooldown is how long commits go through the balanced client
	// after one through the leader's connection failed.
	routeCooldown = 5 * time.Second
	// statusTimeout bounds one look at a member: a member that does not
	// answer at once is not chosen.
	statusTimeout = time.Second
)

func newRoute(eps []*endpoint) *route {
	return &route{endpoints: eps, findStop: make(chan struct{})}
}

// kv returns the KV to commit through, def (the balanced client) unless the
// leader's connection is known; it starts a look for the leader when one
// is due.
func (r *route) kv(def clientv3.KV) (clientv3.KV, *endpoint) {
	if len(r.endpoints) < 2 || r.endpoints[0].conn == nil {
		return def, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.finding && time.Now().After(r.next) {
		r.finding = true
		r.next = time.Now().Add(routeRecheck)
		go r.find()
	}
	if r.leader == nil {
		return def, nil
	}
	return r.leader.kv, r.leader
}

// failed records that a commit through ep failed: commits go through the
// balanced client until the cooldown has passed and the leader is found
// again.
func (r *route) failed(ep *endpoint) {
	if ep == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader == ep {
		r.leader = nil
	}
	r.failures++
	r.next = time.Now().Add(routeCooldown)
}

// find asks every member at once which member leads and whether it is that
// one, and keeps the connection of the one that says it leads.
func (r *route) find() {
	r.mu.Lock()
	failures := r.failures
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	go func() {
		select {
		case <-r.findStop:
			cancel()
		case <-ctx.Done():
		}
	}()
	found := make(chan *endpoint, len(r.endpoints))
	var wg sync.WaitGroup
	for _, ep := range r.endpoints {
		wg.Go(func() {
			resp, err := etcdserverpb.NewMaintenanceClient(ep.conn).Status(ctx, &etcdserverpb.StatusRequest{})
			if err == nil && resp.Header != nil && resp.Leader != 0 && resp.Header.MemberId == resp.Leader {
				found <- ep
			}
		})
	}
	wg.Wait()
	close(found)
	leader := <-found // nil if none said it leads
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finding = false
	if r.failures != failures {
		return // a commit failed meanwhile: the balanced client, for the cooldown
	}
	r.leader = leader
}

// close stops a look under way.
func (r *route) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.findStop:
	default:
		close(r.findStop)
	}
}
