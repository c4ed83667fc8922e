package object

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/fence-lock/fence"
)

// MaxChanges is the most changes one Write takes.
const MaxChanges = 1000

// MaxManifestSize bounds a manifest the guard reads: 16 MiB.
const MaxManifestSize = 16 << 20

// A Change is one change of a Write: Value stored under Key, or, with
// Delete, Key removed.
type Change struct {
	Key    string
	Value  []byte
	Delete bool
}

// manifest is the object that commits a resource's data: the resource's
// fence and revision, and the data object that holds each key's value.
type manifest struct {
	Fence   fence.Token      `json:"fence"`
	Rev     uint64           `json:"rev"`     // commits so far: 1 after the first
	Commit  string           `json:"commit"`  // the nonce of the write that made it, for whoever looks
	Objects map[string]entry `json:"objects"` // by key
}

// entry is a key's value in a manifest: the data object that holds it, and
// the commit that wrote it.
type entry struct {
	Object string      `json:"object"`
	Rev    uint64      `json:"rev"`
	Token  fence.Token `json:"token,omitempty"` // 0 for an unfenced write
}

// Item is a key's value as the last commit of its resource left it.
type Item struct {
	Value []byte
	Rev   uint64      // the resource's revision of the commit that wrote it
	Token fence.Token // that commit's token; 0 for an unfenced write
}

// manifestKey is the key of resource's manifest.
func (g *Guard) manifestKey(resource string) string {
	return g.Prefix + "manifests/" + escape(resource)
}

// dataKey is a new data object key for key of resource, written with token:
// no other write makes the same one.
func (g *Guard) dataKey(resource, key string, token fence.Token) string {
	return g.Prefix + "data/" + escape(resource) + "/" + escape(key) + "/" + tokenString(token) + "-" + nonce()
}

// readManifest returns resource's manifest and its version; a zero
// manifest and "" if there is none.
func (g *Guard) readManifest(ctx context.Context, resource string) (manifest, Version, error) {
	key := g.manifestKey(resource)
	b, v, _, err := g.store.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return manifest{}, "", nil
	}
	if err != nil {
		return manifest{}, "", fmt.Errorf("reading the manifest: %w", err)
	}
	if len(b) > MaxManifestSize {
		return manifest{}, "", fmt.Errorf("the manifest %s is over %d bytes", key, MaxManifestSize)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return manifest{}, "", fmt.Errorf("the manifest %s is not one: %w", key, err)
	}
	if m.Fence != 0 && !m.Fence.Valid() {
		return manifest{}, "", fmt.Errorf("the manifest %s has fence %d, not a token", key, uint64(m.Fence))
	}
	if v == "" {
		return manifest{}, "", fmt.Errorf("the manifest %s was read without a version", key)
	}
	return m, v, nil
}

// casManifest writes m as resource's manifest if its version is still v
// ("": if there is none): nil if it was written.
func (g *Guard) casManifest(ctx context.Context, resource string, m manifest, v Version) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = g.store.Put(ctx, g.manifestKey(resource), body, map[string]string{FenceMetadata: tokenString(m.Fence)}, Cond{IfMatch: v, IfAbsent: v == ""})
	return err
}

// Write applies changes to resource's keys in one commit, if token >= the
// resource's fence, raises the fence to token, and returns the resource's
// revision after it (1 for its first commit, one more for each): the new
// values go to new immutable data objects (written only if absent, at keys
// no one else makes), and then one conditional write of the resource's
// manifest (on the version it read, or only if absent for the first)
// commits them with the fence. A writer that changed the manifest in between makes it read again,
// check the fence again and retry, up to MaxAttempts; then ErrContended,
// nothing committed. A stale token gets *fence.FencedError, nothing
// committed. Data objects that were not committed, and those a commit
// replaced, are deleted, best effort. Readers (Read) see all of the changes
// or none. See Guard for the other errors.
func (g *Guard) Write(ctx context.Context, resource string, token fence.Token, changes ...Change) (rev uint64, err error) {
	rev, err = g.write(ctx, "write", resource, token, changes)
	return rev, g.Rejections.Observe(ctx, "write", resource, token, err)
}

// Claim raises resource's fence to token without changing its keys, as a
// lock grant does, so that holders of lower tokens are refused from now on:
// a Write with no change. It returns nil if token >= the fence (an equal
// token is a retry), and *fence.FencedError otherwise.
func (g *Guard) Claim(ctx context.Context, resource string, token fence.Token) error {
	_, err := g.write(ctx, "claim", resource, token, nil)
	return g.Rejections.Observe(ctx, "claim", resource, token, err)
}

