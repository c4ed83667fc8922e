package redis

import (
	"context"
	"errors"
	"fmt"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/guard/reject"
	goredis "github.com/redis/go-redis/v9"
)

// Errors of ops that Redis would refuse; Apply checks them before it writes
// anything, so a write that returns one changed nothing.
var (
	// ErrCrossSlot means a key of an Apply is not in the hash slot of the
	// resource's fence key, so Redis Cluster could not run the script; every
	// such error is a *CrossSlotError naming the key.
	ErrCrossSlot = errors.New("redis: key is not in the resource's hash slot")
	// ErrWrongType means an op's key holds a kind of value the op cannot
	// work on (HSET on a string, INCRBY on a hash), like Redis's WRONGTYPE.
	ErrWrongType = errors.New("redis: key holds the wrong kind of value")
	// ErrNotInteger means an INCRBY's value is not a 64-bit integer, or the
	// sum is out of range.
	ErrNotInteger = errors.New("redis: value is not an integer or out of range")
)

// CrossSlotError reports a key that is not in the hash slot of its
// resource's fence key. Apply returns it before sending anything.
type CrossSlotError struct {
	Resource  string
	Key       string
	Slot      int // the key's hash slot
	FenceSlot int // the slot of FenceKey(Resource)
}

func (e *CrossSlotError) Error() string {
	return fmt.Sprintf("redis: %q: key %q is in hash slot %d, not in slot %d of the fence key %q; name it with redis.Key(resource, name) to share the resource's hash tag",
		e.Resource, e.Key, e.Slot, e.FenceSlot, FenceKey(e.Resource))
}

// Is makes errors.Is(err, ErrCrossSlot) true for every *CrossSlotError.
func (e *CrossSlotError) Is(target error) bool { return target == ErrCrossSlot }

// fenceKeyPrefix begins every fence key; data keys must not.
const fenceKeyPrefix = "fence:{"

// FenceKey returns the Redis key that holds resource's last fence:
// "fence:{resource}". Its value is the token in decimal; the key is absent
// until the first fenced write, and never expires.
func FenceKey(resource string) string { return fenceKeyPrefix + resource + "}" }

// Key returns "{resource}:name", a data key in the hash slot of resource's
// fence key, so that Apply can write it on Redis Cluster too.
func Key(resource, name string) string { return "{" + resource + "}:" + name }

// Guard enforces fencing tokens on writes to Redis. A Guard is safe for
// concurrent use; it holds no state but the client.
//
// Apply and Claim return *fence.FencedError when the token is lower than the
// resource's last fence, and then change nothing. Apply returns an error
// wrapping fence.ErrPreconditionFailed, ErrWrongType or ErrNotInteger when
// an op's check fails, and then changes nothing either. They return
// *CrossSlotError, or an error wrapping fence.ErrInvalidToken or
// fence.ErrBadRequest, for a bad key, token, resource or op, before sending
// anything. Any other error (a timeout, a dropped connection, a context
// cancelled or past its deadline) may come after the script was sent: the
// write may or may not have been applied, and the guard does not resend it.
// A write that returns nil is as durable as Redis makes any write.
type Guard struct {
	// Keys are the lock service's public keys. nil: sequencers are not
	// required. Set: every guarded write and claim (Apply, Claim) requires a
	// valid sequencer for its resource and token in ctx (fence.WithSequencer),
	// checked before anything is sent to Redis; otherwise it returns an error
	// wrapping fence.ErrInvalidSequencer and changes nothing. A valid
	// sequencer never makes a stale token acceptable. Set it before the first
	// call.
	Keys fence.KeySet

	// Rejections, if not nil, logs and counts every write the guard
	// refuses (stale token, missing or forged sequencer, bad token or
	// name), as fence's own storage does. Set it before the first call.
	Rejections *reject.Recorder

	// Unfenced names best-effort resources (see fence.Unfenced): Apply with
	// token 0 on one of them runs the ops alone (the same script, all checked
	// before any is written), the fence neither checked nor raised. Set it
	// before the first call.
	Unfenced fence.Unfenced

	client goredis.UniversalClient
}

