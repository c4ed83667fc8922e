package httpapi

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/wire"
)

// badTokens are the malformed tokens of API.md, as JSON literals or header
// values.
var badTokens = []string{
	"abc", "-1", "0", "1.5", "+5", " 5", "0x10", "1e3", "9223372036854775808", "",
	"6ba7b810-9dad-11d1-80b4-00c04fd430c8", "05", "5 ", "١", "18446744073709551616", "99999999999999999999",
}

// wantErr checks that err is nil when want is nil, and else matches want.
func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if want == nil && err != nil {
		t.Fatalf("err=%v, want nil", err)
	}
	if want != nil && !errors.Is(err, want) {
		t.Fatalf("err=%v, want %v", err, want)
	}
	if want != nil && wire.Rank(err) != wire.Rank(want) {
		t.Fatalf("err=%v ranks as %s, want %s", err, wire.Codes[wire.Rank(err)].Code, wire.Codes[wire.Rank(want)].Code)
	}
}

func TestDecodeAcquire(t *testing.T) {
	long := strings.Repeat("h", fence.MaxHolderLen)
	tests := []struct {
		name string
		body string
		want acquireRequest
		err  error
	}{
		{"OK", `{"holder":"worker-a","ttl_ms":5000,"wait_ms":100}`, acquireRequest{"worker-a", 5 * time.Second, 100 * time.Millisecond, 0, fence.SessionRef{}, false}, nil},
		{"Defaults", `{"holder":"w"}`, acquireRequest{"w", fence.DefaultTTL, 0, 0, fence.SessionRef{}, false}, nil},
		{"Whitespace", " \n{ \"holder\" : \"w\" }\n\t", acquireRequest{"w", fence.DefaultTTL, 0, 0, fence.SessionRef{}, false}, nil},
		{"EscapedName", `{"hol\u0064er":"w"}`, acquireRequest{"w", fence.DefaultTTL, 0, 0, fence.SessionRef{}, false}, nil},
		{"Limits", `{"holder":"` + long + `","ttl_ms":86400000,"wait_ms":300000}`, acquireRequest{long, fence.MaxTTL, fence.MaxWait, 0, fence.SessionRef{}, false}, nil},
		{"MinTTL", `{"holder":"w","ttl_ms":10,"wait_ms":0}`, acquireRequest{"w", fence.MinTTL, 0, 0, fence.SessionRef{}, false}, nil},
		{"SurrogatePair", `{"holder":"\ud83d\ude00"}`, acquireRequest{"😀", fence.DefaultTTL, 0, 0, fence.SessionRef{}, false}, nil},
		{"EscapedBackslashU", `{"holder":"a\\ud800"}`, acquireRequest{`a\ud800`, fence.DefaultTTL, 0, 0, fence.SessionRef{}, false}, nil},

		{"Permit", `{"holder":"w","limit":3}`, acquireRequest{"w", fence.DefaultTTL, 0, 3, fence.SessionRef{}, false}, nil},
		{"MaxPermits", `{"holder":"w","limit":1000}`, acquireRequest{"w", fence.DefaultTTL, 0, fence.MaxPermits, fence.SessionRef{}, false}, nil},
		{"Shared", `{"holder":"w","mode":"shared"}`, acquireRequest{"w", fence.DefaultTTL, 0, 0, fence.SessionRef{}, true}, nil},
		{"Exclusive", `{"holder":"w","mode":"exclusive","limit":2}`, acquireRequest{"w", fence.DefaultTTL, 0, 2, fence.SessionRef{}, false}, nil},
		{"ModeUnknown", `{"holder":"w","mode":"read"}`, acquireRequest{}, fence.ErrBadRequest},
		{"ModeNull", `{"holder":"w","mode":null}`, acquireRequest{}, fence.ErrBadRequest},
		{"ModeCase", `{"holder":"w","mode":"Shared"}`, acquireRequest{}, fence.ErrBadRequest},
		{"SharedPermit", `{"holder":"w","mode":"shared","limit":2}`, acquireRequest{}, fence.ErrBadRequest},
		{"SharedSession", `{"holder":"w","mode":"shared","session":{"resource":".session/w","token":7}}`, acquireRequest{}, fence.ErrBadRequest},
		{"Session", `{"holder":"w","session":{"resource":".session/w","token":7}}`, acquireRequest{"w", 0, 0, 0, fence.SessionRef{Resource: ".session/w", Token: 7}, false}, nil},
		{"SessionTTL", `{"session":{"token":7,"resource":".session/w"},"holder":"w","ttl_ms":5000}`, acquireRequest{"w", 5 * time.Second, 0, 0, fence.SessionRef{Resource: ".session/w", Token: 7}, false}, nil},
		{"SessionNotASession", `{"holder":"w","session":{"resource":"w","token":7}}`, acquireRequest{}, fence.ErrBadRequest},
		{"SessionNoToken", `{"holder":"w","session":{"resource":".session/w"}}`, acquireRequest{}, fence.ErrBadRequest},
		{"SessionTokenZero", `{"holder":"w","session":{"resource":".session/w","token":0}}`, acquireRequest{}, fence.ErrBadRequest},
		{"SessionTokenString", `{"holder":"w","session":{"resource":".session/w","token":"7"}}`, acquireRequest{}, fence.ErrBadRequest},
		{"SessionUnknownMember", `{"holder":"w","session":{"resource":".session/w","token":7,"x":1}}`, acquireRequest{}, fence.ErrBadRequest},
		{"SessionString", `{"holder":"w","session":".session/w"}`, acquireRequest{}, fence.ErrBadRequest},
		{"SessionNull", `{"holder":"w","session":null}`, acquireRequest{}, fence.ErrBadRequest},
		{"LimitZero", `{"holder":"w","limit":0}`, acquireRequest{}, fence.ErrBadRequest},
		{"LimitTooLarge", `{"holder":"w","limit":1001}`, acquireRequest{}, fence.ErrBadRequest},
		{"LimitNegative", `{"holder":"w","limit":-2}`, acquireRequest{}, fence.ErrBadRequest},
		{"LimitString", `{"holder":"w","limit":"2"}`, acquireRequest{}, fence.ErrBadRequest},
		{"LimitNull", `{"holder":"w","limit":null}`, acquireRequest{}, fence.ErrBadRequest},
		{"LimitFraction", `{"holder":"w","limit":2.0}`, acquireRequest{}, fence.ErrBadRequest},
		{"Empty", ``, acquireRequest{}, fence.ErrBadRequest},
		{"Null", `null`, acquireRequest{}, fence.ErrBadRequest},
		{"Array", `[{"holder":"w"}]`, acquireRequest{}, fence.ErrBadRequest},
		{"TooManyMembers", `{"holder":"w",` + jsonFences(maxMembers) + `}`, acquireRequest{}, fence.ErrBadRequest}, // as the fuzzers require
		{"MissingHolder", `{}`, acquireRequest{}, fence.ErrBadRequest},
		{"NullHolder", `{"holder":null}`, acquireRequest{}, fence.ErrBadRequest},
		{"NumberHolder", `{"holder":5}`, acquireRequest{}, fence.ErrBadRequest},
		{"EmptyHolder", `{"holder":""}`, acquireRequest{}, fence.ErrBadRequest},
		{"LongHolder", `{"holder":"` + long + `h"}`, acquireRequest{}, fence.ErrBadRequest},
		{"ControlHolder", `{"holder":"a\nb"}`, acquireRequest{}, fence.ErrBadRequest},
		{"LoneSurrogate", `{"holder":"\ud800"}`, acquireRequest{}, fence.ErrBadRequest},
		{"LoneLowSurrogate", `{"holder":"\udc00x"}`, acquireRequest{}, fence.ErrBadRequest},
		{"InvalidUTF8", "{\"holder\":\"\xff\"}", acquireRequest{}, fence.ErrBadRequest},
		{"DuplicateKey", `{"holder":"a","holder":"b"}`, acquireRequest{}, fence.ErrBadRequest},
		{"DuplicateEscapedKey", `{"holder":"a","h\u006flder":"b"}`, acquireRequest{}, fence.ErrBadRequest},
		{"CaseMismatch", `{"Holder":"w"}`, acquireRequest{}, fence.ErrBadRequest},
		{"UnknownField", `{"holder":"w","ttl":5}`, acquireRequest{}, fence.ErrBadRequest},
		{"TrailingGarbage", `{"holder":"w"}x`, acquireRequest{}, fence.ErrBadRequest},
		{"TrailingObject", `{"holder":"w"}{}`, acquireRequest{}, fence.ErrBadRequest},
		{"Unterminated", `{"holder":"w"`, acquireRequest{}, fence.ErrBadRequest},
		{"TTLTooSmall", `{"holder":"w","ttl_ms":9}`, acquireRequest{}, fence.ErrBadRequest},
		{"TTLTooLarge", `{"holder":"w","ttl_ms":86400001}`, acquireRequest{}, fence.ErrBadRequest},
		{"TTLZero", `{"holder":"w","ttl_ms":0}`, acquireRequest{}, fence.ErrBadRequest},
		{"TTLNull", `{"holder":"w","ttl_ms":null}`, acquireRequest{}, fence.ErrBadRequest},
		{"TTLString", `{"holder":"w","ttl_ms":"100"}`, acquireRequest{}, fence.ErrBadRequest},
		{"TTLFraction", `{"holder":"w","ttl_ms":100.0}`, acquireRequest{}, fence.ErrBadRequest},
		{"TTLExponent", `{"holder":"w","ttl_ms":1e3}`, acquireRequest{}, fence.ErrBadRequest},
		{"TTLHuge", `{"holder":"w","ttl_ms":99999999999999999999}`, acquireRequest{}, fence.ErrBadRequest},
		{"WaitNegative", `{"holder":"w","wait_ms":-1}`, acquireRequest{}, fence.ErrBadRequest},
		{"WaitNegativeZero", `{"holder":"w","wait_ms":-0}`, acquireRequest{}, fence.ErrBadRequest},
		{"WaitTooLong", `{"holder":"w","wait_ms":300001}`, acquireRequest{}, fence.ErrBadRequest},
		{"BOM", "\ufeff{\"holder\":\"w\"}", acquireRequest{}, fence.ErrBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeAcquire([]byte(tt.body))
			wantErr(t, err, tt.err)
			if tt.err == nil && got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeRenew(t *testing.T) {
	tests := []struct {
		name string
		body string
		want renewRequest
		err  error
	}{
		{"OK", `{"token":42,"ttl_ms":10000}`, renewRequest{42, 10 * time.Second, ""}, nil},
		{"KeepTTL", `{"token":42}`, renewRequest{42, 0, ""}, nil},
		{"MaxToken", `{"token":9223372036854775807}`, renewRequest{fence.MaxToken, 0, ""}, nil},
		{"MissingToken", `{"ttl_ms":10000}`, renewRequest{}, fence.ErrBadRequest},
		{"NullToken", `{"token":null}`, renewRequest{}, fence.ErrInvalidToken},
		{"StringToken", `{"token":"5"}`, renewRequest{}, fence.ErrInvalidToken},
		{"ZeroToken", `{"token":0}`, renewRequest{}, fence.ErrInvalidToken},
		{"NegativeToken", `{"token":-1}`, renewRequest{}, fence.ErrInvalidToken},
		{"NegativeZeroToken", `{"token":-0}`, renewRequest{}, fence.ErrInvalidToken},
		{"FractionToken", `{"token":1.5}`, renewRequest{}, fence.ErrInvalidToken},
		{"IntegralFractionToken", `{"token":5.0}`, renewRequest{}, fence.ErrInvalidToken},
		{"ExponentToken", `{"token":1e3}`, renewRequest{}, fence.ErrInvalidToken},
		{"OverflowToken", `{"token":9223372036854775808}`, renewRequest{}, fence.ErrInvalidToken},
		{"BoolToken", `{"token":true}`, renewRequest{}, fence.ErrInvalidToken},
		{"ObjectToken", `{"token":{}}`, renewRequest{}, fence.ErrInvalidToken},
		{"CaseMismatch", `{"Token":5}`, renewRequest{}, fence.ErrBadRequest},
		{"DuplicateToken", `{"token":5,"token":6}`, renewRequest{}, fence.ErrBadRequest},
		{"Unknown", `{"token":5,"by":"w"}`, renewRequest{}, fence.ErrBadRequest},
		{"Holder", `{"token":5,"holder":"w"}`, renewRequest{Token: 5, Holder: "w"}, nil},
		{"EmptyHolder", `{"token":5,"holder":""}`, renewRequest{}, fence.ErrBadRequest},
		{"NumberHolder", `{"token":5,"holder":5}`, renewRequest{}, fence.ErrBadRequest},
		{"ExplicitZeroTTL", `{"token":5,"ttl_ms":0}`, renewRequest{}, fence.ErrBadRequest},
		// bad_request comes before invalid_token.
		{"BadTTLAndBadToken", `{"token":"5","ttl_ms":-1}`, renewRequest{}, fence.ErrBadRequest},
		{"UnknownAndBadToken", `{"token":"5","x":1}`, renewRequest{}, fence.ErrBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeRenew([]byte(tt.body))
			wantErr(t, err, tt.err)
			if tt.err == nil && got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeRelease(t *testing.T) {
	for _, tok := range badTokens {
		t.Run("String/"+tok, func(t *testing.T) {
			_, err := decodeRelease([]byte(`{"token":"` + tok + `"}`))
			wantErr(t, err, fence.ErrInvalidToken)
		})
	}
	// As bare JSON, a bad token is invalid_token when it is a JSON value, and
	// bad_request (malformed JSON) when it is not.
	for _, tt := range []struct {
		lit string
		err error
	}{
		{"-1", fence.ErrInvalidToken}, {"0", fence.ErrInvalidToken}, {"1.5", fence.ErrInvalidToken},
		{"1e3", fence.ErrInvalidToken}, {"1E3", fence.ErrInvalidToken}, {"9223372036854775808", fence.ErrInvalidToken},
		{"18446744073709551616", fence.ErrInvalidToken}, {"null", fence.ErrInvalidToken}, {"false", fence.ErrInvalidToken},
		{"[5]", fence.ErrInvalidToken}, {"abc", fence.ErrBadRequest}, {"+5", fence.ErrBadRequest},
		{"0x10", fence.ErrBadRequest}, {"05", fence.ErrBadRequest}, {"", fence.ErrBadRequest},
		{"6ba7b810-9dad-11d1-80b4-00c04fd430c8", fence.ErrBadRequest},
		{" 5", nil}, {"5 ", nil},
	} {
		t.Run("Bare/"+tt.lit, func(t *testing.T) {
			got, err := decodeRelease([]byte(`{"token":` + tt.lit + `}`))
			wantErr(t, err, tt.err)
			if tt.err == nil && got.Token != 5 {
				t.Fatalf("Token=%d, want 5", got.Token)
			}
		})
	}
	tests := []struct {
		name string
		body string
		want releaseRequest
		err  error
	}{
		{"OK", `{"token":42}`, releaseRequest{Token: 42}, nil},
		{"Holder", `{"holder":"r1","token":42}`, releaseRequest{Token: 42, Holder: "r1"}, nil},
		{"BadHolder", `{"holder":"a\nb","token":42}`, releaseRequest{}, fence.ErrBadRequest},
		{"Missing", `{}`, releaseRequest{}, fence.ErrBadRequest},
		{"Null", `{"token":null}`, releaseRequest{}, fence.ErrInvalidToken},
		{"String", `{"token":"5"}`, releaseRequest{}, fence.ErrInvalidToken},
		{"CaseMismatch", `{"TOKEN":42}`, releaseRequest{}, fence.ErrBadRequest},
		{"TTLNotAllowed", `{"token":42,"ttl_ms":10}`, releaseRequest{}, fence.ErrBadRequest},
		{"Trailing", `{"token":42} 7`, releaseRequest{}, fence.ErrBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeRelease([]byte(tt.body))
			wantErr(t, err, tt.err)
			if tt.err == nil && got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeTxn(t *testing.T) {
	big := strings.Repeat("v", fence.MaxValueSize+1)
	tests := []struct {
		name string
		body string
		want *fence.Txn
		err  error
	}{
		{"Example", `{"fences": {"orders": 42, "stock": 17},
			"if":   [{"resource": "orders", "key": "o-1", "revision": 7}],
			"then": [{"op": "put", "resource": "orders", "key": "o-1", "value": "paid"},
			         {"op": "delete", "resource": "stock", "key": "hold-9"}]}`,
			&fence.Txn{
				Fences: map[string]fence.Token{"orders": 42, "stock": 17},
				If:     []fence.Compare{{Resource: "orders", Key: "o-1", Rev: 7}},
				Then:   []fence.Op{{Kind: fence.OpPut, Resource: "orders", Key: "o-1", Value: []byte("paid")}, {Kind: fence.OpDelete, Resource: "stock", Key: "hold-9"}},
			}, nil},
		{"Nothing", `{}`, &fence.Txn{Fences: map[string]fence.Token{}}, nil},
		{"Empty", `{"fences":{},"if":[],"then":[]}`, &fence.Txn{Fences: map[string]fence.Token{}}, nil},
		{"FenceOnly", `{"fences":{"a/b":3}}`, &fence.Txn{Fences: map[string]fence.Token{"a/b": 3}}, nil},
		{"CompareAbsent", `{"if":[{"resource":"r","key":"k","revision":0}]}`, &fence.Txn{Fences: map[string]fence.Token{}, If: []fence.Compare{{Resource: "r", Key: "k", Rev: 0}}}, nil},
		{"Base64", `{"fences":{"r":1},"then":[{"op":"put","resource":"r","key":"k","value_base64":"AP8="}]}`,
			&fence.Txn{Fences: map[string]fence.Token{"r": 1}, Then: []fence.Op{{Kind: fence.OpPut, Resource: "r", Key: "k", Value: []byte{0, 255}}}}, nil},
		{"EmptyValue", `{"fences":{"r":1},"then":[{"op":"put","resource":"r","key":"k","value":""}]}`,
			&fence.Txn{Fences: map[string]fence.Token{"r": 1}, Then: []fence.Op{{Kind: fence.OpPut, Resource: "r", Key: "k", Value: []byte{}}}}, nil},
		{"MaxValue", `{"fences":{"r":1},"then":[{"op":"put","resource":"r","key":"k","value":"` + big[1:] + `"}]}`,
			&fence.Txn{Fences: map[string]fence.Token{"r": 1}, Then: []fence.Op{{Kind: fence.OpPut, Resource: "r", Key: "k", Value: []byte(big[1:])}}}, nil},

		{"NotObject", `[]`, nil, fence.ErrBadRequest},
		{"Unknown", `{"fence":{}}`, nil, fence.ErrBadRequest},
		{"CaseMismatch", `{"Fences":{}}`, nil, fence.ErrBadRequest},
		{"DuplicateTop", `{"if":[],"if":[]}`, nil, fence.ErrBadRequest},
		{"DuplicateFence", `{"fences":{"r":1,"r":2}}`, nil, fence.ErrBadRequest},
		{"NullFences", `{"fences":null}`, nil, fence.ErrBadRequest},
		{"FencesArray", `{"fences":[]}`, nil, fence.ErrBadRequest},
		{"NullIf", `{"if":null}`, nil, fence.ErrBadRequest},
		{"IfObject", `{"if":{}}`, nil, fence.ErrBadRequest},
		{"BadFenceName", `{"fences":{"":1}}`, nil, fence.ErrBadRequest},
		{"ControlFenceName", `{"fences":{"a\u0000":1}}`, nil, fence.ErrBadRequest},
		{"FenceStringToken", `{"fences":{"r":"5"}}`, nil, fence.ErrInvalidToken},
		{"FenceNullToken", `{"fences":{"r":null}}`, nil, fence.ErrInvalidToken},
		{"FenceZeroToken", `{"fences":{"r":0}}`, nil, fence.ErrInvalidToken},
		{"FenceBigToken", `{"fences":{"r":9223372036854775808}}`, nil, fence.ErrInvalidToken},
		{"IfMissingRevision", `{"if":[{"resource":"r","key":"k"}]}`, nil, fence.ErrBadRequest},
		{"IfNegativeRevision", `{"if":[{"resource":"r","key":"k","revision":-1}]}`, nil, fence.ErrBadRequest},
		{"IfFractionRevision", `{"if":[{"resource":"r","key":"k","revision":1.5}]}`, nil, fence.ErrBadRequest},
		{"IfNullRevision", `{"if":[{"resource":"r","key":"k","revision":null}]}`, nil, fence.ErrBadRequest},
		{"IfBadKey", `{"if":[{"resource":"r","key":"a//b","revision":1}]}`, nil, fence.ErrBadRequest},
		{"IfDotKey", `{"if":[{"resource":"r","key":"a/..","revision":1}]}`, nil, fence.ErrBadRequest},
		{"IfUnknown", `{"if":[{"resource":"r","key":"k","revision":1,"rev":1}]}`, nil, fence.ErrBadRequest},
		{"OpMissing", `{"fences":{"r":1},"then":[{"resource":"r","key":"k","value":"v"}]}`, nil, fence.ErrBadRequest},
		{"OpUnknown", `{"fences":{"r":1},"then":[{"op":"get","resource":"r","key":"k"}]}`, nil, fence.ErrBadRequest},
		{"OpCase", `{"fences":{"r":1},"then":[{"op":"PUT","resource":"r","key":"k","value":"v"}]}`, nil, fence.ErrBadRequest},
		{"PutBoth", `{"fences":{"r":1},"then":[{"op":"put","resource":"r","key":"k","value":"v","value_base64":"dg=="}]}`, nil, fence.ErrBadRequest},
		{"PutNeither", `{"fences":{"r":1},"then":[{"op":"put","resource":"r","key":"k"}]}`, nil, fence.ErrBadRequest},
		{"PutNullValue", `{"fences":{"r":1},"then":[{"op":"put","resource":"r","key":"k","value":null}]}`, nil, fence.ErrBadRequest},
		{"PutNumberValue", `{"fences":{"r":1},"then":[{"op":"put","resource":"r","key":"k","value":5}]}`, nil, fence.ErrBadRequest},
		{"BadBase64", `{"fences":{"r":1},"then":[{"op":"put","resource":"r","key":"k","value_base64":"!!"}]}`, nil, fence.ErrBadRequest},
		{"UnpaddedBase64", `{"fences":{"r":1},"then":[{"op":"put","resource":"r","key":"k","value_base64":"dg"}]}`, nil, fence.ErrBadRequest},
		{"Base64LineBreak", `{"fences":{"r":1},"then":[{"op":"put","resource":"r","key":"k","value_base64":"dg\n=="}]}`, nil, fence.ErrBadRequest},
		{"Base64StrayBits", `{"fences":{"r":1},"then":[{"op":"put","resource":"r","key":"k","value_base64":"dh=="}]}`, nil, fence.ErrBadRequest},
		{"DeleteWithValue", `{"fences":{"r":1},"then":[{"op":"delete","resource":"r","key":"k","value":"v"}]}`, nil, fence.ErrBadRequest},
		{"TooLarge", `{"fences":{"r":1},"then":[{"op":"put","resource":"r","key":"k","value":"` + big + `"}]}`, nil, fence.ErrTooLarge},
		{"TooLargeBase64", `{"fences":{"r":1},"then":[{"op":"put","resource":"r","key":"k","value_base64":"` + base64.StdEncoding.EncodeToString([]byte(big)) + `"}]}`, nil, fence.ErrTooLarge},
		{"FenceRequired", `{"fences":{"a":1},"then":[{"op":"delete","resource":"b","key":"k"}]}`, nil, fence.ErrFenceRequired},
		{"NoFences", `{"then":[{"op":"delete","resource":"b","key":"k"}]}`, nil, fence.ErrFenceRequired},
		{"CompareNeedsNoFence", `{"if":[{"resource":"b","key":"k","revision":0}]}`, &fence.Txn{Fences: map[string]fence.Token{}, If: []fence.Compare{{Resource: "b", Key: "k", Rev: 0}}}, nil},
		{"Trailing", `{} {}`, nil, fence.ErrBadRequest},
		{"MaxFences", `{"fences":{` + jsonFences(fence.MaxTxnEntries) + `}}`, &fence.Txn{Fences: fencesOf(fence.MaxTxnEntries)}, nil},
		{"TooManyFences", `{"fences":{` + jsonFences(fence.MaxTxnEntries+1) + `}}`, nil, fence.ErrTooLarge},
		{"TooManyCompares", `{"if":[` + strings.Repeat(`{},`, fence.MaxTxnEntries) + `{}]}`, nil, fence.ErrTooLarge},
		{"TooManyOps", `{"then":[` + strings.Repeat(`{},`, fence.MaxTxnEntries) + `{}]}`, nil, fence.ErrTooLarge},
		{"TooManyMembers", `{"fences":{},` + jsonFences(maxMembers) + `}`, nil, fence.ErrBadRequest},

		// Precedence: too_large, bad_request, fence_required, invalid_token.
		{"TooLargeBeforeBadRequest", `{"fences":{"":"x"},"then":[{"op":"put","resource":"r","key":"","value":"` + big + `"},{"op":"put","resource":"r","key":"k","value":"` + big + `","value_base64":""}]}`, nil, fence.ErrTooLarge},
		{"BadRequestBeforeFenceRequired", `{"then":[{"op":"delete","resource":"b","key":"k"},{"op":"nope","resource":"b","key":"k"}]}`, nil, fence.ErrBadRequest},
		{"FenceRequiredBeforeInvalidToken", `{"fences":{"a":"1"},"then":[{"op":"delete","resource":"b","key":"k"}]}`, nil, fence.ErrFenceRequired},
		{"BadRequestBeforeInvalidToken", `{"fences":{"a":-1},"if":[{"resource":"a","key":"k"}]}`, nil, fence.ErrBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeTxn([]byte(tt.body))
			wantErr(t, err, tt.err)
			if tt.err == nil && !equalTxn(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// jsonFences returns n members of a fences object, "r0":1,"r1":1,...
func jsonFences(n int) string {
	ms := make([]string, n)
	for i := range ms {
		ms[i] = fmt.Sprintf(`"r%d":1`, i)
	}
	return strings.Join(ms, ",")
}

// fencesOf returns the fences that jsonFences(n) decodes to.
func fencesOf(n int) map[string]fence.Token {
	m := make(map[string]fence.Token, n)
	for i := range n {
		m[fmt.Sprintf("r%d", i)] = 1
	}
	return m
}

// TestDecodeTxnMemberBomb decodes the largest txn bodies that hold the most
// members, elements and nesting a body can: each is refused, and its cost
// does not grow with what the body holds past the limits. A decoder that
// read every member (or compared each with every other, as it once did: 80k
// members took 15 s) allocates in proportion to the body, which the
// allocation bound catches without timing anything.
// txnBombs returns the largest txn bodies that hold the most members,
// elements and nesting a body can, by name.
func txnBombs() map[string][]byte {
	// fill returns prefix, unit(0), unit(1), ... comma-separated, and
	// suffix: as many units as fit in the largest txn body.
	fill := func(prefix string, unit func(i int) string, suffix string) []byte {
		var b strings.Builder
		b.WriteString(prefix)
		for i := 0; ; i++ {
			u := unit(i)
			if b.Len()+1+len(u)+len(suffix) > maxTxnBody {
				break
			}
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(u)
		}
		b.WriteString(suffix)
		return []byte(b.String())
	}
	member := func(i int) string { return fmt.Sprintf(`"r%d":1`, i) }
	empty := func(int) string { return `{}` }
	return map[string][]byte{
		"Fences":        fill(`{"fences":{`, member, `}}`),
		"Compares":      fill(`{"if":[`, empty, `]}`),
		"Ops":           fill(`{"then":[`, empty, `]}`),
		"TopMembers":    fill(`{`, member, `}`),
		"CompareFields": fill(`{"if":[{`, member, `}]}`),
		"OpFields":      fill(`{"then":[{`, member, `}]}`),
		"Value":         []byte(`{"fences":{"r":1},"then":[{"op":"put","resource":"r","key":"k","value_base64":"` + base64.StdEncoding.EncodeToString(make([]byte, fence.MaxValueSize)) + `"}]}`),
	}
}

func TestDecodeTxnMemberBomb(t *testing.T) {
	bombs := txnBombs()
	delete(bombs, "Value") // a valid body
	small := []byte(`{"fences":{` + jsonFences(fence.MaxTxnEntries+1) + `}}`)
	limit := 4 * testing.AllocsPerRun(3, func() { decodeTxn(small) })
	for name, body := range bombs {
		t.Run(name, func(t *testing.T) {
			var err error
			allocs := testing.AllocsPerRun(3, func() { _, err = decodeTxn(body) })
			checkKinds(t, err, fence.ErrTooLarge, fence.ErrBadRequest) // too many entries, or too many members
			if allocs > limit {
				t.Errorf("decoding %d bytes made %.0f allocations, more than %.0f (4x those of a body just over the limit): the cost grows with the body", len(body), allocs, limit)
			}
		})
	}
}

func equalTxn(a, b *fence.Txn) bool {
	if len(a.Fences) != len(b.Fences) || len(a.If) != len(b.If) || len(a.Then) != len(b.Then) {
		return false
	}
	for r, t := range a.Fences {
		if u, ok := b.Fences[r]; !ok || u != t {
			return false
		}
	}
	for i := range a.If {
		if a.If[i] != b.If[i] {
			return false
		}
	}
	for i, op := range a.Then {
		o := b.Then[i]
		if op.Kind != o.Kind || op.Resource != o.Resource || op.Key != o.Key || !bytes.Equal(op.Value, o.Value) || (op.Value == nil) != (o.Value == nil) {
			return false
		}
	}
	return true
}

// BenchmarkDecodeMaximal decodes the largest request bodies: each of
// txnBombs (4 MiB), and the largest lock request (64 KiB of members).
func BenchmarkDecodeMaximal(b *testing.B) {
	for name, body := range txnBombs() {
		b.Run("Txn"+name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				decodeTxn(body)
			}
		})
	}
	acquire := []byte(`{"holder":"` + strings.Repeat("h", maxJSONBody-32) + `"}`)
	b.Run("Acquire", func(b *testing.B) {
		b.SetBytes(int64(len(acquire)))
		for b.Loop() {
			decodeAcquire(acquire)
		}
	})
}