func (g *Guard) write(ctx context.Context, op, resource string, token fence.Token, changes []Change) (uint64, error) {
	if err := g.validate(ctx, resource, token); err != nil {
		return 0, g.errorf("%s %q: %w", op, resource, err)
	}
	if err := validateChanges(changes); err != nil {
		return 0, g.errorf("%s %q: %w", op, resource, err)
	}
	if err := g.trust(ctx); err != nil {
		return 0, g.errorf("%s %q: %w", op, resource, err)
	}
	unfenced := token == 0
	m, version, err := g.readManifest(ctx, resource)
	if err != nil {
		return 0, g.errorf("%s %q: %w", op, resource, err)
	}
	if !unfenced && token < m.Fence {
		return 0, &fence.FencedError{Resource: resource, Presented: token, LastFence: m.Fence}
	}
	// The values, each in a data object of its own, before the commit.
	data := make(map[string]string) // key -> its new data object
	uncommitted := func() {
		for _, k := range data {
			g.deleteQuietly(k)
		}
	}
	for _, c := range changes {
		if c.Delete {
			continue
		}
		k := g.dataKey(resource, c.Key, token)
		if _, err := g.store.Put(ctx, k, c.Value, map[string]string{FenceMetadata: tokenString(token)}, Cond{IfAbsent: true}); err != nil {
			data[c.Key] = k // perhaps written: deleted too
			uncommitted()
			return 0, g.errorf("%s %q: writing the value of %q: %w", op, resource, c.Key, err)
		}
		data[c.Key] = k
	}
	commit := nonce()
	for attempt := 1; ; attempt++ {
		next := manifest{Fence: max(m.Fence, token), Rev: m.Rev + 1, Commit: commit, Objects: maps.Clone(m.Objects)}
		if next.Objects == nil {
			next.Objects = make(map[string]entry)
		}
		var replaced []string
		for _, c := range changes {
			if old, ok := next.Objects[c.Key]; ok {
				replaced = append(replaced, old.Object)
			}
			if c.Delete {
				delete(next.Objects, c.Key)
			} else {
				next.Objects[c.Key] = entry{Object: data[c.Key], Rev: next.Rev, Token: token}
			}
		}
		err := g.casManifest(ctx, resource, next, version)
		if err == nil {
			for _, k := range replaced {
				g.deleteQuietly(k)
			}
			return next.Rev, nil
		}
		if !errors.Is(err, ErrConditionFailed) && !(version != "" && errors.Is(err, ErrNotFound)) {
			if !errors.Is(err, ErrNoAnswer) {
				uncommitted()
			}
			// Without an answer the commit may have landed: the data
			// objects stay, in case it did.
			return 0, g.errorf("%s %q: committing: %w", op, resource, err)
		}
		// Another writer changed the manifest first: read it again.
		if attempt >= g.maxAttempts() || !backoff(ctx, attempt) {
			uncommitted()
			return 0, g.errorf("%s %q: %w (%d attempts)", op, resource, ErrContended, attempt)
		}
		if m, version, err = g.readManifest(ctx, resource); err != nil {
			uncommitted()
			return 0, g.errorf("%s %q: %w", op, resource, err)
		}
		if !unfenced && token < m.Fence {
			uncommitted()
			return 0, &fence.FencedError{Resource: resource, Presented: token, LastFence: m.Fence}
		}
	}
}

// validateChanges checks the changes of a Write.
func validateChanges(changes []Change) error {
	if len(changes) > MaxChanges {
		return fmt.Errorf("%w: %d changes, more than %d", fence.ErrBadRequest, len(changes), MaxChanges)
	}
	seen := make(map[string]bool, len(changes))
	for _, c := range changes {
		if err := fence.ValidateKey(c.Key); err != nil {
			return err
		}
		if seen[c.Key] {
			return fmt.Errorf("%w: key %q changed twice in one write", fence.ErrBadRequest, c.Key)
		}
		seen[c.Key] = true
		if c.Delete && c.Value != nil {
			return fmt.Errorf("%w: key %q: a delete has no value", fence.ErrBadRequest, c.Key)
		}
	}
	return nil
}

// deleteQuietly deletes an object the guard no longer needs (a data object
// not committed, or replaced), best effort, with a context of its own: a
// leftover costs only storage.
func (g *Guard) deleteQuietly(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	_ = g.store.Delete(ctx, key, Cond{})
}

// Read returns the value of key in resource as the last commit left it,
// and whether it is there. A value replaced (and its data object deleted)
// between the reads of the manifest and of the data is read again from
// the new manifest.
func (g *Guard) Read(ctx context.Context, resource, key string) (Item, bool, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return Item{}, false, g.errorf("read %q: %w", resource, err)
	}
	for attempt := 1; ; attempt++ {
		m, _, err := g.readManifest(ctx, resource)
		if err != nil {
			return Item{}, false, g.errorf("read %q: %w", resource, err)
		}
		e, ok := m.Objects[key]
		if !ok {
			return Item{}, false, nil
		}
		b, _, _, err := g.store.Get(ctx, e.Object)
		if err == nil {
			return Item{Value: b, Rev: e.Rev, Token: e.Token}, true, nil
		}
		if !errors.Is(err, ErrNotFound) || attempt >= g.maxAttempts() {
			return Item{}, false, g.errorf("read %q %q: %w", resource, key, err)
		}
	}
}

// List returns the keys of resource, in byte order.
func (g *Guard) List(ctx context.Context, resource string) ([]string, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return nil, g.errorf("list: %w", err)
	}
	m, _, err := g.readManifest(ctx, resource)
	if err != nil {
		return nil, g.errorf("list %q: %w", resource, err)
	}
	return slices.Sorted(maps.Keys(m.Objects)), nil
}

// Fence returns resource's fence (of Write and Claim), 0 if it was never
// fenced.
func (g *Guard) Fence(ctx context.Context, resource string) (fence.Token, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return 0, g.errorf("fence: %w", err)
	}
	m, _, err := g.readManifest(ctx, resource)
	if err != nil {
		return 0, g.errorf("fence %q: %w", resource, err)
	}
	return m.Fence, nil
}
