package etcd

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/fence-lock/fence"
)

// tokenLen is the width of an encoded token: enough digits for any uint64,
// so that every token has the same width and byte order is numeric order.
const tokenLen = 20

// errBadFence means a fence key holds something other than a token written
// by encodeToken.
var errBadFence = errors.New("not a fencing token of 20 decimal digits")

// encodeToken returns t as 20 ASCII decimal digits, zero padded, so that
// etcd's byte-wise comparison of two encoded tokens is their numeric order.
func encodeToken(t fence.Token) string {
	var b [tokenLen]byte
	for i := range b {
		b[i] = '0'
	}
	s := strconv.AppendUint(nil, uint64(t), 10)
	copy(b[tokenLen-len(s):], s)
	return string(b[:])
}

// decodeToken parses a value written by encodeToken. It returns an error
// wrapping errBadFence unless v is 20 decimal digits holding a valid token.
func decodeToken(v []byte) (fence.Token, error) {
	if len(v) != tokenLen {
		return 0, fmt.Errorf("%w: %q", errBadFence, v)
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: %q", errBadFence, v)
		}
	}
	n, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil || !fence.Token(n).Valid() {
		return 0, fmt.Errorf("%w: %q is not in 1..%d", errBadFence, v, fence.MaxToken)
	}
	return fence.Token(n), nil
}