var _ fence.Fencer = (*Guard)(nil)

// NewGuard returns a Guard that writes through c: a *goredis.Client, a
// *goredis.ClusterClient or a failover (Sentinel) client. It does no I/O:
// the script is loaded into a server's cache by the first Apply that finds
// it missing there. The guard does not change c's options; it sends the
// script so that c never resends it (see Guard).
func NewGuard(c goredis.UniversalClient) *Guard { return &Guard{client: c} }

// Apply applies ops, in order, in one atomic step with the fence check: if
// token >= resource's last fence and every op's check holds, it raises the
// fence to token and applies every op; otherwise it changes nothing. Every
// key must be in the hash slot of FenceKey(resource), as keys made by Key
// are. It makes one round trip to Redis (two, once per server, when the
// server's script cache lacks the script). With no ops, it is Claim.
//
// If token is stale it returns *fence.FencedError, even when an op's check
// would fail too. See Guard for the other errors.
func (g *Guard) Apply(ctx context.Context, resource string, token fence.Token, ops ...Op) error {
	return g.Rejections.Observe(ctx, "apply", resource, token, g.run(ctx, "apply", resource, token, ops))
}

// Claim raises resource's last fence to token without writing anything else,
// as a lock grant does, so that holders of lower tokens are rejected from now
// on. It returns nil if token >= the last fence (an equal token is a retry),
// and *fence.FencedError otherwise. See Guard for the other errors. Claim
// implements fence.Fencer.
func (g *Guard) Claim(ctx context.Context, resource string, token fence.Token) error {
	return g.Rejections.Observe(ctx, "claim", resource, token, g.run(ctx, "claim", resource, token, nil))
}

// Fence returns resource's last fence, 0 if it was never fenced.
func (g *Guard) Fence(ctx context.Context, resource string) (fence.Token, error) {
	if err := checkResource(resource); err != nil {
		return 0, fmt.Errorf("redis: fence: %w", err)
	}
	key := FenceKey(resource)
	v, err := g.client.Get(ctx, key).Result()
	if errors.Is(err, goredis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("redis: fence %q: %w", resource, err)
	}
	t, err := fence.ParseToken(v)
	if err != nil {
		return 0, fmt.Errorf("redis: fence %q: key %q holds %q, not a fencing token", resource, key, v)
	}
	return t, nil
}

// checkResource returns an error wrapping fence.ErrBadRequest unless
// resource is a valid name that can be a hash tag: Redis reads "{}x}" as no
// tag at all, so a name beginning with '}' could not put its fence key and
// its data keys in one slot.
func checkResource(resource string) error {
	if err := fence.ValidateResource(resource); err != nil {
		return err
	}
	if resource[0] == '}' {
		return fmt.Errorf("%w: resource %q begins with '}', which a Redis hash tag cannot hold", fence.ErrBadRequest, resource)
	}
	return nil
}

