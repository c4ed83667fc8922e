package wire

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fence-lock/fence"
)

// Problem Codes of the v1 API that have no fence sentinel: they come from the
// router and the operational endpoints.
var (
	// ErrMethodNotAllowed is method_not_allowed: the route does not answer the method.
	ErrMethodNotAllowed = errors.New("fence: method not allowed")
	// ErrNotReady is not_ready: GET /readyz of a server that cannot serve.
	ErrNotReady = errors.New("fence: not ready")
	// ErrInternal is internal: anything the table has no entry for.
	ErrInternal = errors.New("fence: internal server error")
)

// Code is one problem code of the API: the error it stands for, its HTTP
// status and its title.
type Code struct {
	Err    error  // the fence error (or one of this package's) it stands for
	Code   string // the stable, machine-readable code, e.g. "fenced"
	Status int    // its HTTP status
	Title  string // the problem's title
}

// Codes is the one table that maps errors to problem Codes and statuses, and
// back, for the server and its clients. Its order is the API's precedence:
// when an error matches several entries, the first wins, and decoders that
// find several faults report the one whose entry comes first. Do not modify
// it.
var Codes = []Code{
	{fence.ErrUnauthorized, "unauthorized", http.StatusUnauthorized, "Unauthorized"},
	{fence.ErrForbidden, "forbidden", http.StatusForbidden, "Forbidden"},
	{fence.ErrTooLarge, "too_large", http.StatusRequestEntityTooLarge, "Request too large"},
	{fence.ErrBadRequest, "bad_request", http.StatusBadRequest, "Bad request"},
	{fence.ErrFenceRequired, "fence_required", http.StatusPreconditionRequired, "Fencing token required"},
	{fence.ErrInvalidToken, "invalid_token", http.StatusBadRequest, "Invalid fencing token"},
	{fence.ErrTokenNotIssued, "token_not_issued", http.StatusConflict, "Fencing token never issued"},
	{fence.ErrFenced, "fenced", http.StatusConflict, "Stale fencing token"},
	{fence.ErrPreconditionFailed, "precondition_failed", http.StatusPreconditionFailed, "Precondition failed"},
	{fence.ErrNotFound, "not_found", http.StatusNotFound, "Not found"},
	{fence.ErrInvalidSequencer, "invalid_sequencer", http.StatusForbidden, "Invalid sequencer"},
	{fence.ErrLockHeld, "lock_held", http.StatusConflict, "Lock held"},
	{fence.ErrLeaseLost, "lease_lost", http.StatusConflict, "Lease lost"},
	{fence.ErrRateLimited, "rate_limited", http.StatusTooManyRequests, "Too many requests"},
	{fence.ErrNotLeader, "not_leader", http.StatusServiceUnavailable, "Not the leader"},
	{fence.ErrClosed, "unavailable", http.StatusServiceUnavailable, "Service unavailable"},
	{ErrMethodNotAllowed, "method_not_allowed", http.StatusMethodNotAllowed, "Method not allowed"},
	{ErrNotReady, "not_ready", http.StatusServiceUnavailable, "Not ready"},
	{ErrInternal, "internal", http.StatusInternalServerError, "Internal server error"},
}

// internalIndex is the entry of Codes for errors that match no other entry.
var internalIndex = len(Codes) - 1

// ProblemTypeBase prefixes the code to form a problem's "type" member. The
// type is an identifier; clients decide on "code" and never fetch the URI.
const ProblemTypeBase = "urn:fence:problem:"

// ProblemContentType is the media type of error bodies (RFC 9457).
const ProblemContentType = "application/problem+json"

// InternalDetail is the only detail a client sees of an unknown error.
const InternalDetail = "internal server error; the cause is in the server's log"

// Rank returns the index in Codes of the entry that err matches, that of
// internal if none: it orders errors by the API's precedence, lower ranks
// winning.
func Rank(err error) int {
	for i, c := range Codes {
		if errors.Is(err, c.Err) {
			return i
		}
	}
	return internalIndex
}

// CodeOf returns the entry of Codes that err matches: internal if none.
func CodeOf(err error) Code { return Codes[Rank(err)] }

