package httpapi

import (
	"net/http"
	"testing"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/wire"
)

func TestFencingToken(t *testing.T) {
	for _, tok := range badTokens {
		if tok == "" {
			continue // fence_required, below
		}
		t.Run("Bad/"+tok, func(t *testing.T) {
			_, err := fencingToken(http.Header{wire.TokenHeader: {tok}})
			wantErr(t, err, fence.ErrInvalidToken)
		})
	}
	tests := []struct {
		name string
		h    http.Header
		want fence.Token
		err  error
	}{
		{"OK", http.Header{wire.TokenHeader: {"42"}}, 42, nil},
		{"Max", http.Header{wire.TokenHeader: {"9223372036854775807"}}, fence.MaxToken, nil},
		{"Absent", http.Header{}, 0, fence.ErrFenceRequired},
		{"Empty", http.Header{wire.TokenHeader: {""}}, 0, fence.ErrFenceRequired},
		{"Two", http.Header{wire.TokenHeader: {"1", "2"}}, 0, fence.ErrInvalidToken},
		{"TwoEmpty", http.Header{wire.TokenHeader: {"", ""}}, 0, fence.ErrInvalidToken},
		{"List", http.Header{wire.TokenHeader: {"1, 2"}}, 0, fence.ErrInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fencingToken(tt.h)
			wantErr(t, err, tt.err)
			if got != tt.want {
				t.Fatalf("Token=%d, want %d", got, tt.want)
			}
		})
	}
}

func TestCond(t *testing.T) {
	tests := []struct {
		name string
		h    http.Header
		want fence.Cond
		err  error
	}{
		{"None", http.Header{}, fence.Cond{}, nil},
		{"IfMatch", http.Header{"If-Match": {`"7"`}}, fence.Cond{IfMatch: 7}, nil},
		{"IfMatchMax", http.Header{"If-Match": {`"9223372036854775807"`}}, fence.Cond{IfMatch: 9223372036854775807}, nil},
		{"IfMatchStar", http.Header{"If-Match": {"*"}}, fence.Cond{IfExists: true}, nil},
		{"IfNoneMatchStar", http.Header{"If-None-Match": {"*"}}, fence.Cond{IfAbsent: true}, nil},

		{"Both", http.Header{"If-Match": {`"7"`}, "If-None-Match": {"*"}}, fence.Cond{}, fence.ErrBadRequest},
		{"TwoIfMatch", http.Header{"If-Match": {`"7"`, `"8"`}}, fence.Cond{}, fence.ErrBadRequest},
		{"TwoIfNoneMatch", http.Header{"If-None-Match": {"*", "*"}}, fence.Cond{}, fence.ErrBadRequest},
		{"IfNoneMatchTag", http.Header{"If-None-Match": {`"7"`}}, fence.Cond{}, fence.ErrBadRequest},
		{"IfNoneMatchEmpty", http.Header{"If-None-Match": {""}}, fence.Cond{}, fence.ErrBadRequest},
	}
	for _, v := range []string{"", "7", `"0"`, `"07"`, `""`, `"-1"`, `"+7"`, `" 7"`, `"7 "`, `W/"7"`, `"7", "8"`, `"1.5"`, `"abc"`, `"9223372036854775808"`, `"18446744073709551616"`, `"`, `**`, `"7`} {
		tests = append(tests, struct {
			name string
			h    http.Header
			want fence.Cond
			err  error
		}{"Bad/" + v, http.Header{"If-Match": {v}}, fence.Cond{}, fence.ErrBadRequest})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cond(tt.h)
			wantErr(t, err, tt.err)
			if got != tt.want {
				t.Fatalf("Cond=%+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestETag(t *testing.T) {
	for _, rev := range []fence.Rev{1, 7, 1 << 40, 1<<63 - 1} {
		c, err := parseIfMatch(wire.ETag(rev))
		if err != nil || c.IfMatch != rev {
			t.Fatalf("parseIfMatch(wire.ETag(%d)) = %+v, %v", rev, c, err)
		}
	}
}
