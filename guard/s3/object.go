package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

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

// objectState is what a HEAD says of a fenced object.
type objectState struct {
	etag    string      // "" if absent
	fence   fence.Token // 0 if never fenced
	deleted bool        // a tombstone
}

func (g *Guard) head(ctx context.Context, key string) (objectState, error) {
	out, err := g.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: g.bucket(), Key: aws.String(key)})
	if err != nil {
		if notFound(err) {
			return objectState{}, nil
		}
		return objectState{}, err
	}
	f, err := fenceOf(out.Metadata)
	if err != nil {
		return objectState{}, fmt.Errorf("object %s: %w", key, err)
	}
	etag := aws.ToString(out.ETag)
	if etag == "" {
		return objectState{}, fmt.Errorf("object %s: HEAD returned no ETag", key)
	}
	d, _ := lookup(out.Metadata, DeletedMetadata)
	return objectState{etag: etag, fence: f, deleted: d == "true"}, nil
}

// PutObject writes body as the object key (under Prefix), fenced as the
// resource key: if token >= the fence the object carries (in its metadata,
// FenceMetadata), it is written with token as its fence, by a PutObject
// with If-Match of the ETag a HEAD just read (If-None-Match: * if the
// object is absent). A writer that changed the object in between makes it
// read again, check again and retry, up to MaxAttempts; then ErrContended,
// nothing written. A stale token gets *fence.FencedError, nothing written.
// Keys under Prefix + "manifests/", "data/" and ".fence-check/" are the
// guard's own and refused. See Guard for the other errors.
func (g *Guard) PutObject(ctx context.Context, key string, body []byte, token fence.Token) error {
	return g.Rejections.Observe(ctx, "put", key, token, g.putObject(ctx, "put", key, body, token, false))
}

// DeleteObject deletes the object key (under Prefix), fenced as PutObject
// writes it: it leaves a tombstone, an empty object that carries the fence
// (DeletedMetadata "true"), which GetObject reports as absent; of an absent
// object too, whose fence it raises. A DeleteObject of S3 would take the
// fence with it, and a stale holder's If-None-Match: * would then create
// the object again.
func (g *Guard) DeleteObject(ctx context.Context, key string, token fence.Token) error {
	return g.Rejections.Observe(ctx, "delete", key, token, g.putObject(ctx, "delete", key, nil, token, true))
}

func (g *Guard) putObject(ctx context.Context, op, key string, body []byte, token fence.Token, tombstone bool) error {
	if err := g.validate(ctx, key, token); err != nil {
		return fmt.Errorf("s3: %s %q: %w", op, key, err)
	}
	objKey, err := g.objectKey(key)
	if err != nil {
		return fmt.Errorf("s3: %s %q: %w", op, key, err)
	}
	if err := g.trust(ctx); err != nil {
		return fmt.Errorf("s3: %s %q: %w", op, key, err)
	}
	for attempt := 1; ; attempt++ {
		st, err := g.head(ctx, objKey)
		if err != nil {
			return fmt.Errorf("s3: %s %q: %w", op, key, err)
		}
		if token != 0 && token < st.fence {
			return &fence.FencedError{Resource: key, Presented: token, LastFence: st.fence}
		}
		if tombstone && st.etag == "" && token == 0 {
			return nil // absent, and unfenced: nothing to delete, nor to fence
		}
		meta := map[string]string{FenceMetadata: tokenString(max(st.fence, token))}
		if max(st.fence, token) == 0 {
			meta = map[string]string{} // unfenced, and never fenced
		}
		if tombstone {
			meta[DeletedMetadata] = "true"
		}
		in := &s3.PutObjectInput{Bucket: g.bucket(), Key: aws.String(objKey), Body: bytes.NewReader(body), Metadata: meta}
		if st.etag == "" {
			in.IfNoneMatch = aws.String("*")
		} else {
			in.IfMatch = aws.String(st.etag)
		}
		_, err = g.api.PutObject(ctx, in, once)
		if err == nil {
			return nil
		}
		if !conditionFailed(err) && !(st.etag != "" && notFound(err)) {
			return fmt.Errorf("s3: %s %q: %w", op, key, err)
		}
		if attempt >= g.maxAttempts() || !backoff(ctx, attempt) {
			return fmt.Errorf("s3: %s %q: %w (%d attempts)", op, key, ErrContended, attempt)
		}
	}
}

// GetObject returns the object key (under Prefix) as PutObject wrote it,
// and its fence; found is false if it is absent or a tombstone (its fence
// is then still returned).
func (g *Guard) GetObject(ctx context.Context, key string) (body []byte, lastFence fence.Token, found bool, err error) {
	objKey, err := g.objectKey(key)
	if err != nil {
		return nil, 0, false, fmt.Errorf("s3: get %q: %w", key, err)
	}
	out, err := g.api.GetObject(ctx, &s3.GetObjectInput{Bucket: g.bucket(), Key: aws.String(objKey)})
	if err != nil {
		if notFound(err) {
			return nil, 0, false, nil
		}
		return nil, 0, false, fmt.Errorf("s3: get %q: %w", key, err)
	}
	defer out.Body.Close()
	if lastFence, err = fenceOf(out.Metadata); err != nil {
		return nil, 0, false, fmt.Errorf("s3: get %q: %w", key, err)
	}
	if d, _ := lookup(out.Metadata, DeletedMetadata); d == "true" {
		return nil, lastFence, false, nil
	}
	if body, err = io.ReadAll(out.Body); err != nil {
		return nil, 0, false, fmt.Errorf("s3: get %q: %w", key, err)
	}
	return body, lastFence, true, nil
}
