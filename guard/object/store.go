package object

import (
	"context"
	"errors"
)

// Version is an object's version as its store names it: an S3 or Azure
// ETag, a GCS generation. The guard treats it as opaque; "" is none.
type Version string

// Cond is the condition of a write: IfMatch, write only if the object's
// version is that one; IfAbsent, only if there is no object; neither, write
// whatever is there (the guard does so only to delete what it no longer
// needs).
type Cond struct {
	IfMatch  Version
	IfAbsent bool
}

// Errors a Store returns, wrapped.
var (
	// ErrConditionFailed means that a write's condition did not hold (S3
	// and Azure: 412, or S3's 409 ConditionalRequestConflict for a racing
	// write; GCS: 412): the write was not applied.
	ErrConditionFailed = errors.New("object: the write's condition did not hold")
	// ErrNotFound means that there is no such object.
	ErrNotFound = errors.New("object: no such object")
	// ErrNoAnswer means that a request got no answer (a deadline, a
	// connection lost or refused): a write may or may not have been
	// applied.
	ErrNoAnswer = errors.New("object: no answer")
)

// Store is an object store with conditional writes, as a Guard uses it: one
// bucket (or container) of S3 or Azure Blob Storage, through an adapter
// (packages guard/s3, guard/azblob). Its
// methods are safe for concurrent use. Every error wraps
// ErrConditionFailed, ErrNotFound or ErrNoAnswer where it is one of those;
// any other error is an answer of the store that refused the request.
type Store interface {
	// Head returns the object's version and user metadata.
	Head(ctx context.Context, key string) (Version, map[string]string, error)
	// Get returns the object's body, version and user metadata.
	Get(ctx context.Context, key string) ([]byte, Version, map[string]string, error)
	// Put writes body and meta as the object key, if cond holds, in one
	// atomic step of the store, and returns the new version. It sends the
	// write once: a write resent after a lost answer, whose first copy had
	// landed, would be refused by the version its own first copy made, and
	// the guard would apply it again over a later writer's.
	Put(ctx context.Context, key string, body []byte, meta map[string]string, cond Cond) (Version, error)
	// Delete deletes the object key if cond holds (IfMatch, or no
	// condition).
	Delete(ctx context.Context, key string, cond Cond) error
	// Forms returns the forms of v, as Head, Get or Put returned it, that
	// the store must take in Cond.IfMatch (S3: the ETag quoted and
	// unquoted): the conformance check tries each.
	Forms(v Version) []Version
}
