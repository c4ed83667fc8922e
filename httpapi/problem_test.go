package httpapi

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/wire"
)

// sentinels are the fence errors that have a problem code.
var sentinels = []error{
	fence.ErrTooLarge, fence.ErrBadRequest, fence.ErrFenceRequired, fence.ErrInvalidToken,
	fence.ErrTokenNotIssued, fence.ErrFenced, fence.ErrPreconditionFailed, fence.ErrNotFound,
	fence.ErrLockHeld, fence.ErrLeaseLost, fence.ErrClosed, fence.ErrUnauthorized, fence.ErrForbidden,
	fence.ErrRateLimited, fence.ErrNotLeader,
}

// TestProblemError_RoundTrip checks that a server error, written as a problem
// and read back with ProblemError, gives the same answers to errors.Is and
// errors.As as the error itself.
func TestProblemError_RoundTrip(t *testing.T) {
	tests := []error{
		&fence.FencedError{Resource: "orders/17", Presented: 41, LastFence: 42},
		fmt.Errorf("bolt: put %q/%q: %w", "orders", "o-1", &fence.FencedError{Resource: "orders", Presented: 1, LastFence: fence.MaxToken}),
		&fence.TokenNotIssuedError{Resource: "orders", Presented: fence.MaxToken, LastToken: 7},
		&fence.TokenNotIssuedError{Resource: "fresh", Presented: 1, LastToken: 0},
		&fence.LockHeldError{Resource: "été", RetryAfter: 2500 * time.Millisecond},
		&fence.LockHeldError{Resource: "r", RetryAfter: 0},
		&fence.LeaseLostError{Resource: "r", Presented: 3, Current: 0},
		&fence.LeaseLostError{Resource: "r", Presented: 3, Current: 4},
		fence.ErrFenceRequired,
		fmt.Errorf("state: deposed: %w", fence.ErrNotLeader),
		fmt.Errorf("%w: %q", fence.ErrInvalidToken, "abc"),
		fence.ErrPreconditionFailed,
		fmt.Errorf("bolt: get: %w", fence.ErrNotFound),
		fmt.Errorf("%w: holder is empty", fence.ErrBadRequest),
		fence.ErrTooLarge,
		fence.ErrClosed,
	}
	for _, want := range tests {
		t.Run(want.Error(), func(t *testing.T) {
			rec := httptest.NewRecorder()
			writeProblem(rec, want, "")
			got := wire.ProblemError(rec.Code, rec.Body.Bytes())

			for _, s := range sentinels {
				if errors.Is(got, s) != errors.Is(want, s) {
					t.Errorf("errors.Is(got, %v)=%v, want %v", s, errors.Is(got, s), errors.Is(want, s))
				}
			}
			checkAs[*fence.FencedError](t, got, want)
			checkAs[*fence.TokenNotIssuedError](t, got, want)
			checkAs[*fence.LockHeldError](t, got, want)
			checkAs[*fence.LeaseLostError](t, got, want)

			var p *wire.Problem
			if !errors.As(got, &p) {
				t.Fatalf("%T is not a *wire.Problem", got)
			}
			if p.Status != rec.Code || p.Code != wire.Codes[wire.Rank(want)].Code || p.Type != wire.ProblemTypeBase+p.Code {
				t.Fatalf("Problem %+v, want status %d and code %s", p, rec.Code, wire.Codes[wire.Rank(want)].Code)
			}
			if !strings.Contains(got.Error(), errors.Unwrap(got).Error()) {
				t.Fatalf("Error()=%q does not say %q", got.Error(), errors.Unwrap(got))
			}
		})
	}
}

