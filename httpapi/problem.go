package httpapi

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

// Problem codes of the v1 API that have no fence sentinel: they come from the
// router and the operational endpoints.
var (
	errMethodNotAllowed = errors.New("httpapi: method not allowed")
	errNotReady         = errors.New("httpapi: not ready")
	errInternal         = errors.New("httpapi: internal server error")
)

// codes is the one table that maps errors to problem codes and statuses, and
// back. Its order is the API's precedence: when an error matches several
// entries, the first wins, and decoders that find several faults report the
// one whose entry comes first.
var codes = []struct {
	err    error
	code   string
	status int
	title  string
}{
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
	{errMethodNotAllowed, "method_not_allowed", http.StatusMethodNotAllowed, "Method not allowed"},
	{errNotReady, "not_ready", http.StatusServiceUnavailable, "Not ready"},
	{errInternal, "internal", http.StatusInternalServerError, "Internal server error"},
}

// internalIndex is the entry of codes for errors that match no other entry.
var internalIndex = len(codes) - 1

// problemTypeBase prefixes the code to form a problem's "type" member. The
// type is an identifier; clients decide on "code" and never fetch the URI.
const problemTypeBase = "urn:fence:problem:"

// contentTypeProblem is the media type of error bodies (RFC 9457).
const contentTypeProblem = "application/problem+json"

// internalDetail is the only detail a client sees of an unknown error.
const internalDetail = "internal server error; the cause is in the server's log"

// lookup returns the index in codes of the entry that err matches,
// internalIndex if none.
func lookup(err error) int {
	for i, c := range codes {
		if errors.Is(err, c.err) {
			return i
		}
	}
	return internalIndex
}

// rank orders errors by the API's precedence: lower ranks win.
func rank(err error) int { return lookup(err) }

// problemBody is the wire form of a problem. Extension members are pointers
// so that each code carries exactly the members the API lists, zeros included.
type problemBody struct {
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

// newProblem builds the problem for err. The detail of an unknown error is
// generic; the caller logs the cause.
func newProblem(err error) problemBody {
	c := codes[lookup(err)]
	p := problemBody{
		Type:   problemTypeBase + c.code,
		Title:  c.title,
		Status: c.status,
		Detail: err.Error(),
		Code:   c.code,
	}
	var (
		fe *fence.FencedError
		ne *fence.TokenNotIssuedError
		he *fence.LockHeldError
		le *fence.LeaseLostError
		re *rateLimitedError
	)
	switch {
	case c.err == errInternal:
		p.Detail = internalDetail
	case c.err == fence.ErrFenced && errors.As(err, &fe):
		p.Detail = fe.Error()
		p.Resource, p.Presented, p.LastFence = ptr(fe.Resource), ptr(uint64(fe.Presented)), ptr(uint64(fe.LastFence))
	case c.err == fence.ErrTokenNotIssued && errors.As(err, &ne):
		p.Detail = ne.Error()
		p.Resource, p.Presented, p.LastToken = ptr(ne.Resource), ptr(uint64(ne.Presented)), ptr(uint64(ne.LastToken))
	case c.err == fence.ErrLockHeld && errors.As(err, &he):
		p.Detail = he.Error()
		ms := ceilDiv(he.RetryAfter, time.Millisecond)
		p.Resource, p.RetryAfterMS = ptr(he.Resource), &ms
	case c.err == fence.ErrRateLimited && errors.As(err, &re):
		p.Detail = re.Error()
		ms := ceilDiv(re.retryAfter, time.Millisecond)
		p.RetryAfterMS = &ms
	case c.err == fence.ErrLeaseLost && errors.As(err, &le):
		p.Detail = le.Error()
		p.Resource, p.Presented, p.Current = ptr(le.Resource), ptr(uint64(le.Presented)), ptr(uint64(le.Current))
	}
	return p
}

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

// retryAfter is the Retry-After header for a lock held for d more: whole
// seconds, rounded up, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.FormatInt(max(1, ceilDiv(d, time.Second)), 10)
}

// writeProblem answers err as a problem. It adds Retry-After to lock_held and
// rate_limited, and Allow (from allow) to method_not_allowed.
func writeProblem(w http.ResponseWriter, err error, allow string) problemBody {
	p := newProblem(err)
	h := w.Header()
	h.Set("Content-Type", contentTypeProblem)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	var he *fence.LockHeldError
	if errors.As(err, &he) {
		h.Set("Retry-After", retryAfter(he.RetryAfter))
	}
	var re *rateLimitedError
	if errors.As(err, &re) {
		h.Set("Retry-After", retryAfter(re.retryAfter))
	}
	if p.Code == "unauthorized" {
		h.Set("WWW-Authenticate", `Bearer realm="fence"`)
	}
	if p.Code == "method_not_allowed" && allow != "" {
		h.Set("Allow", allow)
	}
	b, mErr := json.Marshal(p)
	if mErr != nil { // cannot happen: every member is a string or a number
		b = []byte(`{"type":"` + problemTypeBase + `internal","title":"Internal server error","status":500,"detail":"` + internalDetail + `","code":"internal"}`)
	}
	w.WriteHeader(p.Status)
	w.Write(append(b, '\n'))
	return p
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
	// for codes that have no fence error, such as "internal".
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
		return fmt.Sprintf("httpapi: HTTP %d: %s", p.Status, p.Detail)
	}
	return fmt.Sprintf("httpapi: HTTP %d %s: %s", p.Status, p.Code, p.Detail)
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
	var b problemBody
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
	for _, c := range codes {
		if c.code != b.Code {
			continue
		}
		switch c.err {
		case fence.ErrFenced:
			p.Err = &fence.FencedError{Resource: p.Resource, Presented: p.Presented, LastFence: p.LastFence}
		case fence.ErrTokenNotIssued:
			p.Err = &fence.TokenNotIssuedError{Resource: p.Resource, Presented: p.Presented, LastToken: p.LastToken}
		case fence.ErrLockHeld:
			p.Err = &fence.LockHeldError{Resource: p.Resource, RetryAfter: p.RetryAfter}
		case fence.ErrLeaseLost:
			p.Err = &fence.LeaseLostError{Resource: p.Resource, Presented: p.Presented, Current: p.Current}
		case errMethodNotAllowed, errNotReady, errInternal:
			// No fence error stands for these.
		default:
			p.Err = c.err
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
