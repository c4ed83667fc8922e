package s3_test

import (
	"bytes"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/guard/object"
)

// BenchmarkPut measures one 1 KiB object written on SeaweedFS four ways,
// each op one write of the same key: through the guard per object
// (HEAD, then PutObject with If-Match), through the guard's manifest
// (GET of the manifest, PutObject of the value, PutObject of the manifest
// with If-Match, DeleteObject of the value it replaced), and without the
// guard, as a plain PutObject and as a PutObject with If-Match of an ETag
// the writer already knows (the bare cost of the condition). The bucket's
// first write (SeaweedFS makes its volumes then, seconds) comes before.
func BenchmarkPut(b *testing.B) {
	g := newGuard(b)
	api, bucket, _ := newBucket(b)
	value := bytes.Repeat([]byte("v"), 1024)
	if err := g.PutObject(b.Context(), "warm", value, 1); err != nil {
		b.Fatal(err)
	}
	b.Run("GuardedObject", func(b *testing.B) {
		for b.Loop() {
			if err := g.PutObject(b.Context(), "object", value, 7); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("GuardedManifest", func(b *testing.B) {
		for b.Loop() {
			if _, err := g.Write(b.Context(), "resource", 7, object.Change{Key: "k", Value: value}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("BarePutObject", func(b *testing.B) {
		key := aws.String(g.Prefix + "bare")
		for b.Loop() {
			if _, err := api.PutObject(b.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: key, Body: bytes.NewReader(value)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("BareIfMatch", func(b *testing.B) {
		key := aws.String(g.Prefix + "bare-if-match")
		out, err := api.PutObject(b.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: key, Body: bytes.NewReader(value)})
		if err != nil {
			b.Fatal(err)
		}
		etag := out.ETag
		for b.Loop() {
			out, err := api.PutObject(b.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: key, Body: bytes.NewReader(value), IfMatch: etag})
			if err != nil {
				b.Fatal(err)
			}
			etag = out.ETag
		}
	})
}

// BenchmarkCheck measures the conformance check, on a bucket that has
// been written to already.
func BenchmarkCheck(b *testing.B) {
	g := newGuard(b)
	if err := g.PutObject(b.Context(), "warm", []byte("v"), fence.Token(1)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := g.Check(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}