// checkAs checks that errors.As finds a T in got iff it does in want, with
// the same value.
func checkAs[T interface {
	comparable
	error
}](t *testing.T, got, want error) {
	t.Helper()
	var g, w T
	okG, okW := errors.As(got, &g), errors.As(want, &w)
	if okG != okW {
		t.Fatalf("errors.As(%T)=%v, want %v", w, okG, okW)
	}
	if okG && fmt.Sprintf("%+v", *deref(g)) != fmt.Sprintf("%+v", *deref(w)) {
		t.Fatalf("errors.As gives %+v, want %+v", g, w)
	}
	if okG && got.Error() != w.Error() {
		t.Fatalf("Error()=%q, want %q", got.Error(), w.Error())
	}
}

func deref[T any](v T) *T { return &v }

func TestProblemError_RetryAfterRoundsUp(t *testing.T) {
	rec := httptest.NewRecorder()
	writeProblem(rec, &fence.LockHeldError{Resource: "r", RetryAfter: 1500*time.Microsecond + 1}, "")
	var he *fence.LockHeldError
	if err := wire.ProblemError(rec.Code, rec.Body.Bytes()); !errors.As(err, &he) || he.RetryAfter != 2*time.Millisecond {
		t.Fatalf("got %v, want RetryAfter 2ms", err)
	}
	if got := rec.Header().Get("Retry-After"); got != "1" {
		t.Fatalf("Retry-After=%q, want 1", got)
	}
}

func TestProblemError_NotAProblem(t *testing.T) {
	for _, tt := range []struct {
		status int
		body   string
	}{
		{502, "<html><body>Bad Gateway</body></html>"},
		{500, ""},
		{400, "Bad Request"},
		{404, `{"message":"nope"}`},
		{503, "\xff\xfe" + strings.Repeat("x", 1000)},
	} {
		err := wire.ProblemError(tt.status, []byte(tt.body))
		var p *wire.Problem
		if !errors.As(err, &p) || p.Status != tt.status || p.Code != "" || p.Err != nil {
			t.Fatalf("wire.ProblemError(%d, %q) = %#v", tt.status, tt.body, err)
		}
		for _, s := range sentinels {
			if errors.Is(err, s) {
				t.Fatalf("wire.ProblemError(%d, %q) is %v", tt.status, tt.body, s)
			}
		}
		if len(p.Detail) > 300 || !strings.Contains(err.Error(), fmt.Sprint(tt.status)) {
			t.Fatalf("Error()=%q", err.Error())
		}
	}
}

func TestProblemError_UnknownCode(t *testing.T) {
	err := wire.ProblemError(418, []byte(`{"type":"x","title":"Teapot","status":418,"detail":"short and stout","code":"teapot"}`))
	var p *wire.Problem
	if !errors.As(err, &p) || p.Err != nil || p.Code != "teapot" || err.Error() != "fence: HTTP 418 teapot: short and stout" {
		t.Fatalf("got %#v (%v)", err, err)
	}
	for _, code := range []string{"method_not_allowed", "not_ready", "internal"} {
		err := wire.ProblemError(500, []byte(`{"code":"`+code+`","detail":"d"}`))
		for _, s := range sentinels {
			if errors.Is(err, s) {
				t.Fatalf("%s is %v", code, s)
			}
		}
	}
}

// TestCodes checks the table: one entry per code, in the API's precedence.
func TestCodes(t *testing.T) {
	order := []string{"unauthorized", "forbidden", "too_large", "bad_request", "fence_required", "invalid_token", "token_not_issued", "fenced", "precondition_failed", "not_found"}
	seen := map[string]bool{}
	for i, c := range wire.Codes {
		if seen[c.Code] {
			t.Fatalf("code %s twice", c.Code)
		}
		seen[c.Code] = true
		if i < len(order) && c.Code != order[i] {
			t.Fatalf("codes[%d]=%s, want %s", i, c.Code, order[i])
		}
	}
	for _, s := range sentinels {
		if wire.Codes[wire.Rank(s)].Err != s {
			t.Fatalf("%v has no entry", s)
		}
	}
	if wire.Codes[wire.Rank(errors.New("x"))].Code != "internal" {
		t.Fatal("an unknown error is not internal")
	}
}
