package state

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
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

// Put stores value under resource/key if the token is accepted and c holds.
func Put(tx Tx, resource, key string, value []byte, token fence.Token, c fence.Cond) (fence.WriteResult, error) {
	return write(tx, resource, key, value, token, c, false, false)
}

// Delete removes resource/key if the token is accepted, c holds and the key exists.
func Delete(tx Tx, resource, key string, token fence.Token, c fence.Cond) (fence.WriteResult, error) {
	return write(tx, resource, key, nil, token, c, true, false)
}

// PutUnfenced stores value under resource/key if c holds, without fencing:
// the fence is neither checked nor raised (see fence.UnfencedStore).
func PutUnfenced(tx Tx, resource, key string, value []byte, c fence.Cond) (fence.WriteResult, error) {
	return write(tx, resource, key, value, 0, c, false, true)
}

// DeleteUnfenced removes resource/key if c holds and the key exists, without
// fencing.
func DeleteUnfenced(tx Tx, resource, key string, c fence.Cond) (fence.WriteResult, error) {
	return write(tx, resource, key, nil, 0, c, true, true)
}

func write(tx Tx, resource, key string, value []byte, token fence.Token, c fence.Cond, del, unfenced bool) (fence.WriteResult, error) {
	r, err := tx.Resource(resource)
	if err != nil {
		return fence.WriteResult{}, err
	}
	if !unfenced {
		if err := checkToken(resource, r, token); err != nil {
			return fence.WriteResult{}, err
		}
	}
	e, exists, err := tx.Entry(resource, key)
	if err != nil {
		return fence.WriteResult{}, err
	}
	if err := checkCond(c, e, exists); err != nil {
		return fence.WriteResult{}, err
	}
	if del && !exists {
		return fence.WriteResult{}, fmt.Errorf("%w: key %q", fence.ErrNotFound, key)
	}
	rev, err := nextRev(tx)
	if err != nil {
		return fence.WriteResult{}, err
	}
	if del {
		err = tx.DeleteEntry(resource, key)
	} else {
		err = tx.SetEntry(resource, key, Entry{Value: value, Rev: rev, Token: token})
	}
	if err != nil {
		return fence.WriteResult{}, err
	}
	if err := tx.SetRev(rev); err != nil {
		return fence.WriteResult{}, err
	}
	if unfenced {
		// The fence is neither checked nor raised.
		return fence.WriteResult{Rev: rev, LastFence: r.LastFence}, nil
	}
	r.LastFence = token
	if err := tx.SetResource(resource, r); err != nil {
		return fence.WriteResult{}, err
	}
	return fence.WriteResult{Rev: rev, LastFence: token, Holder: holderOf(r, token)}, nil
}

// Claim raises the resource's fence to token without writing a key.
func Claim(tx Tx, resource string, token fence.Token) (fence.WriteResult, error) {
	r, err := tx.Resource(resource)
	if err != nil {
		return fence.WriteResult{}, err
	}
	if err := checkToken(resource, r, token); err != nil {
		return fence.WriteResult{}, err
	}
	rev, err := tx.Rev()
	if err != nil {
		return fence.WriteResult{}, err
	}
	if r.LastFence != token {
		r.LastFence = token
		if err := tx.SetResource(resource, r); err != nil {
			return fence.WriteResult{}, err
		}
	}
	return fence.WriteResult{Rev: rev, LastFence: token, Holder: holderOf(r, token)}, nil
}

