package fence_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/fence-lock/fence"
)

func TestParseToken(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want fence.Token
	}{
		{"1", 1},
		{"42", 42},
		{"9223372036854775807", fence.MaxToken},
	} {
		got, err := fence.ParseToken(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseToken(%q)=%d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{
		"", "0", "00", "01", "-1", "+5", " 5", "5 ", "1.5", "1e3", "0x10", "abc", "١", // Arabic-Indic one
		"9223372036854775808", "18446744073709551615", "18446744073709551616", "99999999999999999999",
		"123e4567-e89b-12d3-a456-426614174000",
	} {
		if got, err := fence.ParseToken(in); !errors.Is(err, fence.ErrInvalidToken) {
			t.Errorf("ParseToken(%q)=%d, %v; want ErrInvalidToken", in, got, err)
		}
	}
}

// FuzzParseToken checks that ParseToken accepts exactly the canonical decimal
// form of 1..MaxToken, and that String round-trips what it accepts.
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"1", "42", "9223372036854775807", "9223372036854775808", "0", "-1", "+5", " 5", "1e3", "abc", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := fence.ParseToken(s)
		n, stdErr := strconv.ParseUint(s, 10, 64)
		canonical := stdErr == nil && n >= 1 && n <= uint64(fence.MaxToken) && strconv.FormatUint(n, 10) == s
		if (err == nil) != canonical {
			t.Fatalf("ParseToken(%q) err=%v, but canonical=%v", s, err, canonical)
		}
		if err != nil {
			if !errors.Is(err, fence.ErrInvalidToken) {
				t.Fatalf("ParseToken(%q) err=%v, want ErrInvalidToken", s, err)
			}
			return
		}
		if !tok.Valid() || tok.String() != s {
			t.Fatalf("ParseToken(%q)=%d, String()=%q", s, tok, tok.String())
		}
	})
}

func TestValidateNames(t *testing.T) {
	long := strings.Repeat("x", fence.MaxNameLen)
	for _, ok := range []string{"orders", "orders/17", "ü", long, "a b", "..."} {
		if err := fence.ValidateResource(ok); err != nil {
			t.Errorf("ValidateResource(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", long + "x", "a\x00b", "a\nb", "\x7f", "\u0085", "\xff"} {
		if err := fence.ValidateResource(bad); !errors.Is(err, fence.ErrBadRequest) {
			t.Errorf("ValidateResource(%q)=%v, want ErrBadRequest", bad, err)
		}
	}
	for _, ok := range []string{"k", "a/b/c", "a/.b", "..x"} {
		if err := fence.ValidateKey(ok); err != nil {
			t.Errorf("ValidateKey(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/a", "a/", "a//b", ".", "..", "a/./b", "a/../b", "a\tb"} {
		if err := fence.ValidateKey(bad); !errors.Is(err, fence.ErrBadRequest) {
			t.Errorf("ValidateKey(%q)=%v, want ErrBadRequest", bad, err)
		}
	}
	if err := fence.ValidateHolder(strings.Repeat("h", fence.MaxHolderLen+1)); !errors.Is(err, fence.ErrBadRequest) {
		t.Errorf("ValidateHolder(257 bytes)=%v, want ErrBadRequest", err)
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		err      error
		sentinel error
	}{
		{&fence.FencedError{Resource: "r", Presented: 1, LastFence: 2}, fence.ErrFenced},
		{&fence.TokenNotIssuedError{Resource: "r", Presented: 9, LastToken: 2}, fence.ErrTokenNotIssued},
		{&fence.LockHeldError{Resource: "r"}, fence.ErrLockHeld},
		{&fence.LeaseLostError{Resource: "r", Presented: 1, Current: 2}, fence.ErrLeaseLost},
	} {
		wrapped := errors.Join(errors.New("context"), tc.err)
		if !errors.Is(wrapped, tc.sentinel) {
			t.Errorf("errors.Is(%v, %v) = false", tc.err, tc.sentinel)
		}
		if errors.Is(tc.err, fence.ErrNotFound) {
			t.Errorf("errors.Is(%v, ErrNotFound) = true", tc.err)
		}
	}
}

func BenchmarkParseToken(b *testing.B) {
	for b.Loop() {
		if _, err := fence.ParseToken("9223372036854775807"); err != nil {
			b.Fatal(err)
		}
	}
}
