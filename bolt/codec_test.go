package bolt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/state"
)

var testResources = []state.Resource{
	{},
	{LastToken: 300, LastFence: 299, LeaseToken: 300, Holder: "worker-ä", TTL: 1500 * time.Millisecond, Expires: 1_900_000_000_123_456_789},
	{LastToken: 7, LastFence: 7, Expires: -1},
	{LastToken: fence.MaxToken, LastFence: fence.MaxToken, LeaseToken: fence.MaxToken, Holder: string(bytes.Repeat([]byte{'h'}, fence.MaxHolderLen)),
		TTL: math.MaxInt64, Expires: math.MinInt64},
	{LastToken: math.MaxUint64, TTL: -1, Holder: "\x00\xff"}, // not valid state, but the codec must not care
}

func TestDecodeResource(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		for _, r := range testResources {
			got, err := decodeResource(encodeResource(r))
			if err != nil {
				t.Fatalf("decodeResource(encodeResource(%+v)): %v", r, err)
			}
			if got != r {
				t.Fatalf("decodeResource(encodeResource(r))=%+v, want %+v", got, r)
			}
		}
	})

	// Every strict prefix of a record is missing something.
	t.Run("Truncated", func(t *testing.T) {
		for _, r := range testResources {
			b := encodeResource(r)
			for n := range len(b) {
				if got, err := decodeResource(b[:n]); !errors.Is(err, errCorrupt) {
					t.Fatalf("decodeResource(%x)=%+v, %v; want errCorrupt", b[:n], got, err)
				}
			}
		}
	})

	t.Run("Corrupt", func(t *testing.T) {
		good := encodeResource(testResources[1])
		head := []byte{recordV1, 1, 1, 1, 1, 2} // up to the holder's length
		for _, c := range []struct {
			name string
			b    []byte
		}{
			{"Empty", nil},
			{"Version0", append([]byte{0}, good[1:]...)},
			{"Version2", append([]byte{2}, good[1:]...)},
			{"TrailingByte", append(bytes.Clone(good), 0)},
			{"HolderLongerThanRecord", append(bytes.Clone(head), 5, 'a', 'b')},
			{"HolderLengthNegativeAsInt", binary.AppendUvarint(bytes.Clone(head), 1<<63)},
			{"HolderLengthMaxUint64", binary.AppendUvarint(bytes.Clone(head), math.MaxUint64)},
			{"HolderLengthHuge", binary.AppendUvarint(bytes.Clone(head), 1<<40)},
			{"UvarintOverflow", []byte{recordV1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1, 1, 1, 2, 0}},
			{"UvarintTooLong", []byte{recordV1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 1, 1, 1, 2, 0}},
			{"VarintOverflow", []byte{recordV1, 1, 1, 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0}},
			{"UnterminatedVarint", []byte{recordV1, 1, 1, 1, 1, 0x80}},
			{"AllOnes", bytes.Repeat([]byte{0xff}, 64)},
			{"EntryRecord", encodeEntry(state.Entry{Value: []byte("v"), Rev: 1, Token: 1})},
		} {
			t.Run(c.name, func(t *testing.T) {
				if got, err := decodeResource(c.b); !errors.Is(err, errCorrupt) {
					t.Fatalf("decodeResource(%x)=%+v, %v; want errCorrupt", c.b, got, err)
				}
			})
		}
	})
}

var testEntries = []state.Entry{
	{Value: []byte{}},
	{Value: []byte("hello"), Rev: 42, Token: 7},
	{Value: []byte{0, 1, 0xff}, Rev: math.MaxUint64, Token: fence.MaxToken},
	{Value: bytes.Repeat([]byte("x"), fence.MaxValueSize), Rev: 1 << 40, Token: 1 << 20},
}

func equalEntry(a, b state.Entry) bool {
	return a.Rev == b.Rev && a.Token == b.Token && bytes.Equal(a.Value, b.Value)
}

