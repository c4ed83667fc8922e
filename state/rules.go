package state

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/fence-lock/fence"
)

// Resource is the durable state of one resource.
type Resource struct {
	LastToken  fence.Token   // the highest token issued
	LastFence  fence.Token   // the highest token accepted by storage or raised by a grant
	LeaseToken fence.Token   // the current lease's token; 0 if none is recorded
	Holder     string        // the current lease's holder
	Owner      string        // the principal that took the current lease; "" for none, as in records from before owners
	TTL        time.Duration // the current lease's TTL
	Expires    int64         // the current lease's expiry, Unix nanoseconds (wall clock)
	// Delay is the length of the lock-delay in progress since the last lease
	// expired; 0 if none. A restore gives it its full length again.
	Delay time.Duration
	// Session and SessionToken name the session the current lease is in
	// (fence.SessionRef); "" and 0 for a lease of its own.
	Session      string
	SessionToken fence.Token
	// Members are the holders of the shared group that holds the resource
	// with token LeaseToken (Holder, Owner, TTL, Expires and Session are
	// then zero); nil while no group does.
	Members []SharedHolder
	// RevokeGrace is the grace of a revoke requested of the current lease
	// (or group): it is revoked that long after the request, or after a
	// restore. 0 if none was requested.
	RevokeGrace time.Duration
}

// Entry is a stored value.
type Entry struct {
	Value []byte
	Rev   fence.Rev
	Token fence.Token // the token of the write that stored it
}

// Tx is one atomic transaction of a backend. Reads see the transaction's own writes.
type Tx interface {
	// Resource returns the resource's state; the zero Resource if it has none.
	Resource(name string) (Resource, error)
	// SetResource stores the resource's state.
	SetResource(name string, r Resource) error
	// Entry returns the entry under resource/key and whether it exists.
	Entry(resource, key string) (Entry, bool, error)
	// SetEntry stores an entry.
	SetEntry(resource, key string, e Entry) error
	// DeleteEntry removes an entry; removing a missing entry is not an error.
	DeleteEntry(resource, key string) error
	// Rev returns the store-wide revision.
	Rev() (fence.Rev, error)
	// SetRev stores the store-wide revision.
	SetRev(rev fence.Rev) error
	// Resources calls fn for every resource with state, in any order,
	// until fn returns an error.
	Resources(fn func(name string, r Resource) error) error
}

// IsRejection reports whether err is an answer of the fence rules (a request
// refused without any change) rather than a failure of the backend.
func IsRejection(err error) bool {
	for _, target := range rejections {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

var rejections = []error{
	fence.ErrFenced, fence.ErrTokenNotIssued, fence.ErrLeaseLost, fence.ErrFenceRequired,
	fence.ErrInvalidToken, fence.ErrPreconditionFailed, fence.ErrNotFound, fence.ErrBadRequest,
	fence.ErrTooLarge, ErrTokensExhausted,
}

// ErrTokensExhausted means a resource has issued MaxToken and cannot be granted again.
var ErrTokensExhausted = errors.New("state: no fencing tokens left for resource")

// MaxRev is the highest store revision, 2^63-1, the highest that If-Match
// and a txn's compares can name.
const MaxRev fence.Rev = math.MaxInt64

// ErrRevisionsExhausted means the store revision reached MaxRev: no write
// can be given a new one.
var ErrRevisionsExhausted = errors.New("state: no store revisions left")

// checkToken applies the fenced-storage rule: LastFence <= token <= LastToken.
func checkToken(name string, r Resource, token fence.Token) error {
	if !token.Valid() {
		return fmt.Errorf("%w: %d", fence.ErrInvalidToken, token)
	}
	if token > r.LastToken {
		return &fence.TokenNotIssuedError{Resource: name, Presented: token, LastToken: r.LastToken}
	}
	if token < r.LastFence {
		return &fence.FencedError{Resource: name, Presented: token, LastFence: r.LastFence}
	}
	return nil
}

func checkCond(c fence.Cond, e Entry, exists bool) error {
	switch {
	case c.IfAbsent && exists:
		return fmt.Errorf("%w: key exists at revision %d", fence.ErrPreconditionFailed, e.Rev)
	case (c.IfExists || c.IfMatch != 0) && !exists:
		return fmt.Errorf("%w: key does not exist", fence.ErrPreconditionFailed)
	case c.IfMatch != 0 && e.Rev != c.IfMatch:
		return fmt.Errorf("%w: key is at revision %d, not %d", fence.ErrPreconditionFailed, e.Rev, c.IfMatch)
	}
	return nil
}

// holderOf returns the holder the token was granted to, if it is the recorded lease's.
func holderOf(r Resource, token fence.Token) string {
	if r.LeaseToken == token {
		return r.Holder
	}
	return ""
}

func nextRev(tx Tx) (fence.Rev, error) {
	rev, err := tx.Rev()
	if err != nil {
		return 0, err
	}
	if rev >= MaxRev {
		return 0, fmt.Errorf("%w: the store is at revision %d", ErrRevisionsExhausted, rev)
	}
	return rev + 1, nil
}
