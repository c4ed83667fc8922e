package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/guard/reject"
	"github.com/go-zookeeper/zk"
)

// DefaultRoot is the default Guard.Root: the znode under which fence znodes
// live.
const DefaultRoot = "/fence/fences"

// DefaultMaxAttempts is the default Guard.MaxAttempts.
const DefaultMaxAttempts = 16

// ErrContended means the fence znode changed between the guard's read and
// its multi in every one of Guard.MaxAttempts attempts: other writers of the
// resource kept winning. Nothing was applied; the caller may retry.
var ErrContended = errors.New("zookeeper: the fence changed under every attempt")

// Conn is what a Guard uses of a ZooKeeper connection: a *zk.Conn is one.
type Conn interface {
	Get(path string) ([]byte, *zk.Stat, error)
	Create(path string, data []byte, flags int32, acl []zk.ACL) (string, error)
	Multi(ops ...any) ([]zk.MultiResponse, error)
}

// Guard enforces fencing tokens on writes to ZooKeeper. Create one with
// NewGuard. A Guard is safe for concurrent use; set its fields before its
// first use and do not change them after.
//
// Apply and Claim return *fence.FencedError when the token is lower than the
// resource's last fence, and then change nothing. They return an error
// wrapping fence.ErrInvalidToken, fence.ErrInvalidSequencer or
// fence.ErrBadRequest for a bad token, sequencer, resource or op, before
// sending anything, and one wrapping ErrContended when other writers raced
// it MaxAttempts times (nothing applied). An error of one of the user's ops
// (zk.ErrNodeExists, zk.ErrNoNode, zk.ErrBadVersion, ...) is returned
// wrapped, and then nothing was applied either. Any other error (a context
// cancelled or past its deadline, a lost connection) may come after the
// multi was sent: the write may or may not have been applied. A write that
// returns nil is as durable as ZooKeeper makes any multi.
type Guard struct {
	// Root is the znode under which fence znodes live, one per resource.
	// Default (and when empty): DefaultRoot. It is created, with its
	// missing parents, on the first fenced write. Every guard of a resource
	// must use the same Root, and no other writer may write under it.
	Root string

	// ACL is the ACL of the fence znodes, and of Root and its parents when
	// the guard creates them. Default (nil): zk.WorldACL(zk.PermAll).
	ACL []zk.ACL

	// MaxAttempts bounds the read-and-multi rounds of one Apply or Claim
	// that lose a race for the fence znode. Default (zero or less):
	// DefaultMaxAttempts.
	MaxAttempts int

	// Keys are the lock service's public keys. nil: sequencers are not
	// required. Set: every guarded write and claim (Apply, Claim) requires a
	// valid sequencer for its resource and token in ctx (fence.WithSequencer),
	// checked before anything is sent to ZooKeeper; otherwise it returns an
	// error wrapping fence.ErrInvalidSequencer and changes nothing. A valid
	// sequencer never makes a stale token acceptable.
	Keys fence.KeySet

	// Rejections logs and counts the writes and claims the guard refuses
	// (reject.New("zookeeper", ...)). nil: none are recorded.
	Rejections *reject.Recorder

	// Unfenced names best-effort resources (see fence.Unfenced): Apply with
	// token 0 on one of them applies the ops alone, in one multi, the fence
	// neither checked nor raised. Set it before the first call.
	Unfenced fence.Unfenced

	conn Conn
}

// NewGuard returns a Guard that writes through conn, with Root set to
// DefaultRoot.
func NewGuard(conn Conn) *Guard {
	return &Guard{Root: DefaultRoot, conn: conn}
}

func (g *Guard) root() string {
	if g.Root == "" {
		return DefaultRoot
	}
	return g.Root
}

func (g *Guard) acl() []zk.ACL {
	if g.ACL == nil {
		return zk.WorldACL(zk.PermAll)
	}
	return g.ACL
}

// FencePath returns the znode that holds resource's last fence: Root, '/'
// and EscapeName(resource). Its data is the token in ASCII decimal ("42");
// the znode is absent until the first fenced write.
func (g *Guard) FencePath(resource string) string {
	return g.root() + "/" + EscapeName(resource)
}

// checkRoot returns an error unless Root is a valid path that can hold
// fences.
func (g *Guard) checkRoot() error {
	root := g.root()
	if err := validatePath(root, false); err != nil {
		return fmt.Errorf("Root: %w", err)
	}
	if root == "/" || root == "/zookeeper" || strings.HasPrefix(root, "/zookeeper/") {
		return fmt.Errorf("%w: Root %q: fences need a znode of their own, outside /zookeeper", fence.ErrBadRequest, root)
	}
	return nil
}