// ValidateTxn checks the shape of t, before any state is read, in the API's
// order of precedence: too_large, bad_request (names, op kinds),
// fence_required (an op's resource without a fences entry), invalid_token.
// Where several entries fail the same way, the first op, or the first
// resource in byte order, is named.
func ValidateTxn(t *fence.Txn) error {
	for _, part := range []struct {
		what string
		n    int
	}{{"fences", len(t.Fences)}, {"if", len(t.If)}, {"then", len(t.Then)}} {
		if part.n > fence.MaxTxnEntries {
			return fmt.Errorf("txn %s: %w: %d entries, more than %d", part.what, fence.ErrTooLarge, part.n, fence.MaxTxnEntries)
		}
	}
	for i, op := range t.Then {
		if len(op.Value) > fence.MaxValueSize {
			return fmt.Errorf("txn then[%d]: %w: value is %d bytes, more than %d", i, fence.ErrTooLarge, len(op.Value), fence.MaxValueSize)
		}
	}
	names := slices.Sorted(maps.Keys(t.Fences))
	for _, name := range names {
		if err := fence.ValidateResource(name); err != nil {
			return fmt.Errorf("txn fences: %w", err)
		}
	}
	for i, c := range t.If {
		if err := validateName(c.Resource, c.Key); err != nil {
			return fmt.Errorf("txn if[%d]: %w", i, err)
		}
	}
	for i, op := range t.Then {
		if err := validateName(op.Resource, op.Key); err != nil {
			return fmt.Errorf("txn then[%d]: %w", i, err)
		}
		if op.Kind != fence.OpPut && op.Kind != fence.OpDelete {
			return fmt.Errorf("txn then[%d]: %w: unknown op %q", i, fence.ErrBadRequest, op.Kind)
		}
	}
	for i, op := range t.Then {
		if _, ok := t.Fences[op.Resource]; !ok {
			return fmt.Errorf("txn then[%d]: %w: resource %q has no entry in fences", i, fence.ErrFenceRequired, op.Resource)
		}
	}
	for _, name := range names {
		if token := t.Fences[name]; !token.Valid() {
			return fmt.Errorf("txn fences: %w: %q: %d", fence.ErrInvalidToken, name, token)
		}
	}
	return nil
}

func validateName(resource, key string) error {
	if err := fence.ValidateResource(resource); err != nil {
		return err
	}
	return fence.ValidateKey(key)
}

// Txn applies t all or nothing. Errors name the first failing resource in byte
// order, and follow the API's precedence: token_not_issued, fenced, precondition_failed.
func Txn(tx Tx, t *fence.Txn) (fence.Rev, error) {
	if err := ValidateTxn(t); err != nil {
		return 0, err
	}
	names := make([]string, 0, len(t.Fences))
	for name := range t.Fences {
		names = append(names, name)
	}
	slices.Sort(names)
	states := make([]Resource, len(names))
	for i, name := range names {
		r, err := tx.Resource(name)
		if err != nil {
			return 0, err
		}
		states[i] = r
	}
	for i, name := range names {
		if token := t.Fences[name]; token > states[i].LastToken {
			return 0, &fence.TokenNotIssuedError{Resource: name, Presented: token, LastToken: states[i].LastToken}
		}
	}
	for i, name := range names {
		if token := t.Fences[name]; token < states[i].LastFence {
			return 0, &fence.FencedError{Resource: name, Presented: token, LastFence: states[i].LastFence}
		}
	}
	for i, c := range t.If {
		e, exists, err := tx.Entry(c.Resource, c.Key)
		if err != nil {
			return 0, err
		}
		if c.Rev == 0 && exists || c.Rev != 0 && (!exists || e.Rev != c.Rev) {
			return 0, fmt.Errorf("%w: if[%d]: %q/%q is at revision %d, not %d",
				fence.ErrPreconditionFailed, i, c.Resource, c.Key, e.Rev, c.Rev)
		}
	}
	rev, err := tx.Rev()
	if err != nil {
		return 0, err
	}
	if len(t.Then) > 0 {
		rev++
		for _, op := range t.Then {
			if op.Kind == fence.OpPut {
				err = tx.SetEntry(op.Resource, op.Key, Entry{Value: op.Value, Rev: rev, Token: t.Fences[op.Resource]})
			} else {
				err = tx.DeleteEntry(op.Resource, op.Key)
			}
			if err != nil {
				return 0, err
			}
		}
		if err := tx.SetRev(rev); err != nil {
			return 0, err
		}
	}
	for i, name := range names {
		if token := t.Fences[name]; token != states[i].LastFence {
			states[i].LastFence = token
			if err := tx.SetResource(name, states[i]); err != nil {
				return 0, err
			}
		}
	}
	return rev, nil
}

// Grant records a new lease for holder, owned by owner, with the resource's
// next token and raises its fence to that token, so that every holder of an
// older token is fenced at once.
func Grant(tx Tx, resource, holder, owner string, ttl time.Duration, expires time.Time) (fence.Token, error) {
	r, err := tx.Resource(resource)
	if err != nil {
		return 0, err
	}
	if err := checkNextToken(resource, r); err != nil {
		return 0, err
	}
	token := r.LastToken + 1
	r.LastToken, r.LastFence = token, max(r.LastFence, token)
	r.LeaseToken, r.Holder, r.Owner, r.TTL, r.Expires = token, holder, owner, ttl, expires.UnixNano()
	r.Delay = 0
	if err := tx.SetResource(resource, r); err != nil {
		return 0, err
	}
	return token, nil
}

