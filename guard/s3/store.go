package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fence-lock/fence/guard/object"
)

// API is the part of the S3 client that a Store uses. An *s3.Client is
// one. The endpoint must honour If-Match and If-None-Match on PutObject and
// If-Match on DeleteObject, which the guard's conformance check verifies.
type API interface {
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, opts ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, opts ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
}

// Store is a bucket of S3 or of an S3-compatible server as an object.Store:
// versions are ETags; a write "if absent" is If-None-Match: *, "if
// matching" If-Match; 412 Precondition Failed and 409
// ConditionalRequestConflict are object.ErrConditionFailed, 404
// object.ErrNotFound, and an error without an HTTP answer
// object.ErrNoAnswer.
type Store struct {
	api    API
	bucket string
}

var _ object.Store = (*Store)(nil)

// NewStore returns the bucket through api (usually an *s3.Client).
func NewStore(api API, bucket string) *Store { return &Store{api: api, bucket: bucket} }

// NewGuard returns a guard of the objects of bucket, through api (usually
// an *s3.Client), at the bucket's root: object.New(NewStore(api, bucket),
// "s3").
func NewGuard(api API, bucket string) *object.Guard {
	return object.New(NewStore(api, bucket), "s3")
}

// once sends a request once: the SDK does not send a conditional write
// again after an answer was lost (see object.Store's Put).
func once(o *s3.Options) { o.RetryMaxAttempts = 1 }

// classify wraps err with the object package's sentinel it is, by its HTTP
// status.
func classify(err error) error {
	var re *awshttp.ResponseError
	if !errors.As(err, &re) {
		return fmt.Errorf("%w: %w", object.ErrNoAnswer, err)
	}
	switch re.HTTPStatusCode() {
	case 412, 409:
		return fmt.Errorf("%w: %w", object.ErrConditionFailed, err)
	case 404:
		return fmt.Errorf("%w: %w", object.ErrNotFound, err)
	}
	if re.HTTPStatusCode() >= 500 {
		// A server error may come after the write was applied.
		return fmt.Errorf("%w: %w", object.ErrNoAnswer, err)
	}
	return err
}

// Head implements object.Store.
func (s *Store) Head(ctx context.Context, key string) (object.Version, map[string]string, error) {
	out, err := s.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return "", nil, classify(err)
	}
	return object.Version(aws.ToString(out.ETag)), out.Metadata, nil
}

// Get implements object.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, object.Version, map[string]string, error) {
	out, err := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return nil, "", nil, classify(err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, "", nil, fmt.Errorf("%w: %w", object.ErrNoAnswer, err)
	}
	return b, object.Version(aws.ToString(out.ETag)), out.Metadata, nil
}

// Put implements object.Store: a PutObject with If-Match or If-None-Match:
// *, sent once.
func (s *Store) Put(ctx context.Context, key string, body []byte, meta map[string]string, cond object.Cond) (object.Version, error) {
	in := &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key), Body: bytes.NewReader(body), Metadata: meta}
	switch {
	case cond.IfMatch != "":
		in.IfMatch = aws.String(string(cond.IfMatch))
	case cond.IfAbsent:
		in.IfNoneMatch = aws.String("*")
	}
	out, err := s.api.PutObject(ctx, in, once)
	if err != nil {
		return "", classify(err)
	}
	return object.Version(aws.ToString(out.ETag)), nil
}

// Delete implements object.Store: a DeleteObject with If-Match, sent once.
func (s *Store) Delete(ctx context.Context, key string, cond object.Cond) error {
	in := &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)}
	if cond.IfMatch != "" {
		in.IfMatch = aws.String(string(cond.IfMatch))
	}
	if _, err := s.api.DeleteObject(ctx, in, once); err != nil {
		return classify(err)
	}
	return nil
}

// Forms implements object.Store: an ETag quoted, as S3 returns it, and
// unquoted, as some clients send it.
func (s *Store) Forms(v object.Version) []object.Version {
	bare := strings.Trim(string(v), `"`)
	return []object.Version{object.Version(`"` + bare + `"`), object.Version(bare)}
}