// Apply applies ops (see Op: creates, sets, deletes and version checks of
// znodes outside Root) in one ZooKeeper multi, if token >= the resource's
// last fence, and raises the fence to token in the same multi. It reads the
// fence znode, then sends the multi with a version-checked set of the fence
// znode (or its creation, if it does not exist yet): two round trips, and
// again for each time another writer changed the fence in between.
//
// On success it returns the multi's responses to ops, one per op in the
// order of ops (the fence znode's own operation is left out). If token is
// stale it returns *fence.FencedError and changes nothing. See Guard for the
// other errors.
func (g *Guard) Apply(ctx context.Context, resource string, token fence.Token, ops ...Op) ([]zk.MultiResponse, error) {
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

// Fence returns resource's last fence, 0 if it was never fenced. It is one
// ZooKeeper read, answered by the server the connection is on: it never goes
// back in time for this connection, but it may miss a fence raised through
// another server a moment ago (ZooKeeper's reads are sequentially
// consistent, not linearizable). Apply and Claim do not depend on that: their
// multi is checked against the fence znode's current version.
func (g *Guard) Fence(ctx context.Context, resource string) (fence.Token, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return 0, fmt.Errorf("zookeeper: fence: %w", err)
	}
	if err := g.checkRoot(); err != nil {
		return 0, fmt.Errorf("zookeeper: fence %q: %w", resource, err)
	}
	last, _, err := g.read(ctx, g.FencePath(resource))
	if err != nil {
		return 0, fmt.Errorf("zookeeper: fence %q: %w", resource, err)
	}
	return last, nil
}

