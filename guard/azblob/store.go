package azblob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/fence-lock/fence/guard/object"
)

// Store is a container of Azure Blob Storage as an object.Store: objects
// are block blobs, versions their ETags; a write "if absent" is Put Blob
// with If-None-Match: *, "if matching" with If-Match; 412 (ConditionNotMet,
// or BlobAlreadyExists) and 409 are object.ErrConditionFailed, 404
// object.ErrNotFound, and an error without an HTTP answer, or a 5xx,
// object.ErrNoAnswer. Each object's fence is blob metadata (x-ms-meta-fence).
type Store struct {
	c *container.Client
}

var _ object.Store = (*Store)(nil)

// NewStore returns the container that c is a client of.
func NewStore(c *container.Client) *Store { return &Store{c: c} }

// NewGuard returns a guard of the blobs of the container that c is a client
// of, at its root: object.New(NewStore(c), "azblob").
func NewGuard(c *container.Client) *object.Guard {
	return object.New(NewStore(c), "azblob")
}

// once sends a request once: the SDK does not send a conditional write
// again after an answer was lost (see object.Store's Put).
func once(ctx context.Context) context.Context {
	return policy.WithRetryOptions(ctx, policy.RetryOptions{MaxRetries: -1})
}

// classify wraps err with the object package's sentinel it is, by its HTTP
// status.
func classify(err error) error {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return fmt.Errorf("%w: %w", object.ErrNoAnswer, err)
	}
	switch s := re.StatusCode; {
	case s == 412, s == 409:
		return fmt.Errorf("%w: %w", object.ErrConditionFailed, err)
	case s == 404:
		return fmt.Errorf("%w: %w", object.ErrNotFound, err)
	case s >= 500:
		// A server error may come after the write was applied.
		return fmt.Errorf("%w: %w", object.ErrNoAnswer, err)
	}
	return err
}

func metadata(m map[string]*string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}

func version(e *azcore.ETag) object.Version {
	if e == nil {
		return ""
	}
	return object.Version(*e)
}

func conditions(cond object.Cond) *blob.AccessConditions {
	m := &blob.ModifiedAccessConditions{}
	switch {
	case cond.IfMatch != "":
		e := azcore.ETag(cond.IfMatch)
		m.IfMatch = &e
	case cond.IfAbsent:
		e := azcore.ETagAny
		m.IfNoneMatch = &e
	default:
		return nil
	}
	return &blob.AccessConditions{ModifiedAccessConditions: m}
}

// Head implements object.Store.
func (s *Store) Head(ctx context.Context, key string) (object.Version, map[string]string, error) {
	p, err := s.c.NewBlobClient(key).GetProperties(ctx, nil)
	if err != nil {
		return "", nil, classify(err)
	}
	return version(p.ETag), metadata(p.Metadata), nil
}

// Get implements object.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, object.Version, map[string]string, error) {
	r, err := s.c.NewBlobClient(key).DownloadStream(ctx, nil)
	if err != nil {
		return nil, "", nil, classify(err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, "", nil, fmt.Errorf("%w: %w", object.ErrNoAnswer, err)
	}
	return b, version(r.ETag), metadata(r.Metadata), nil
}

// Put implements object.Store: a Put Blob of a block blob with If-Match or
// If-None-Match: *, sent once.
func (s *Store) Put(ctx context.Context, key string, body []byte, meta map[string]string, cond object.Cond) (object.Version, error) {
	md := make(map[string]*string, len(meta))
	for k, v := range meta {
		md[k] = &v
	}
	out, err := s.c.NewBlockBlobClient(key).Upload(once(ctx), streaming.NopCloser(bytes.NewReader(body)),
		&blockblob.UploadOptions{Metadata: md, AccessConditions: conditions(cond)})
	if err != nil {
		return "", classify(err)
	}
	return version(out.ETag), nil
}

// Delete implements object.Store: a Delete Blob with If-Match, sent once.
func (s *Store) Delete(ctx context.Context, key string, cond object.Cond) error {
	if _, err := s.c.NewBlobClient(key).Delete(once(ctx), &blob.DeleteOptions{AccessConditions: conditions(cond)}); err != nil {
		return classify(err)
	}
	return nil
}

// Forms implements object.Store: an ETag as Azure returns it (quoted).
func (s *Store) Forms(v object.Version) []object.Version { return []object.Version{v} }
