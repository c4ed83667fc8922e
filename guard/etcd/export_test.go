package etcd

// Internals exported to the tests in package etcd_test.
var (
	EncodeToken = encodeToken
	DecodeToken = decodeToken
	Overlaps    = overlaps
)