// read returns the fence in the znode path and the znode's data version; a
// nil stat means the znode does not exist (fence 0).
func (g *Guard) read(ctx context.Context, path string) (fence.Token, *zk.Stat, error) {
	type got struct {
		data []byte
		stat *zk.Stat
	}
	r, err := call(ctx, func() (got, error) {
		data, stat, err := g.conn.Get(path)
		return got{data, stat}, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	if r.stat == nil {
		return 0, nil, fmt.Errorf("fence znode %q: no stat", path)
	}
	last, err := decodeToken(r.data)
	if err != nil {
		return 0, nil, fmt.Errorf("fence znode %q: %w", path, err)
	}
	return last, r.stat, nil
}

func (g *Guard) apply(ctx context.Context, verb, resource string, token fence.Token, ops []Op) ([]zk.MultiResponse, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return nil, fmt.Errorf("zookeeper: %s: %w", verb, err)
	}
	if token == 0 && verb == "apply" && g.Unfenced.Has(resource) {
		return g.applyUnfenced(ctx, verb, resource, ops)
	}
	if !token.Valid() {
		return nil, fmt.Errorf("zookeeper: %s %q: %w: %d", verb, resource, fence.ErrInvalidToken, uint64(token))
	}
	if err := g.Keys.Check(ctx, resource, token); err != nil {
		return nil, fmt.Errorf("zookeeper: %s %q: %w", verb, resource, err)
	}
	if err := g.checkRoot(); err != nil {
		return nil, fmt.Errorf("zookeeper: %s %q: %w", verb, resource, err)
	}
	if err := checkOps(g.root(), ops); err != nil {
		return nil, fmt.Errorf("zookeeper: %s %q: %w", verb, resource, err)
	}
	path, enc := g.FencePath(resource), []byte(strconv.FormatUint(uint64(token), 10))
	attempts := g.MaxAttempts
	if attempts <= 0 {
		attempts = DefaultMaxAttempts
	}
	multi := make([]any, 1, len(ops)+1)
	for _, op := range ops {
		multi = append(multi, op)
	}
	madeRoot := false
	for attempt := 0; attempt < attempts; attempt++ {
		if attempt > 1 { // losing again: step aside a little, at random
			if err := sleep(ctx, rand.N(time.Duration(min(attempt, 10))*time.Millisecond)); err != nil {
				return nil, fmt.Errorf("zookeeper: %s %q: %w", verb, resource, err)
			}
		}
		last, stat, err := g.read(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("zookeeper: %s %q: reading the fence: %w", verb, resource, err)
		}
		if last > token {
			// Fences never go down, so the fence is still above token.
			return nil, &fence.FencedError{Resource: resource, Presented: token, LastFence: last}
		}
		// The fence op comes first: its error says whether another writer
		// changed the fence since the read. An equal token leaves the fence
		// as it is, so a check of the version is enough (and does not make
		// the retries of one holder conflict with each other).
		switch {
		case stat == nil:
			multi[0] = &zk.CreateRequest{Path: path, Data: enc, Acl: g.acl()}
		case last == token:
			multi[0] = &zk.CheckVersionRequest{Path: path, Version: stat.Version}
		default:
			multi[0] = &zk.SetDataRequest{Path: path, Data: enc, Version: stat.Version}
		}
		resp, err := call(ctx, func() ([]zk.MultiResponse, error) { return g.conn.Multi(multi...) })
		if err == nil {
			if len(resp) != len(multi) {
				return nil, fmt.Errorf("zookeeper: %s %q: %d responses to %d ops", verb, resource, len(resp), len(multi))
			}
			return resp[1:], nil
		}
		if len(resp) != len(multi) {
			// No per-op result: the request failed as a whole, or never
			// came back (the outcome is then unknown).
			return nil, fmt.Errorf("zookeeper: %s %q: %w", verb, resource, err)
		}
		fenceErr := resp[0].Error
		switch {
		case fenceErr == nil:
			// The fence op held: one of the user's ops failed the multi, the
			// first with an error (the ops after it are rolled back).
			for i, r := range resp[1:] {
				if r.Error != nil {
					p, kind, _, _ := opPath(ops[i])
					return nil, fmt.Errorf("zookeeper: %s %q: op %d (%s %s): %w", verb, resource, i, kind, p, r.Error)
				}
			}
			return nil, fmt.Errorf("zookeeper: %s %q: %w", verb, resource, err)
		case stat == nil && errors.Is(fenceErr, zk.ErrNoNode) && !madeRoot:
			// Root, or a parent of it, does not exist yet.
			madeRoot = true
			if err := g.makeRoot(ctx); err != nil {
				return nil, fmt.Errorf("zookeeper: %s %q: creating the fence root %q: %w", verb, resource, g.root(), err)
			}
			attempt-- // not a lost race
		case errors.Is(fenceErr, zk.ErrBadVersion), errors.Is(fenceErr, zk.ErrNodeExists), errors.Is(fenceErr, zk.ErrNoNode):
			// Another writer changed the fence since the read: read again.
		default:
			return nil, fmt.Errorf("zookeeper: %s %q: the fence znode %q: %w", verb, resource, path, fenceErr)
		}
	}
	return nil, fmt.Errorf("zookeeper: %s %q: %w (%d attempts)", verb, resource, ErrContended, attempts)
}

// applyUnfenced applies the ops of a best-effort resource in one multi,
// without the fence.
func (g *Guard) applyUnfenced(ctx context.Context, verb, resource string, ops []Op) ([]zk.MultiResponse, error) {
	if err := g.checkRoot(); err != nil {
		return nil, fmt.Errorf("zookeeper: %s %q: %w", verb, resource, err)
	}
	if err := checkOps(g.root(), ops); err != nil {
		return nil, fmt.Errorf("zookeeper: %s %q: %w", verb, resource, err)
	}
	if len(ops) == 0 {
		return nil, nil
	}
	multi := make([]any, 0, len(ops))
	for _, op := range ops {
		multi = append(multi, op)
	}
	resp, err := call(ctx, func() ([]zk.MultiResponse, error) { return g.conn.Multi(multi...) })
	if err != nil {
		for i, r := range resp {
			if r.Error != nil {
				p, kind, _, _ := opPath(ops[i])
				return nil, fmt.Errorf("zookeeper: %s %q: op %d (%s %s): %w", verb, resource, i, kind, p, r.Error)
			}
		}
		return nil, fmt.Errorf("zookeeper: %s %q: %w", verb, resource, err)
	}
	return resp, nil
}

// makeRoot creates Root and its missing parents, with the guard's ACL.
func (g *Guard) makeRoot(ctx context.Context) error {
	root := g.root()
	for i := 1; i <= len(root); i++ {
		if i < len(root) && root[i] != '/' {
			continue
		}
		p := root[:i]
		_, err := call(ctx, func() (string, error) { return g.conn.Create(p, nil, 0, g.acl()) })
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return nil
}

// decodeToken parses a fence znode's data. Its errors do not wrap
// fence.ErrInvalidToken: a bad fence znode is not a bad request.
func decodeToken(data []byte) (fence.Token, error) {
	n, err := strconv.ParseUint(string(data), 10, 64)
	if err != nil || !fence.Token(n).Valid() || strconv.FormatUint(n, 10) != string(data) {
		return 0, fmt.Errorf("data %q is not a token", data)
	}
	return fence.Token(n), nil
}

// call runs f, ZooKeeper's blocking call, and returns its result, or
// ctx.Err() if ctx is done first; f then goes on in the background until
// the client answers it (the client times requests out with the session).
func call[T any](ctx context.Context, f func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if ctx.Done() == nil { // never done: no goroutine needed
		return f()
	}
	type result struct {
		v   T
		err error
	}
	c := make(chan result, 1)
	go func() {
		v, err := f()
		c <- result{v, err}
	}()
	select {
	case r := <-c:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// sleep waits d, or less if ctx is done first; it returns ctx.Err().
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