func (g *Guard) run(ctx context.Context, verb, resource string, token fence.Token, ops []Op) error {
	if err := checkResource(resource); err != nil {
		return fmt.Errorf("redis: %s: %w", verb, err)
	}
	unfenced := token == 0 && verb == "apply" && g.Unfenced.Has(resource)
	if !unfenced && !token.Valid() {
		return fmt.Errorf("redis: %s %q: %w: %d", verb, resource, fence.ErrInvalidToken, uint64(token))
	}
	if !unfenced {
		if err := g.Keys.Check(ctx, resource, token); err != nil {
			return fmt.Errorf("redis: %s %q: %w", verb, resource, err)
		}
	}
	fenceKey := FenceKey(resource)
	slot := Slot(fenceKey)
	keys := make([]string, 1, 1+len(ops))
	keys[0] = fenceKey
	args := make([]any, 1, 1+4*len(ops))
	args[0] = token.String()
	for i, op := range ops {
		if err := op.check(resource, slot); err != nil {
			var cse *CrossSlotError
			if errors.As(err, &cse) {
				return err
			}
			return fmt.Errorf("redis: %s %q: op %d: %w", verb, resource, i, err)
		}
		keys = append(keys, op.key)
		args = op.args(args)
	}

	reply, err := g.eval(ctx, keys, args)
	if err != nil {
		// Maybe applied, maybe not: never ErrFenced.
		return fmt.Errorf("redis: %s %q: %w", verb, resource, err)
	}
	code, arg, ok := decodeReply(reply)
	if !ok {
		return fmt.Errorf("redis: %s %q: unexpected reply %v from the script", verb, resource, reply)
	}
	switch code {
	case replyApplied:
		return nil
	case replyFenced:
		last, err := fence.ParseToken(fmt.Sprint(arg))
		if err != nil {
			return fmt.Errorf("redis: %s %q: rejected by fence key %q holding %q, not a fencing token", verb, resource, fenceKey, arg)
		}
		return &fence.FencedError{Resource: resource, Presented: token, LastFence: last}
	case replyBadFence:
		return fmt.Errorf("redis: %s %q: fence key %q holds %q, not a fencing token", verb, resource, fenceKey, arg)
	}
	var sentinel error
	switch code {
	case replyCompareFail:
		sentinel = fence.ErrPreconditionFailed
	case replyWrongType:
		sentinel = ErrWrongType
	case replyNotInteger:
		sentinel = ErrNotInteger
	}
	i, ok := arg.(int64) // the op's index, from 1
	if sentinel == nil || !ok || i < 1 || i > int64(len(ops)) {
		return fmt.Errorf("redis: %s %q: unexpected reply %v from the script", verb, resource, reply)
	}
	op := ops[i-1]
	return fmt.Errorf("redis: %s %q: op %d, %s %q: %w", verb, resource, i-1, op.kind, op.key, sentinel)
}

// eval runs the script with EVALSHA, and with EVAL if the server's script
// cache lacks it (NOSCRIPT: the script did not run, so running it now is its
// first run). Neither command is resent by go-redis after an error: see
// noRetry.
func (g *Guard) eval(ctx context.Context, keys []string, args []any) (any, error) {
	reply, err := g.process(ctx, "evalsha", script.Hash(), keys, args)
	if isNoScript(err) {
		reply, err = g.process(ctx, "eval", scriptSource, keys, args)
	}
	return reply, err
}

func (g *Guard) process(ctx context.Context, name, payload string, keys []string, args []any) (any, error) {
	cmdArgs := make([]any, 0, 3+len(keys)+len(args))
	cmdArgs = append(cmdArgs, name, payload, len(keys))
	for _, k := range keys {
		cmdArgs = append(cmdArgs, k)
	}
	cmdArgs = append(cmdArgs, args...)
	cmd := goredis.NewCmd(ctx, cmdArgs...)
	cmd.SetFirstKeyPos(3)
	_ = g.client.Process(ctx, noRetry{cmd})
	return cmd.Result()
}

// noRetry is a command that go-redis must not resend after a network error
// or a timeout. go-redis retries commands (up to Options.MaxRetries, 3 by
// default) after errors that may come after the server ran them, an EOF or
// a read timeout; for the script that could apply a write twice, or report
// ErrFenced or ErrPreconditionFailed for a write that was applied. go-redis
// still retries where the command certainly did not run (a dial error, a
// MOVED or ASK redirection on a cluster).
type noRetry struct{ *goredis.Cmd }

// NoRetry implements goredis.Cmder.
func (noRetry) NoRetry() bool { return true }

// isNoScript reports whether err is Redis's NOSCRIPT reply to EVALSHA.
// go-redis normalizes it to ErrNoScript only on some paths, so this matches
// the reply's prefix too, as go-redis's own Script.Run does.
func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, goredis.ErrNoScript) || goredis.HasErrorPrefix(err, "NOSCRIPT"))
}

// decodeReply splits the script's reply {code, arg}; arg is a string or an
// integer.
func decodeReply(reply any) (code int64, arg any, ok bool) {
	a, ok := reply.([]any)
	if !ok || len(a) != 2 {
		return 0, nil, false
	}
	code, ok = a[0].(int64)
	return code, a[1], ok
}
