// Package s3 is a fencing guard for S3 and S3-compatible object storage
// (AWS SDK for Go v2), built on S3's conditional writes: If-None-Match: *
// (create only if absent) and If-Match: <ETag> (write only if unchanged)
// on PutObject, and If-Match on DeleteObject. It enforces fence's tokens
// inside the user's own bucket, so that fencing protects data that never
// passes through fence's storage. It issues no tokens (the lock service
// does) and checks only token >= the fence stored.
//
// # Per object
//
// PutObject, DeleteObject and GetObject fence one object at a time: the
// object is the resource, and carries its fence in its user metadata
// (x-amz-meta-fence, FenceMetadata). A write reads the object's ETag and
// fence with a HEAD, refuses a token lower than the fence with
// *fence.FencedError, and sends the PutObject with If-Match of that ETag
// (If-None-Match: * when the object is absent) and the new fence in its
// metadata. If another writer changed the object in between, the endpoint
// refuses the write (412 Precondition Failed, or 409
// ConditionalRequestConflict for a racing write), and the guard reads
// again, checks again and retries, up to MaxAttempts; then it returns
// ErrContended, nothing written. So the check and the write are one atomic
// step of the endpoint: there is no instant in which a stale write can slip
// in. A delete is a tombstone, an empty object that keeps the fence
// (x-amz-meta-fence-deleted: true): S3's own DeleteObject would take the
// fence with the object, and a stale holder's If-None-Match: * would then
// create it again. Cost: two round trips per write (HEAD, PutObject), more
// on a lost race.
//
// # Many objects under one resource
//
// Write, Claim, Read, List and Fence keep many keys under one resource, in
// SlateDB's pattern: each value goes to a new immutable data object
// (Prefix + "data/<resource>/<key>/<token>-<random>", written with
// If-None-Match: *), and one conditional write of the resource's manifest
// (Prefix + "manifests/<resource>", JSON: the fence, and the data object of
// each key), with If-Match of the ETag it read (If-None-Match: * for the
// first), commits them, with the fence raised to the token. The fence is
// checked against the manifest that the write replaces, in the same
// compare-and-swap: a writer that committed in between makes the endpoint
// refuse it, and the guard reads the manifest again, checks the fence
// again, and retries, up to MaxAttempts; then ErrContended. All of a Write
// is committed or none, and readers see all of it or none. Data objects not
// committed (a stale token, a lost race) and those a commit replaced are
// deleted, best effort; a reader that finds a replaced value gone reads the
// new manifest. Cost: one GET of
// the manifest, one PUT per value and one PUT of the manifest, and a
// DELETE per value replaced. The guard never writes a separate fence object
// and then the data unconditionally: that is a check-then-write race.
//
// # Lost answers
//
// The guard sends each conditional write once (the SDK's retries are off
// for them): a write resent after a lost answer, whose first copy had
// landed, would be refused by the ETag its own first copy changed, and the
// guard would read again and apply it a second time, over whatever another
// writer committed in between. So a write whose answer was lost (a
// deadline, a reset connection, a 5xx) returns the error, and may or may
// not have been applied, as with any store. Only a definite refusal (412,
// 409) is read again and retried.
//
// # The endpoint must be checked
//
// Fencing stands on the endpoint honouring the conditions. An endpoint that
// ignores them (an older S3-compatible server, a proxy that drops headers)
// would accept every stale write. Before its first write a Guard runs Check
// on the endpoint, with scratch objects under Prefix + ".fence-check/":
// user metadata kept; If-None-Match: * refused on an existing key; of
// CheckRacers racing creates, and of as many racing If-Match writes,
// exactly one succeeds; If-Match never creates a missing key; a stale ETag
// is refused (PutObject and DeleteObject); the current ETag is taken quoted
// and unquoted, a stale one in neither form; a conditional delete with the
// current ETag deletes. An endpoint that fails a case gets an error
// wrapping ErrEndpoint, naming the case, for every write. fence
// guard-check s3://BUCKET/PREFIX?endpoint=URL runs the same check from the
// command line. TrustEndpoint skips it.
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
// # Other object stores
//
// Google Cloud Storage fences the same way with its own preconditions:
// ifGenerationMatch=0 (create only if absent) for If-None-Match: *,
// ifGenerationMatch=<generation> for If-Match, custom metadata for the
// fence, 412 for a failed precondition; its XML API's S3 interoperability
// takes x-goog-if-generation-match, not If-Match on uploads, so this guard
// cannot be pointed at it as it is. Azure Blob Storage has If-Match and
// If-None-Match: * on Put Blob (412 ConditionNotMet), and x-ms-meta-fence
// metadata. Neither is implemented or tested here; the conformance check's
// cases are what an implementation for them must pass.
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
//
// It does not log: it returns errors, and counts and logs refusals in
// Rejections if set.
package s3
