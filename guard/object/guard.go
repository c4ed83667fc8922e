package object

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/guard/reject"
)

// Defaults of the Guard's fields, and the names of its metadata.
const (
	// DefaultMaxAttempts is the default Guard.MaxAttempts: how many
	// conditional writes a Write (or PutObject, DeleteObject, Claim) sends
	// while other writers keep changing the object first.
	DefaultMaxAttempts = 10
	// FenceMetadata is the user metadata (S3: x-amz-meta-fence) in which
	// every object the guard writes carries the fence it was written with.
	FenceMetadata = "fence"
	// TombstoneMetadata marks the tombstone of an object deleted by
	// DeleteObject ("true"). A name every store takes (Azure's metadata
	// names are C# identifiers: no hyphens).
	TombstoneMetadata = "fencetombstone"
)

// deleteTimeout bounds the best-effort deletes of objects the guard no
// longer needs.
const deleteTimeout = 10 * time.Second

// ErrContended means that other writers changed the object every time the
// guard read it and tried its conditional write, MaxAttempts times: nothing
// was applied. Retry later.
var ErrContended = errors.New("object: contended: other writers changed the object each time; nothing was applied")

// ErrEndpoint means that the store failed the conformance check (Check):
// its conditional writes cannot be trusted to fence, and the guard writes
// nothing through it. The error names the failed case.
var ErrEndpoint = errors.New("object: the store's conditional writes fail the conformance check")

// Guard enforces fencing tokens on writes to an object store with
// conditional writes (a Store: S3, Azure Blob Storage), in two ways (see the package doc): per object (PutObject,
// DeleteObject: each object is a resource, and carries its own fence), and
// many objects under one resource (Write, Claim: immutable data objects and
// a manifest that commits them with the resource's fence by
// compare-and-swap). Create one with New (or a store's package's NewGuard);
// set its fields before the first call and do not change them after. A
// Guard is safe for concurrent use.
//
// Before its first write the guard runs the conformance check (Check) on
// the store, under Prefix: a store that fails it gets an error wrapping
// ErrEndpoint, naming the failed case, for every write.
//
// Writes return *fence.FencedError when the token is lower than the fence
// stored, and then change nothing. They return an error wrapping
// fence.ErrInvalidToken, fence.ErrBadRequest or fence.ErrInvalidSequencer
// before sending anything, for a bad token, name or sequencer, and
// ErrContended when other writers won every conditional write (nothing
// applied). Any other error is the store's, wrapped; after one wrapping
// ErrNoAnswer the write may or may not have been applied. It is never
// reported as fence.ErrFenced.
type Guard struct {
	// Prefix is prefixed to every key the guard reads or writes: the
	// objects of PutObject and DeleteObject, and the manifests and data
	// objects of Write (under Prefix + "manifests/" and Prefix + "data/"),
	// and the conformance check's scratch objects (Prefix +
	// ".fence-check/"). Default "": the store's root.
	Prefix string

	// MaxAttempts bounds the conditional writes of one call while other
	// writers change the object between the guard's read and its write.
	// Default (and when 0): DefaultMaxAttempts.
	MaxAttempts int

	// Keys are the lock service's public keys. nil: sequencers are not
	// required. Set: every guarded write requires a valid sequencer for its
	// resource and token in ctx (fence.WithSequencer), checked before
	// anything is sent; otherwise it returns an error wrapping
	// fence.ErrInvalidSequencer and changes nothing.
	Keys fence.KeySet

	// Rejections logs and counts the writes the guard refuses
	// (reject.New("s3", ...)). nil: none are recorded.
	Rejections *reject.Recorder

	// Unfenced names best-effort resources (see fence.Unfenced): a write
	// with token 0 on one of them is applied with the fence neither checked
	// nor raised (still atomically, by the same compare-and-swap).
	Unfenced fence.Unfenced

	// TrustEndpoint skips the conformance check: set it only for a store
	// known to pass it (Check, or fence guard-check), to save the check's
	// requests at start.
	TrustEndpoint bool

	store Store
	name  string // the store's, in errors: "s3", "azblob"

	trustMu sync.Mutex
	trusted bool  // the check passed
	refused error // the check failed (wraps ErrEndpoint): every write gets it
}

// New returns a Guard that fences objects of store at its root; name names
// the store in errors ("s3").
func New(store Store, name string) *Guard {
	return &Guard{store: store, name: name}
}

// Store returns the store the guard writes to.
func (g *Guard) Store() Store { return g.store }

func (g *Guard) maxAttempts() int {
	if g.MaxAttempts <= 0 {
		return DefaultMaxAttempts
	}
	return g.MaxAttempts
}

// errorf is fmt.Errorf with the store's name first.
func (g *Guard) errorf(format string, args ...any) error {
	return fmt.Errorf(g.name+": "+format, args...)
}

// trust runs the conformance check once, before the first write: nil once
// it has passed; its failure (wrapping ErrEndpoint) for good once it has
// failed; any other error (the store unreachable) leaves it to be run
// again by the next write.
func (g *Guard) trust(ctx context.Context) error {
	if g.TrustEndpoint {
		return nil
	}
	g.trustMu.Lock()
	defer g.trustMu.Unlock()
	switch {
	case g.trusted:
		return nil
	case g.refused != nil:
		return g.refused
	}
	_, err := g.Check(ctx)
	switch {
	case err == nil:
		g.trusted = true
	case errors.Is(err, ErrEndpoint):
		g.refused = err
	}
	return err
}

// validate checks what every fenced write takes, before anything is sent.
func (g *Guard) validate(ctx context.Context, resource string, token fence.Token) error {
	if g.store == nil {
		return fmt.Errorf("%w: the Guard has no store (create it with New)", fence.ErrBadRequest)
	}
	if err := fence.ValidateResource(resource); err != nil {
		return err
	}
	if token == 0 && g.Unfenced.Has(resource) {
		return nil
	}
	if !token.Valid() {
		return fmt.Errorf("%w: %d", fence.ErrInvalidToken, uint64(token))
	}
	return g.Keys.Check(ctx, resource, token)
}

// backoff waits before attempt (from 1) of a conditional write that lost a
// race: a few jittered milliseconds, growing; false if ctx ended.
func backoff(ctx context.Context, attempt int) bool {
	d := time.Duration(1<<min(attempt, 6)) * time.Millisecond
	d = d/2 + mrand.N(d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// fenceOf returns the fence in an object's user metadata, 0 if none.
func fenceOf(meta map[string]string) (fence.Token, error) {
	v, ok := lookup(meta, FenceMetadata)
	if !ok {
		return 0, nil
	}
	u, err := strconv.ParseUint(v, 10, 64)
	if t := fence.Token(u); err != nil || !t.Valid() {
		return 0, fmt.Errorf("metadata %s=%.40q is not a token (1..%d)", FenceMetadata, v, uint64(fence.MaxToken))
	}
	return fence.Token(u), nil
}

// lookup finds a user metadata key whatever its case: HTTP header names are
// case-insensitive, and stores return them in different cases.
func lookup(meta map[string]string, key string) (string, bool) {
	if v, ok := meta[key]; ok {
		return v, true
	}
	for k, v := range meta {
		if strings.EqualFold(k, key) {
			return v, true
		}
	}
	return "", false
}

// escape makes a resource or key name one path segment of an object key.
func escape(name string) string { return url.PathEscape(name) }

// nonce returns 16 random hex digits, for names no other writer makes.
func nonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// tokenString is a token as the guard stores it: decimal.
func tokenString(t fence.Token) string { return strconv.FormatUint(uint64(t), 10) }
