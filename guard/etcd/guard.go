package etcd

import (
	"context"
	"fmt"
	"net/url"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/guard/reject"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultPrefix is the default Guard.Prefix: the etcd key prefix under which
// fence keys live.
const DefaultPrefix = "/fence/fences/"

// Guard enforces fencing tokens on writes to etcd. Create one with NewGuard.
// A Guard is safe for concurrent use; set Prefix before its first use and do
// not change it after.
//
// Apply and Claim return *fence.FencedError when the token is lower than the
// resource's last fence, and then change nothing. They return an error
// wrapping fence.ErrInvalidToken or fence.ErrBadRequest for a bad token,
// resource or op, before sending anything. Any other error (a context
// cancelled or past its deadline, an unavailable cluster) may come after the
// transaction was sent: the write may or may not have been applied. A write
// that returns nil is as durable as etcd makes any transaction.
type Guard struct {
	// Prefix is the key prefix of fence keys. Default (and when empty):
	// DefaultPrefix. Every guard of a resource must use the same Prefix, and
	// no other writer may write under it.
	Prefix string

	// Keys are the lock service's public keys. nil: sequencers are not
	// required. Set: every guarded write and claim (Apply, Claim) requires a
	// valid sequencer for its resource and token in ctx (fence.WithSequencer),
	// checked before anything is sent to etcd; otherwise it returns an error
	// wrapping fence.ErrInvalidSequencer and changes nothing. A valid
	// sequencer never makes a stale token acceptable. Set it before the first
	// call.
	Keys fence.KeySet

	// Rejections, if not nil, logs and counts every write the guard
	// refuses (stale token, missing or forged sequencer, bad token or
	// name), as fence's own storage does. Set it before the first call.
	Rejections *reject.Recorder

	// Unfenced names best-effort resources (see fence.Unfenced): Apply with
	// token 0 on one of them applies the ops alone, the fence neither
	// checked nor raised. Set it before the first call.
	Unfenced fence.Unfenced

	kv clientv3.KV
}

// NewGuard returns a Guard that writes through kv, with Prefix set to
// DefaultPrefix. A *clientv3.Client is a clientv3.KV; so is a namespaced KV
// (namespace.NewKV), in which fence keys are namespaced too.
func NewGuard(kv clientv3.KV) *Guard {
	return &Guard{Prefix: DefaultPrefix, kv: kv}
}

func (g *Guard) prefix() string {
	if g.Prefix == "" {
		return DefaultPrefix
	}
	return g.Prefix
}

// FenceKey returns the etcd key that holds resource's last fence: Prefix
// followed by url.PathEscape(resource). Its value is the token as 20
// zero-padded decimal digits; the key is absent until the first fenced write.
func (g *Guard) FenceKey(resource string) string {
	return g.prefix() + url.PathEscape(resource)
}

// Apply applies ops, which must be puts (clientv3.OpPut) and deletes
// (clientv3.OpDelete) outside Prefix, in one etcd transaction, if token >=
// the resource's last fence, and raises the fence to token in the same
// transaction. It makes one round trip to etcd.
//
// On success it returns the transaction's response with Succeeded set to
// true and one entry in Responses per op, in the order of ops (the fence
// key's own put is left out); Header.Revision is the revision of the write.
// If token is stale it returns *fence.FencedError and changes nothing. See
// Guard for the other errors. The transaction holds len(ops)+1 operations,
// which etcd limits (--max-txn-ops, 128 by default).
func (g *Guard) Apply(ctx context.Context, resource string, token fence.Token, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	resp, err := g.apply(ctx, "apply", resource, token, ops)
	return resp, g.Rejections.Observe(ctx, "apply", resource, token, err)
}

// Claim raises resource's last fence to token without writing anything else,
// as a lock grant does, so that holders of lower tokens are rejected from
// now on. It returns nil if token >= the last fence (an equal token is a
// retry), and *fence.FencedError otherwise. See Guard for the other errors.
func (g *Guard) Claim(ctx context.Context, resource string, token fence.Token) error {
	_, err := g.apply(ctx, "claim", resource, token, nil)
	return g.Rejections.Observe(ctx, "claim", resource, token, err)
}

// Fence returns resource's last fence, 0 if it was never fenced, with a
// linearizable read.
func (g *Guard) Fence(ctx context.Context, resource string) (fence.Token, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return 0, fmt.Errorf("etcd: fence: %w", err)
	}
	key := g.FenceKey(resource)
	resp, err := g.kv.Get(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("etcd: fence %q: %w", resource, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	t, err := decodeToken(resp.Kvs[0].Value)
	if err != nil {
		return 0, fmt.Errorf("etcd: fence %q: key %q: %w", resource, key, err)
	}
	return t, nil
}

func (g *Guard) apply(ctx context.Context, verb, resource string, token fence.Token, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return nil, fmt.Errorf("etcd: %s: %w", verb, err)
	}
	if token == 0 && verb == "apply" && g.Unfenced.Has(resource) {
		// Best effort: the ops alone, without the fence.
		if err := g.checkOps(ops); err != nil {
			return nil, fmt.Errorf("etcd: %s %q: %w", verb, resource, err)
		}
		resp, err := g.kv.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("etcd: %s %q: %w", verb, resource, err)
		}
		return &clientv3.TxnResponse{Header: resp.Header, Succeeded: true, Responses: resp.Responses}, nil
	}
	if !token.Valid() {
		return nil, fmt.Errorf("etcd: %s %q: %w: %d", verb, resource, fence.ErrInvalidToken, uint64(token))
	}
	if err := g.Keys.Check(ctx, resource, token); err != nil {
		return nil, fmt.Errorf("etcd: %s %q: %w", verb, resource, err)
	}
	if err := g.checkOps(ops); err != nil {
		return nil, fmt.Errorf("etcd: %s %q: %w", verb, resource, err)
	}
	key, enc := g.FenceKey(resource), encodeToken(token)

	// The write is stale iff the fence key exists AND holds a greater token:
	// one compare, because etcd fails a value compare on a missing key (and
	// would fail it too if it read a missing value as empty, since "" is not
	// greater than any token). So "absent OR fence <= token", an OR that
	// etcd's ANDed compares cannot express, is the Else branch, which holds
	// the ops once, in the same single request. (etcd also fails a compare
	// when it cannot read the key, which happens only for a compacted or
	// future revision, never for the current one that compares read.) The
	// rejecting branch reads the fence in the same transaction, so LastFence
	// is the fence that refused the write.
	accept := make([]clientv3.Op, 0, len(ops)+1)
	accept = append(accept, clientv3.OpPut(key, enc))
	accept = append(accept, ops...)
	resp, err := g.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(key), ">", enc)).
		Then(clientv3.OpGet(key)).
		Else(accept...).
		Commit()
	if err != nil {
		// Maybe applied, maybe not: never ErrFenced.
		return nil, fmt.Errorf("etcd: %s %q: %w", verb, resource, err)
	}
	if !resp.Succeeded {
		if len(resp.Responses) != len(accept) {
			return nil, fmt.Errorf("etcd: %s %q: %d responses to %d ops", verb, resource, len(resp.Responses), len(accept))
		}
		return &clientv3.TxnResponse{Header: resp.Header, Succeeded: true, Responses: resp.Responses[1:]}, nil
	}
	if len(resp.Responses) != 1 || len(resp.Responses[0].GetResponseRange().GetKvs()) != 1 {
		return nil, fmt.Errorf("etcd: %s %q: rejected, but the fence key %q was not read back", verb, resource, key)
	}
	last, err := decodeToken(resp.Responses[0].GetResponseRange().GetKvs()[0].Value)
	if err != nil {
		return nil, fmt.Errorf("etcd: %s %q: rejected by key %q: %w", verb, resource, key, err)
	}
	return nil, &fence.FencedError{Resource: resource, Presented: token, LastFence: last}
}

