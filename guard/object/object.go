package object

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fence-lock/fence"
)

// reserved are the key prefixes, under Prefix, of the guard's own objects,
// which PutObject and DeleteObject refuse.
var reserved = []string{"manifests/", "data/", ".fence-check/"}

// objectKey returns the key of the object fenced as resource key, or an
// error wrapping fence.ErrBadRequest for a key of the guard's own.
func (g *Guard) objectKey(key string) (string, error) {
	if err := fence.ValidateKey(key); err != nil {
		return "", err
	}
	for _, r := range reserved {
		if strings.HasPrefix(key, r) {
			return "", fmt.Errorf("%w: key %q is under %q, where the guard keeps its own objects", fence.ErrBadRequest, key, r)
		}
	}
	return g.Prefix + key, nil
}

// objectState is what a Head says of a fenced object.
type objectState struct {
	version Version     // "" if absent
	fence   fence.Token // 0 if never fenced
}

func (g *Guard) head(ctx context.Context, key string) (objectState, error) {
	v, meta, err := g.store.Head(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return objectState{}, nil
	}
	if err != nil {
		return objectState{}, err
	}
	f, err := fenceOf(meta)
	if err != nil {
		return objectState{}, fmt.Errorf("object %s: %w", key, err)
	}
	if v == "" {
		return objectState{}, fmt.Errorf("object %s: read without a version", key)
	}
	return objectState{version: v, fence: f}, nil
}

// PutObject writes body as the object key (under Prefix), fenced as the
// resource key: if token >= the fence the object carries (in its metadata,
// FenceMetadata), it is written with token as its fence, by a conditional
// write on the version a Head just read (absent: only if still absent). A
// writer that changed the object in between makes it read again, check
// again and retry, up to MaxAttempts; then ErrContended, nothing written. A
// stale token gets *fence.FencedError, nothing written. Keys under Prefix
// + "manifests/", "data/" and ".fence-check/" are the guard's own and
// refused. See Guard for the other errors.
func (g *Guard) PutObject(ctx context.Context, key string, body []byte, token fence.Token) error {
	return g.Rejections.Observe(ctx, "put", key, token, g.putObject(ctx, "put", key, body, token, false))
}

// DeleteObject deletes the object key (under Prefix), fenced as PutObject
// writes it: it leaves a tombstone, an empty object that carries the fence
// (TombstoneMetadata "true"), which GetObject reports as absent; of an
// absent object too, whose fence it raises. A delete of the store's would
// take the fence with the object, and a stale holder's create-if-absent
// would then create it again.
func (g *Guard) DeleteObject(ctx context.Context, key string, token fence.Token) error {
	return g.Rejections.Observe(ctx, "delete", key, token, g.putObject(ctx, "delete", key, nil, token, true))
}

func (g *Guard) putObject(ctx context.Context, op, key string, body []byte, token fence.Token, tombstone bool) error {
	if err := g.validate(ctx, key, token); err != nil {
		return g.errorf("%s %q: %w", op, key, err)
	}
	objKey, err := g.objectKey(key)
	if err != nil {
		return g.errorf("%s %q: %w", op, key, err)
	}
	if err := g.trust(ctx); err != nil {
		return g.errorf("%s %q: %w", op, key, err)
	}
	for attempt := 1; ; attempt++ {
		st, err := g.head(ctx, objKey)
		if err != nil {
			return g.errorf("%s %q: %w", op, key, err)
		}
		if token != 0 && token < st.fence {
			return &fence.FencedError{Resource: key, Presented: token, LastFence: st.fence}
		}
		if tombstone && st.version == "" && token == 0 {
			return nil // absent, and unfenced: nothing to delete, nor to fence
		}
		meta := map[string]string{}
		if f := max(st.fence, token); f != 0 {
			meta[FenceMetadata] = tokenString(f)
		}
		if tombstone {
			meta[TombstoneMetadata] = "true"
		}
		cond := Cond{IfMatch: st.version, IfAbsent: st.version == ""}
		_, err = g.store.Put(ctx, objKey, body, meta, cond)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrConditionFailed) && !(st.version != "" && errors.Is(err, ErrNotFound)) {
			return g.errorf("%s %q: %w", op, key, err)
		}
		if attempt >= g.maxAttempts() || !backoff(ctx, attempt) {
			return g.errorf("%s %q: %w (%d attempts)", op, key, ErrContended, attempt)
		}
	}
}

// GetObject returns the object key (under Prefix) as PutObject wrote it,
// and its fence; found is false if it is absent or a tombstone (its fence
// is then still returned).
func (g *Guard) GetObject(ctx context.Context, key string) (body []byte, lastFence fence.Token, found bool, err error) {
	objKey, err := g.objectKey(key)
	if err != nil {
		return nil, 0, false, g.errorf("get %q: %w", key, err)
	}
	body, _, meta, err := g.store.Get(ctx, objKey)
	if errors.Is(err, ErrNotFound) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, g.errorf("get %q: %w", key, err)
	}
	if lastFence, err = fenceOf(meta); err != nil {
		return nil, 0, false, g.errorf("get %q: %w", key, err)
	}
	if d, _ := lookup(meta, TombstoneMetadata); d == "true" {
		return nil, lastFence, false, nil
	}
	return body, lastFence, true, nil
}