// Refresh records a new TTL and expiry for the lease with token.
func Refresh(tx Tx, resource string, token fence.Token, ttl time.Duration, expires time.Time) (fence.Token, error) {
	r, err := tx.Resource(resource)
	if err != nil {
		return 0, err
	}
	if !r.leased(token) {
		return 0, &fence.LeaseLostError{Resource: resource, Presented: token, Current: r.LeaseToken}
	}
	r.TTL, r.Expires = ttl, expires.UnixNano()
	return r.LastFence, tx.SetResource(resource, r)
}

// End records that the lease with token is over; it changes nothing if token is
// not the recorded lease.
func End(tx Tx, resource string, token fence.Token) (fence.Token, error) {
	r, err := tx.Resource(resource)
	if err != nil {
		return 0, err
	}
	if !r.leased(token) {
		return r.LastFence, nil
	}
	r.LeaseToken, r.Holder, r.Owner, r.TTL, r.Expires = 0, "", "", 0, 0
	return r.LastFence, tx.SetResource(resource, r)
}

// Handoff ends the lease with token and grants the resource to holder, owned
// by owner, with the next token, raising the fence to it: End and then Grant
// in one transaction. It checks for both before it changes anything: a
// token that is not the recorded lease gets *fence.LeaseLostError, a
// resource with no token left ErrTokensExhausted, and either way the old
// lease stays recorded. It returns the new token and the resource's last
// fence.
func Handoff(tx Tx, resource string, token fence.Token, holder, owner string, ttl time.Duration, expires time.Time) (next, lastFence fence.Token, err error) {
	r, err := tx.Resource(resource)
	if err != nil {
		return 0, 0, err
	}
	if !r.leased(token) {
		return 0, 0, &fence.LeaseLostError{Resource: resource, Presented: token, Current: r.LeaseToken}
	}
	if err := checkNextToken(resource, r); err != nil {
		return 0, 0, err
	}
	// Neither End nor Grant can refuse now: any error is the engine's, and
	// rolls the transaction back.
	if _, err := End(tx, resource, token); err != nil {
		return 0, 0, err
	}
	if next, err = Grant(tx, resource, holder, owner, ttl, expires); err != nil {
		return 0, 0, err
	}
	if r, err = tx.Resource(resource); err != nil {
		return 0, 0, err
	}
	return next, r.LastFence, nil
}

// Revoke ends the recorded lease, if any, and issues the resource's next token
// straight into its fence, without a lease: every holder of an older token is
// fenced, and the next grant gets a greater token still. It returns the new
// last fence and the token of the lease it ended (0 if none was recorded).
func Revoke(tx Tx, resource string) (lastFence, revoked fence.Token, err error) {
	r, err := tx.Resource(resource)
	if err != nil {
		return 0, 0, err
	}
	if err := checkNextToken(resource, r); err != nil {
		return 0, 0, err
	}
	revoked = r.LeaseToken
	token := r.LastToken + 1
	r.LastToken, r.LastFence = token, max(r.LastFence, token)
	r.LeaseToken, r.Holder, r.Owner, r.TTL, r.Expires, r.Delay = 0, "", "", 0, 0, 0
	if err := tx.SetResource(resource, r); err != nil {
		return 0, 0, err
	}
	return r.LastFence, revoked, nil
}

// SetDelay records that a lock-delay of d is in progress on the resource
// (d > 0), or that none is (d == 0). It changes nothing while a lease is
// recorded: a grant ends any delay.
func SetDelay(tx Tx, resource string, d time.Duration) error {
	r, err := tx.Resource(resource)
	if err != nil {
		return err
	}
	if r.LeaseToken != 0 || r.Delay == d {
		return nil
	}
	r.Delay = d
	return tx.SetResource(resource, r)
}

// leased reports whether token is the lease recorded in r.
func (r Resource) leased(token fence.Token) bool {
	return r.LeaseToken != 0 && r.LeaseToken == token
}

// checkNextToken returns ErrTokensExhausted if the resource cannot issue another token.
func checkNextToken(name string, r Resource) error {
	if r.LastToken >= fence.MaxToken {
		return fmt.Errorf("%w: %q", ErrTokensExhausted, name)
	}
	return nil
}

// Lease returns the lease recorded in r, if any.
func (r Resource) Lease(name string) (fence.Lease, bool) {
	if r.LeaseToken == 0 {
		return fence.Lease{}, false
	}
	return fence.Lease{Resource: name, Holder: r.Holder, Owner: r.Owner, Token: r.LeaseToken, TTL: r.TTL,
		Expires: time.Unix(0, r.Expires)}, true
}