// checkOps returns an error wrapping fence.ErrBadRequest unless every op is a
// put or a delete whose keys are outside Prefix: a get or a nested txn would
// run only on the accepting branch, and a write under Prefix could lower a
// fence (etcd would also refuse a second put of the fence key in the txn).
func (g *Guard) checkOps(ops []clientv3.Op) error {
	lo := g.prefix()
	hi := clientv3.GetPrefixRangeEnd(lo)
	for i, op := range ops {
		switch {
		case op.IsPut():
			if overlaps(string(op.KeyBytes()), "", lo, hi) {
				return fmt.Errorf("%w: op %d puts %q, under the fence prefix %q", fence.ErrBadRequest, i, op.KeyBytes(), lo)
			}
		case op.IsDelete():
			if overlaps(string(op.KeyBytes()), string(op.RangeBytes()), lo, hi) {
				return fmt.Errorf("%w: op %d deletes keys under the fence prefix %q", fence.ErrBadRequest, i, lo)
			}
		case op.IsGet():
			return fmt.Errorf("%w: op %d is a get; only puts and deletes can be fenced", fence.ErrBadRequest, i)
		case op.IsTxn():
			return fmt.Errorf("%w: op %d is a txn; only puts and deletes can be fenced", fence.ErrBadRequest, i)
		default:
			return fmt.Errorf("%w: op %d is not a put or a delete", fence.ErrBadRequest, i)
		}
	}
	return nil
}

// noEnd is etcd's range end for "to the last key": WithFromKey, and a
// prefix of all 0xff bytes.
const noEnd = "\x00"

// overlaps reports whether etcd's key range [key, end) meets [lo, hi). An
// empty end means the single key; end "\x00" and hi "\x00" mean no upper
// bound.
func overlaps(key, end, lo, hi string) bool {
	belowHi := func(k string) bool { return hi == noEnd || k < hi }
	if end == "" {
		return key >= lo && belowHi(key)
	}
	return belowHi(key) && (end == noEnd || end > lo)
}
