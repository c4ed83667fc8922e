// Package object is the fencing rule over object stores with conditional
// writes, whatever the store: S3 and S3-compatible servers (guard/s3),
// Azure Blob Storage (guard/azblob); see below for Google Cloud Storage. A
// store is a Store: read an object with its version (an ETag, a
// generation), write one only if its version is still the one read, or
// only if it is absent, in one atomic step of the store. On that one
// primitive the Guard enforces fence's tokens inside the user's own bucket,
// so that fencing protects data that never passes through fence's storage.
// It issues no tokens (the lock service does) and checks only token >= the
// fence stored.
//
// # Per object
//
// PutObject, DeleteObject and GetObject fence one object at a time: the
// object is the resource, and carries its fence in its user metadata
// (FenceMetadata). A write reads the object's version and fence, refuses a
// token lower than the fence with *fence.FencedError, and writes on
// condition that the version is still the one read (only if absent when
// there was no object), with the new fence in its metadata. If another
// writer changed the object in between, the store refuses the write
// (ErrConditionFailed), and the guard reads again, checks again and
// retries, up to MaxAttempts; then it returns ErrContended, nothing
// written. So the check and the write are one atomic step of the store:
// there is no instant in which a stale write can slip in. A delete is a
// tombstone, an empty object that keeps the fence (TombstoneMetadata): the
// store's own delete would take the fence with the object, and a stale
// holder's create-if-absent would then create it again. Cost: two round
// trips per write (a read of the metadata, the write), more on a lost race.
//
// # Many objects under one resource
//
// Write, Claim, Read, List and Fence keep many keys under one resource, in
// SlateDB's pattern: each value goes to a new immutable data object
// (Prefix + "data/<resource>/<key>/<token>-<random>", written only if
// absent), and one conditional write of the resource's manifest (Prefix +
// "manifests/<resource>", JSON: the fence, the revision, and the data
// object of each key), on the version it read (only if absent for the
// first), commits them, with the fence raised to the token. The fence is
// checked against the manifest that the write replaces, in the same
// compare-and-swap: a writer that committed in between makes the store
// refuse it, and the guard reads the manifest again, checks the fence
// again, and retries, up to MaxAttempts; then ErrContended. All of a Write
// is committed or none, and readers see all of it or none. Each commit has
// the resource's next revision, which Read gives with a value. Data objects
// not committed (a stale token, a lost race) and those a commit replaced
// are deleted, best effort; a reader that finds a replaced value gone reads
// the new manifest. Cost: a read of the manifest, a write per value and a
// write of the manifest, and a delete per value replaced. The guard never
// writes a separate fence object and then the data unconditionally: that
// is a check-then-write race.
//
// # Lost answers
//
// A Store sends each conditional write once: a write resent after a lost
// answer, whose first copy had landed, would be refused by the version its
// own first copy made, and the guard would read again and apply it a
// second time, over whatever another writer committed in between. So a
// write whose answer was lost (ErrNoAnswer: a deadline, a reset
// connection, a server error) returns the error, and may or may not have
// been applied, as with any store. Only a definite refusal
// (ErrConditionFailed) is read again and retried.
//
// # The store must be checked
//
// Fencing stands on the store honouring the conditions. A store that
// ignores them (an older S3-compatible server, a proxy that drops headers)
// would accept every stale write. Before its first write a Guard runs Check
// on the store, with scratch objects under Prefix + ".fence-check/": user
// metadata kept; a create refused on an existing key; of CheckRacers
// racing creates, and of as many racing conditional writes, exactly one
// succeeds; a conditional write never creates a missing object; a stale
// version is refused (writes and deletes); the current version is taken in
// every form the store may be given it, a stale one in none; a
// conditional delete with the current version deletes. A store that fails
// a case gets an error wrapping ErrEndpoint, naming the case, for every
// write. TrustEndpoint skips the check.
//
// # Google Cloud Storage
//
// GCS has the same primitive, with generations for versions: a write with
// ifGenerationMatch=<generation> (or 0: only if absent), a 412 when the
// precondition fails, custom metadata for the fence; a Store of it is
// Head/Get/Put/Delete of the JSON API with those preconditions (its XML
// API's S3 interoperability takes x-goog-if-generation-match, not If-Match,
// on uploads, so guard/s3 cannot be pointed at it). No GCS store is
// shipped: it could not be tested here. GCS itself is not reachable from
// the machines fence is built on, and its emulator, fake-gcs-server
// (v1.56.1), takes ifGenerationMatch on uploads, atomically, but ignores
// it on objects.delete, so it would fail the conformance check's
// delete-stale case, as a store that cannot refuse a stale delete must.
//
// It does not log: it returns errors, and counts and logs refusals in
// Rejections if set.
package object
