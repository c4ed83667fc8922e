package fence

import (
	"fmt"
	"math"
)

// Token is a fencing token: an integer in 1..MaxToken, strictly increasing per
// resource with every grant. The zero Token means "none".
type Token uint64

// MaxToken is the largest valid fencing token, 2^63-1, so that a token fits a
// signed 64-bit integer in every language and database.
const MaxToken Token = math.MaxInt64

// Valid reports whether t is in 1..MaxToken.
func (t Token) Valid() bool { return t >= 1 && t <= MaxToken }

// ParseToken parses the decimal ASCII form of a token, as sent in the
// Fencing-Token header. It accepts only digits without sign, space or leading
// zero, in 1..MaxToken; anything else returns an error that wraps ErrInvalidToken.
func ParseToken(s string) (Token, error) {
	if len(s) == 0 || len(s) > 19 || s[0] == '0' {
		return 0, fmt.Errorf("%w: %q", ErrInvalidToken, s)
	}
	var t uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: %q", ErrInvalidToken, s)
		}
		t = t*10 + uint64(c-'0') // 19 digits never overflow uint64
	}
	if Token(t) > MaxToken {
		return 0, fmt.Errorf("%w: %q is larger than %d", ErrInvalidToken, s, MaxToken)
	}
	return Token(t), nil
}

// String returns the decimal form of t, which ParseToken accepts when t is valid.
func (t Token) String() string { return fmt.Sprintf("%d", uint64(t)) }
