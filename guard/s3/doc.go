// Package s3 is the fencing guard of S3 and S3-compatible object storage
// (AWS SDK for Go v2): NewGuard returns an object.Guard (package
// guard/object: the rule, per object and by manifest, and its conformance
// check) over a Store of one bucket, built on S3's conditional writes:
// If-None-Match: * (create only if absent) and If-Match: <ETag> (write only
// if unchanged) on PutObject, and If-Match on DeleteObject. A failed
// condition is 412 Precondition Failed, or 409 ConditionalRequestConflict
// for a racing write; both are refusals, read again and retried. Each
// object carries its fence as user metadata (x-amz-meta-fence). The Store
// sends its conditional writes once (the SDK's retries are off for them);
// a 5xx or no answer leaves a write's outcome unknown.
//
// ParseLocation reads the locations of the command line,
// s3://BUCKET[/PREFIX][?endpoint=URL][&region=REGION], which fence
// guard-check and fence chaos --guard take.
//
// # Making unfenced writes impossible
//
// A writer that goes around the guard (a plain PutObject of a fenced
// object) is not fenced. On AWS S3 a bucket policy can refuse every write
// without a condition, with the condition keys s3:if-match and
// s3:if-none-match:
//
//	{
//	  "Version": "2012-10-17",
//	  "Statement": [{
//	    "Sid": "RequireConditionalWrites",
//	    "Effect": "Deny",
//	    "Principal": "*",
//	    "Action": "s3:PutObject",
//	    "Resource": "arn:aws:s3:::BUCKET/PREFIX*",
//	    "Condition": {"Null": {"s3:if-match": "true", "s3:if-none-match": "true"}}
//	  }]
//	}
//
// A condition alone does not fence (a writer may send If-Match of an ETag
// it just read): it keeps out the writers that skip the protocol by
// mistake. The guard's own best-effort deletes of replaced data objects are
// unconditional; deny s3:DeleteObject without s3:if-match only outside
// Prefix + "data/", or their data objects stay behind (they cost storage,
// never correctness). This policy was not tested here: the test server
// does not evaluate bucket policies.
//
// # Tested against
//
// SeaweedFS (github.com/seaweedfs/seaweedfs at the version that
// internal/tools/testserver pins, with atomic conditional writes), started
// by the tests on loopback: every conformance case passes, and a proxy
// that drops the conditional headers fails seven of nine (the negative
// control). SeaweedFS gives each bucket volumes of its own (the first write
// to a bucket takes seconds), and makes racing writers of one key wait for
// its lock in steps of a second; the tests share one bucket, under
// prefixes of their own.
package s3