// Body is the wire form of a problem. Extension members are pointers
// so that each code carries exactly the members the API lists, zeros included.
type Body struct {
	Type      string  `json:"type"`
	Title     string  `json:"title"`
	Status    int     `json:"status"`
	Detail    string  `json:"detail"`
	Code      string  `json:"code"`
	Resource  *string `json:"resource,omitempty"`
	Presented *uint64 `json:"presented,omitempty"`
	LastFence *uint64 `json:"last_fence,omitempty"`
	LastToken *uint64 `json:"last_token,omitempty"`
	Current   *uint64 `json:"current,omitempty"`
	// RetryAfterMS is lock_held's and rate_limited's Retry-After in milliseconds (an extension
	// member, so that clients need not read the rounded header).
	RetryAfterMS *int64 `json:"retry_after_ms,omitempty"`
}

// NewBody builds the problem body for err. The detail of an unknown error
// is generic; the caller logs the cause.
func NewBody(err error) Body {
	c := CodeOf(err)
	p := Body{
		Type:   ProblemTypeBase + c.Code,
		Title:  c.Title,
		Status: c.Status,
		Detail: err.Error(),
		Code:   c.Code,
	}
	var (
		fe *fence.FencedError
		ne *fence.TokenNotIssuedError
		he *fence.LockHeldError
		le *fence.LeaseLostError
		re *RateLimitedError
	)
	switch {
	case c.Err == ErrInternal:
		p.Detail = InternalDetail
	case c.Err == fence.ErrFenced && errors.As(err, &fe):
		p.Detail = fe.Error()
		p.Resource, p.Presented, p.LastFence = ptr(fe.Resource), ptr(uint64(fe.Presented)), ptr(uint64(fe.LastFence))
	case c.Err == fence.ErrTokenNotIssued && errors.As(err, &ne):
		p.Detail = ne.Error()
		p.Resource, p.Presented, p.LastToken = ptr(ne.Resource), ptr(uint64(ne.Presented)), ptr(uint64(ne.LastToken))
	case c.Err == fence.ErrLockHeld && errors.As(err, &he):
		p.Detail = he.Error()
		ms := ceilDiv(he.RetryAfter, time.Millisecond)
		p.Resource, p.RetryAfterMS = ptr(he.Resource), &ms
	case c.Err == fence.ErrRateLimited && errors.As(err, &re):
		p.Detail = re.Error()
		ms := ceilDiv(re.RetryAfter, time.Millisecond)
		p.RetryAfterMS = &ms
	case c.Err == fence.ErrLeaseLost && errors.As(err, &le):
		p.Detail = le.Error()
		p.Resource, p.Presented, p.Current = ptr(le.Resource), ptr(uint64(le.Presented)), ptr(uint64(le.Current))
	}
	return p
}

// RateLimitedError is fence.ErrRateLimited with the time until the client
// may send again, answered as Retry-After and retry_after_ms.
type RateLimitedError struct {
	RetryAfter time.Duration
	// Reason, if set, says which limit the client is over; empty means
	// the request rate.
	Reason string
}

func (e *RateLimitedError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("%v: %s: retry in %s", fence.ErrRateLimited, e.Reason, e.RetryAfter)
	}
	return fmt.Sprintf("%v: retry in %s", fence.ErrRateLimited, e.RetryAfter)
}

// Is makes errors.Is(err, fence.ErrRateLimited) true.
func (e *RateLimitedError) Is(target error) bool { return target == fence.ErrRateLimited }

func ptr[T any](v T) *T { return &v }

// ceilDiv returns d/unit rounded up, 0 for d <= 0.
func ceilDiv(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	n := int64(d / unit)
	if d%unit != 0 {
		n++
	}
	return n
}

// RetryAfterHeader is the Retry-After header for a wait of d: whole
// seconds, rounded up, at least 1.
func RetryAfterHeader(d time.Duration) string {
	return strconv.FormatInt(max(1, ceilDiv(d, time.Second)), 10)
}

