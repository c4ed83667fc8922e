package etcd_test

import (
	"bytes"
	"cmp"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/guard/etcd"
)

func TestEncodeToken(t *testing.T) {
	for _, tc := range []struct {
		token fence.Token
		want  string
	}{
		{1, "00000000000000000001"},
		{42, "00000000000000000042"},
		{fence.MaxToken, "00009223372036854775807"[3:]},
	} {
		if got := etcd.EncodeToken(tc.token); got != tc.want {
			t.Fatalf("EncodeToken(%d)=%q, want %q", tc.token, got, tc.want)
		}
	}
}

// TestEncodeToken_Order checks that etcd's byte-wise comparison of encoded
// tokens is their numeric order, and that they round-trip, over random pairs
// of every magnitude, near 2^63-1 and next to each other.
func TestEncodeToken_Order(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func() fence.Token {
		switch rng.IntN(4) {
		case 0: // any magnitude
			return 1 + fence.Token(rng.Uint64N(uint64(fence.MaxToken)>>rng.IntN(63)))
		case 1: // near 2^63-1
			return fence.MaxToken - fence.Token(rng.IntN(1000))
		case 2: // near a power of ten, where the digit count changes
			p := fence.Token(1)
			for range rng.IntN(19) {
				p *= 10
			}
			return max(1, p-fence.Token(rng.IntN(3))+1)
		default: // small
			return 1 + fence.Token(rng.IntN(1000))
		}
	}
	for range 100000 {
		a := random()
		b := random()
		if rng.IntN(8) == 0 {
			b = min(a+1, fence.MaxToken)
		}
		ea, eb := etcd.EncodeToken(a), etcd.EncodeToken(b)
		if got, want := bytes.Compare([]byte(ea), []byte(eb)), cmp.Compare(a, b); got != want {
			t.Fatalf("bytes.Compare(%q, %q)=%d, numeric order %d", ea, eb, got, want)
		}
		if len(ea) != 20 {
			t.Fatalf("EncodeToken(%d)=%q, want 20 bytes", a, ea)
		}
		if d, err := etcd.DecodeToken([]byte(ea)); err != nil || d != a {
			t.Fatalf("DecodeToken(EncodeToken(%d))=%d, %v", a, d, err)
		}
	}
}

func TestDecodeToken(t *testing.T) {
	for _, v := range []string{
		"",
		"42",
		"0000000000000000042",   // 19 digits
		"000000000000000000042", // 21 digits
		"00000000000000000000",  // 0 is not a token
		"09223372036854775808",  // MaxToken+1
		"18446744073709551615",  // 2^64-1
		"99999999999999999999",  // overflows uint64
		"-0000000000000000042",
		"+0000000000000000042",
		" 0000000000000000042",
		"0000000000000000004a",
		"０000000000000000042",
	} {
		if tok, err := etcd.DecodeToken([]byte(v)); err == nil || errors.Is(err, fence.ErrFenced) {
			t.Errorf("DecodeToken(%q)=%d, %v; want an error", v, tok, err)
		}
	}
}

func FuzzDecodeToken(f *testing.F) {
	f.Add([]byte("00000000000000000042"))
	f.Add([]byte("09223372036854775807"))
	f.Add([]byte("09223372036854775808"))
	f.Fuzz(func(t *testing.T, v []byte) {
		tok, err := etcd.DecodeToken(v)
		if err != nil {
			return
		}
		if !tok.Valid() || etcd.EncodeToken(tok) != string(v) {
			t.Fatalf("DecodeToken(%q)=%d, which encodes to %q", v, tok, etcd.EncodeToken(tok))
		}
	})
}

func TestOverlaps(t *testing.T) {
	const lo, hi = "/f/", "/f0" // the prefix "/f/"
	for _, tc := range []struct {
		key, end string
		want     bool
	}{
		{"/f/", "", true},
		{"/f/x", "", true},
		{"/f", "", false},
		{"/f0", "", false},
		{"/e", "/f/", false},  // [/e, /f/) ends where the prefix begins
		{"/e", "/f/a", true},  // into the prefix
		{"/f/a", "/z", true},  // out of it
		{"/f0", "/z", false},  // after it
		{"/a", "\x00", true},  // from /a on
		{"/g", "\x00", false}, // from /g on
		{"\x00", "\x00", true},
	} {
		if got := etcd.Overlaps(tc.key, tc.end, lo, hi); got != tc.want {
			t.Errorf("Overlaps(%q, %q)=%v, want %v", tc.key, tc.end, got, tc.want)
		}
	}
	// A prefix of 0xff bytes has no upper bound.
	if !etcd.Overlaps("\xff\xffz", "", "\xff\xff", "\x00") || etcd.Overlaps("\xfe", "", "\xff\xff", "\x00") {
		t.Error("Overlaps with an unbounded prefix is wrong")
	}
}
