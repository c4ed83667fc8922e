// Package s3 is a fencing guard for S3-compatible object storage (AWS SDK
// for Go v2), built on S3's conditional writes.
package s3
