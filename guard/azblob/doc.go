// Package azblob is the fencing guard of Azure Blob Storage (Azure SDK for
// Go): NewGuard returns an object.Guard (package guard/object: the rule,
// per object and by manifest, and its conformance check) over a Store of
// one container, built on Blob Storage's conditional writes: Put Blob and
// Delete Blob with If-Match: <ETag> (write only if unchanged) and Put Blob
// with If-None-Match: * (create only if absent). A failed condition is 412
// (ConditionNotMet) or 409 (BlobAlreadyExists); both are refusals, read
// again and retried. Each object is a block blob that carries its fence as
// metadata (x-ms-meta-fence). The Store sends its conditional writes once
// (the SDK's retries are off for them); a 5xx or no answer leaves a write's
// outcome unknown.
//
// A writer that goes around the guard is not fenced; Blob Storage has no
// policy that requires a condition on writes, so give such writers no write
// access to the container (a SAS or role assignment for the guard's
// writers only).
//
// # Tested against
//
// Azurite (Microsoft's local Azure Storage server, the npm package azurite
// at the version internal/tools/testserver pins), started by the tests on
// loopback: every conformance case passes, and the object guards' suite
// (fencetest.TestObjectGuard) runs on it. Azure Storage itself was not
// tested here.
package azblob