func TestDecodeEntry(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		for _, e := range testEntries {
			got, err := decodeEntry(encodeEntry(e))
			if err != nil {
				t.Fatalf("decodeEntry(encodeEntry(rev %d)): %v", e.Rev, err)
			}
			if !equalEntry(got, e) {
				t.Fatalf("decodeEntry(encodeEntry(e)): Rev=%d Token=%d len(Value)=%d, want %d %d %d",
					got.Rev, got.Token, len(got.Value), e.Rev, e.Token, len(e.Value))
			}
		}
	})

	// Without its header, an entry is corrupt; after it, the rest is the value.
	t.Run("Truncated", func(t *testing.T) {
		for _, e := range testEntries {
			b := encodeEntry(e)
			header := len(b) - len(e.Value)
			for n := range header {
				if got, err := decodeEntry(b[:n]); !errors.Is(err, errCorrupt) {
					t.Fatalf("decodeEntry(%x)=%+v, %v; want errCorrupt", b[:n], got, err)
				}
			}
		}
	})

	t.Run("Corrupt", func(t *testing.T) {
		for _, c := range []struct {
			name string
			b    []byte
		}{
			{"Empty", nil},
			{"Version0", []byte{0, 1, 1, 'v'}},
			{"Version2", []byte{2, 1, 1, 'v'}},
			{"NoToken", []byte{recordV1, 1}},
			{"UvarintOverflow", []byte{recordV1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1, 'v'}},
			{"UnterminatedVarint", []byte{recordV1, 1, 0x80, 0x80}},
			{"AllOnes", bytes.Repeat([]byte{0xff}, 64)},
		} {
			t.Run(c.name, func(t *testing.T) {
				if got, err := decodeEntry(c.b); !errors.Is(err, errCorrupt) {
					t.Fatalf("decodeEntry(%x)=%+v, %v; want errCorrupt", c.b, got, err)
				}
			})
		}
	})
}

// FuzzDecodeResource checks that decodeResource never panics, that what it
// accepts survives a round trip, and that every resource built from the
// inputs does.
func FuzzDecodeResource(f *testing.F) {
	for _, r := range testResources {
		f.Add(encodeResource(r), uint64(r.LastToken), uint64(r.LastFence), uint64(r.LeaseToken), int64(r.TTL), r.Expires, r.Holder)
	}
	f.Add([]byte{recordV1, 1, 1, 1, 1, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, uint64(1), uint64(1), uint64(0), int64(0), int64(0), "")
	f.Fuzz(func(t *testing.T, b []byte, lastToken, lastFence, leaseToken uint64, ttl, expires int64, holder string) {
		if r, err := decodeResource(b); err == nil {
			again, err := decodeResource(encodeResource(r))
			if err != nil || again != r {
				t.Fatalf("decodeResource(encodeResource(%+v))=%+v, %v", r, again, err)
			}
		} else if !errors.Is(err, errCorrupt) {
			t.Fatalf("decodeResource(%x): err=%v, want errCorrupt", b, err)
		}
		r := state.Resource{LastToken: fence.Token(lastToken), LastFence: fence.Token(lastFence), LeaseToken: fence.Token(leaseToken),
			Holder: holder, TTL: time.Duration(ttl), Expires: expires}
		got, err := decodeResource(encodeResource(r))
		if err != nil || got != r {
			t.Fatalf("decodeResource(encodeResource(%+v))=%+v, %v", r, got, err)
		}
	})
}

// FuzzDecodeEntry checks that decodeEntry never panics, that what it accepts
// survives a round trip, and that every entry built from the inputs does.
func FuzzDecodeEntry(f *testing.F) {
	for _, e := range testEntries[:3] {
		f.Add(encodeEntry(e), uint64(e.Rev), uint64(e.Token), e.Value)
	}
	f.Add([]byte{recordV1, 0x80}, uint64(1), uint64(1), []byte(nil))
	f.Fuzz(func(t *testing.T, b []byte, rev, token uint64, value []byte) {
		if e, err := decodeEntry(b); err == nil {
			if !bytes.HasSuffix(b, e.Value) {
				t.Fatalf("decodeEntry(%x): Value=%x, want a suffix of the record", b, e.Value)
			}
			again, err := decodeEntry(encodeEntry(e))
			if err != nil || !equalEntry(again, e) {
				t.Fatalf("decodeEntry(encodeEntry(%+v))=%+v, %v", e, again, err)
			}
		} else if !errors.Is(err, errCorrupt) {
			t.Fatalf("decodeEntry(%x): err=%v, want errCorrupt", b, err)
		}
		e := state.Entry{Value: value, Rev: fence.Rev(rev), Token: fence.Token(token)}
		got, err := decodeEntry(encodeEntry(e))
		if err != nil || !equalEntry(got, e) {
			t.Fatalf("decodeEntry(encodeEntry(%+v))=%+v, %v", e, got, err)
		}
	})
}
