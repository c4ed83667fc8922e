package etcd

import (
	"context"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// endpoint is a connection to one of the client's endpoints alone, for the
// calls that keep a leadership alive. The client balances its calls over
// its endpoints, and a connection to a member that stopped answering (a
// lost path, a frozen process) stays in the balance until gRPC's keepalive
// finds it dead, after 7 s (etcd refuses pings more often than every 5 s):
// longer than an election TTL. Through the client, a call that must go
// through in time may go to that member several times in a row; sent to
// every endpoint at once, one of the members still reachable answers it.
type endpoint struct {
	addr  string // as the client's endpoints name it
	conn  *grpc.ClientConn
	lease clientv3.Lease
	kv    clientv3.KV
}

// dialEndpoints connects to each of cli's endpoints alone, with cli's
// credentials; the connections are made by the first call. If none can be
// made, the one endpoint is cli itself.
func dialEndpoints(cli *clientv3.Client) []*endpoint {
	var eps []*endpoint
	for _, addr := range cli.Endpoints() {
		conn, err := cli.Dial(addr)
		if err != nil {
			// Only an invalid dial option fails here, and cli was made
			// with the same ones: leave the endpoint to the client.
			continue
		}
		eps = append(eps, &endpoint{
			addr:  addr,
			conn:  conn,
			lease: clientv3.NewLeaseFromLeaseClient(etcdserverpb.NewLeaseClient(conn), cli, 0),
			kv:    clientv3.NewKVFromKVClient(etcdserverpb.NewKVClient(conn), cli),
		})
	}
	if len(eps) == 0 {
		eps = append(eps, &endpoint{lease: cli, kv: cli})
	}
	return eps
}

// closeEndpoints closes the connections of dialEndpoints (not cli).
func closeEndpoints(eps []*endpoint) {
	for _, ep := range eps {
		if ep.conn != nil {
			ep.lease.Close()
			ep.conn.Close()
		}
	}
}

// everyEndpoint calls fn on every endpoint at once and returns the first
// success, or the last failure once all have failed; the calls still
// running are cancelled.
func everyEndpoint[T any](ctx context.Context, eps []*endpoint, fn func(context.Context, *endpoint) (T, error)) (T, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		v   T
		err error
	}
	answers := make(chan answer, len(eps))
	for _, ep := range eps {
		go func() {
			v, err := fn(ctx, ep)
			answers <- answer{v, err}
		}()
	}
	var last answer
	for range eps {
		if last = <-answers; last.err == nil {
			return last.v, nil
		}
	}
	return last.v, last.err
}
