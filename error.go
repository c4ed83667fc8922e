package fence

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors, one per error code of the HTTP API. Callers decide with
// errors.Is and read details of the typed errors below with errors.As.
var (
	// ErrFenced means a newer holder has fenced the resource; the caller must stop writing.
	ErrFenced = errors.New("fence: stale fencing token")
	// ErrTokenNotIssued means the token is greater than any the lock service has issued for the resource.
	ErrTokenNotIssued = errors.New("fence: fencing token was never issued")
	// ErrLockHeld means another holder kept the lock for the whole wait.
	ErrLockHeld = errors.New("fence: lock held by another holder")
	// ErrLeaseLost means the token is not the resource's current, unexpired lease.
	ErrLeaseLost = errors.New("fence: lease lost")
	// ErrFenceRequired means a mutating storage request carried no fencing token.
	ErrFenceRequired = errors.New("fence: fencing token required")
	// ErrInvalidToken means a token is not an integer in 1..MaxToken.
	ErrInvalidToken = errors.New("fence: invalid fencing token")
	// ErrPreconditionFailed means an If-Match, If-None-Match or txn compare did not hold.
	ErrPreconditionFailed = errors.New("fence: precondition failed")
	// ErrNotFound means the key does not exist.
	ErrNotFound = errors.New("fence: not found")
	// ErrBadRequest means a request is malformed: bad JSON, unknown fields, a name or TTL out of range.
	ErrBadRequest = errors.New("fence: bad request")
	// ErrTooLarge means a body or value is over its limit.
	ErrTooLarge = errors.New("fence: too large")
	// ErrClosed means the service or store has been closed.
	ErrClosed = errors.New("fence: closed")
)

// FencedError reports a write rejected because Presented < LastFence.
type FencedError struct {
	Resource  string
	Presented Token // the token the caller sent
	LastFence Token // the resource's fence when the write was rejected
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("fence: %q: token %d is stale (last fence %d)", e.Resource, e.Presented, e.LastFence)
}

// Is makes errors.Is(err, ErrFenced) true for every *FencedError.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// TokenNotIssuedError reports a token greater than LastToken, the highest the
// lock service has issued for the resource.
type TokenNotIssuedError struct {
	Resource  string
	Presented Token // the token the caller sent
	LastToken Token // the highest token issued for the resource
}

func (e *TokenNotIssuedError) Error() string {
	return fmt.Sprintf("fence: %q: token %d was never issued (last token %d)", e.Resource, e.Presented, e.LastToken)
}

// Is makes errors.Is(err, ErrTokenNotIssued) true for every *TokenNotIssuedError.
func (e *TokenNotIssuedError) Is(target error) bool { return target == ErrTokenNotIssued }

// LockHeldError reports an acquire that did not get the lock within its wait.
type LockHeldError struct {
	Resource   string
	RetryAfter time.Duration // until the current lease expires, if nobody renews it
}

func (e *LockHeldError) Error() string {
	return fmt.Sprintf("fence: %q: lock held by another holder (expires in %s)", e.Resource, e.RetryAfter)
}

// Is makes errors.Is(err, ErrLockHeld) true for every *LockHeldError.
func (e *LockHeldError) Is(target error) bool { return target == ErrLockHeld }

// LeaseLostError reports a renew or release whose token is not the resource's
// current lease.
type LeaseLostError struct {
	Resource  string
	Presented Token // the token the caller sent
	Current   Token // the current lease's token, 0 if the resource is not held
}

func (e *LeaseLostError) Error() string {
	return fmt.Sprintf("fence: %q: lease %d lost (current %d)", e.Resource, e.Presented, e.Current)
}

// Is makes errors.Is(err, ErrLeaseLost) true for every *LeaseLostError.
func (e *LeaseLostError) Is(target error) bool { return target == ErrLeaseLost }

// ErrUnauthorized means a request carried no valid bearer token.
var ErrUnauthorized = errors.New("fence: unauthorized")

// ErrForbidden means a request's token lacks the permission it needs.
var ErrForbidden = errors.New("fence: forbidden")

// ErrRateLimited means a client sent more requests than its rate allows; it
// may retry after the time the server's Retry-After says.
var ErrRateLimited = errors.New("fence: rate limited")

// ErrNotLeader means the server does not lead the cluster (it was replaced,
// or an election is in progress) and could not forward the request to the
// leader: nothing was applied, so any request may be retried, on another
// server if needed.
var ErrNotLeader = errors.New("fence: server is not the leader")