// Problem is an error answered by a fence server: an RFC 9457 problem with the
// v1 API's members. ProblemError builds it from a response; Err is the fence
// error the problem's code stands for, so errors.Is and errors.As see through
// a Problem to it.
type Problem struct {
	Type   string // the problem type URI
	Title  string // a short summary of the problem type
	Status int    // the HTTP status
	Detail string // what went wrong in this occurrence
	Code   string // the stable code, such as "fenced"; "" if the body was not a problem

	Resource  string      // the resource named by the problem, if any
	Presented fence.Token // the token the request carried (fenced, token_not_issued, lease_lost)
	LastFence fence.Token // fenced: the resource's last fence
	LastToken fence.Token // token_not_issued: the highest token issued
	Current   fence.Token // lease_lost: the current lease's token, 0 if none
	// RetryAfter is lock_held's time until the current lease expires, or
	// rate_limited's time until the client may send again.
	RetryAfter time.Duration

	// Err is the fence error of Code: a *fence.FencedError,
	// *fence.TokenNotIssuedError, *fence.LockHeldError or
	// *fence.LeaseLostError with the members above, or a sentinel such as
	// fence.ErrInvalidToken (fence.ErrClosed for "unavailable"). It is nil
	// for Codes that have no fence error, such as "internal".
	Err error
}

// Error returns the message of the typed fence error the problem stands for,
// so that it reads the same as in process, or else the server's detail.
func (p *Problem) Error() string {
	switch p.Err.(type) {
	case *fence.FencedError, *fence.TokenNotIssuedError, *fence.LockHeldError, *fence.LeaseLostError:
		return p.Err.Error()
	}
	if p.Err != nil {
		if p.Detail == "" || strings.Contains(p.Detail, p.Err.Error()) {
			return cmp.Or(p.Detail, p.Err.Error())
		}
		return p.Err.Error() + ": " + p.Detail
	}
	if p.Code == "" {
		return fmt.Sprintf("fence: HTTP %d: %s", p.Status, p.Detail)
	}
	return fmt.Sprintf("fence: HTTP %d %s: %s", p.Status, p.Code, p.Detail)
}

// Unwrap returns Err.
func (p *Problem) Unwrap() error { return p.Err }

// ProblemError rebuilds the error that a fence server answered with status and
// body. It returns a *Problem whose Err is the typed fence error of the
// problem's code (a *fence.FencedError for "fenced", ...), so that errors.Is
// and errors.As give the same answers as against the server's own Locker and
// Store. A body that is not a problem of this API (a proxy's error page, say)
// gives a *Problem with Code "" and the start of the body as Detail.
// ProblemError never returns nil; call it only for error statuses.
func ProblemError(status int, body []byte) error {
	var b Body
	if err := json.Unmarshal(body, &b); err != nil || b.Code == "" {
		return &Problem{Status: status, Title: http.StatusText(status), Detail: snippet(body)}
	}
	p := &Problem{
		Type:   b.Type,
		Title:  b.Title,
		Status: status,
		Detail: b.Detail,
		Code:   b.Code,
	}
	if b.Resource != nil {
		p.Resource = *b.Resource
	}
	p.Presented = token(b.Presented)
	p.LastFence = token(b.LastFence)
	p.LastToken = token(b.LastToken)
	p.Current = token(b.Current)
	if b.RetryAfterMS != nil && *b.RetryAfterMS > 0 {
		p.RetryAfter = time.Duration(min(*b.RetryAfterMS, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond
	}
	for _, c := range Codes {
		if c.Code != b.Code {
			continue
		}
		switch c.Err {
		case fence.ErrFenced:
			p.Err = &fence.FencedError{Resource: p.Resource, Presented: p.Presented, LastFence: p.LastFence}
		case fence.ErrTokenNotIssued:
			p.Err = &fence.TokenNotIssuedError{Resource: p.Resource, Presented: p.Presented, LastToken: p.LastToken}
		case fence.ErrLockHeld:
			p.Err = &fence.LockHeldError{Resource: p.Resource, RetryAfter: p.RetryAfter}
		case fence.ErrLeaseLost:
			p.Err = &fence.LeaseLostError{Resource: p.Resource, Presented: p.Presented, Current: p.Current}
		case ErrMethodNotAllowed, ErrNotReady, ErrInternal:
			// No fence error stands for these.
		default:
			p.Err = c.Err
		}
		break
	}
	return p
}

func token(v *uint64) fence.Token {
	if v == nil {
		return 0
	}
	return fence.Token(*v)
}

// snippet returns the start of a non-problem body, as valid UTF-8.
func snippet(body []byte) string {
	const n = 256
	s := string(body)
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(strings.TrimSpace(s), string(utf8.RuneError))
}
