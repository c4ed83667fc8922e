package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/fence-lock/fence"
)

var testResources = []Resource{
	{},
	{LastToken: 300, LastFence: 299, LeaseToken: 300, Holder: "worker-ä", TTL: 1500 * time.Millisecond, Expires: 1_900_000_000_123_456_789},
	{LastToken: 7, LastFence: 7, Expires: -1, Delay: 5 * time.Second},
	{LastToken: fence.MaxToken, LastFence: fence.MaxToken, LeaseToken: fence.MaxToken, Holder: string(bytes.Repeat([]byte{'h'}, fence.MaxHolderLen)),
		Owner: string(bytes.Repeat([]byte{'o'}, 300)), TTL: math.MaxInt64, Expires: math.MinInt64, Delay: math.MinInt64},
	{LastToken: math.MaxUint64, TTL: -1, Holder: "\x00\xff", Owner: "\xff\x00"}, // not valid state, but the codec must not care
	{LastToken: 12, LastFence: 12, LeaseToken: 12, Holder: "worker-a", Owner: "alice", TTL: time.Second, Expires: 1},
	{LastToken: 4, LastFence: 4, LeaseToken: 4, Holder: "w", TTL: time.Second, Session: ".session/w", SessionToken: fence.MaxToken},
	{LastToken: 5, LastFence: 5, LeaseToken: 5, Members: []SharedHolder{{Holder: "r1", Owner: "alice", TTL: time.Second, Expires: 7},
		{Holder: "r2", TTL: math.MaxInt64, Expires: math.MinInt64}}},
	{LastToken: 6, LastFence: 6, LeaseToken: 6, Holder: "w", TTL: time.Second, RevokeGrace: math.MaxInt64},
}

// same reports whether two resources are equal, their shared groups included.
func same(a, b Resource) bool { return reflect.DeepEqual(a, b) }

func TestDecodeResource(t *testing.T) {
	// Records written before lock-delays were recorded still decode, with no
	// delay and no owner.
	t.Run("Version1", func(t *testing.T) {
		v1 := []byte{recordV1, 9, 8, 9, 0x80, 0x94, 0xeb, 0xdc, 0x03, 2, 2, 'h', 'i'}
		want := Resource{LastToken: 9, LastFence: 8, LeaseToken: 9, TTL: time.Second, Expires: 1, Holder: "hi"}
		if got, err := DecodeResource(v1); err != nil || !same(got, want) {
			t.Fatalf("DecodeResource(v1)=%+v, %v; want %+v", got, err, want)
		}
	})
	// Records written before owners were recorded still decode, with no
	// owner: the lease may be renewed and released by anyone, as before.
	t.Run("Version2", func(t *testing.T) {
		v2 := []byte{recordV2, 9, 8, 9, 0x80, 0x94, 0xeb, 0xdc, 0x03, 2, 2, 'h', 'i', 0x14}
		want := Resource{LastToken: 9, LastFence: 8, LeaseToken: 9, TTL: time.Second, Expires: 1, Holder: "hi", Delay: 10}
		if got, err := DecodeResource(v2); err != nil || !same(got, want) {
			t.Fatalf("DecodeResource(v2)=%+v, %v; want %+v", got, err, want)
		}
	})
	// Records written before sessions still decode, with no session.
	t.Run("Version3", func(t *testing.T) {
		r := Resource{LastToken: 9, LastFence: 8, LeaseToken: 9, TTL: time.Second, Expires: 1, Holder: "hi", Delay: 10, Owner: "alice"}
		v3 := []byte{recordV3, 9, 8, 9, 0x80, 0x94, 0xeb, 0xdc, 0x03, 2, 2, 'h', 'i', 0x14, 5, 'a', 'l', 'i', 'c', 'e'}
		if got, err := DecodeResource(v3); err != nil || !same(got, r) {
			t.Fatalf("DecodeResource(v3)=%+v, %v; want %+v", got, err, r)
		}
	})
	// Records written before shared holds still decode, with no group.
	t.Run("Version4", func(t *testing.T) {
		r := Resource{LastToken: 9, LastFence: 8, LeaseToken: 9, TTL: time.Second, Expires: 1, Holder: "hi", Delay: 10, Owner: "alice",
			Session: ".session/s", SessionToken: 3}
		v4 := []byte{recordV4, 9, 8, 9, 0x80, 0x94, 0xeb, 0xdc, 0x03, 2, 2, 'h', 'i', 0x14, 5, 'a', 'l', 'i', 'c', 'e',
			10, '.', 's', 'e', 's', 's', 'i', 'o', 'n', '/', 's', 3}
		if got, err := DecodeResource(v4); err != nil || !same(got, r) {
			t.Fatalf("DecodeResource(v4)=%+v, %v; want %+v", got, err, r)
		}
	})
	// Records written before revokes were requested still decode, with none.
	t.Run("Version5", func(t *testing.T) {
		g := Resource{LastToken: 9, LastFence: 9, LeaseToken: 9,
			Members: []SharedHolder{{Holder: "a", Owner: "o", TTL: 2, Expires: -1}, {Holder: "b", TTL: 3, Expires: 1}}}
		group := []byte{recordV5, 9, 9, 9, 0, 0, 0, 0, 0, 0, 0, 2, 1, 'a', 1, 'o', 2, 1, 1, 'b', 0, 3, 2}
		if got, err := DecodeResource(group); err != nil || !same(got, g) {
			t.Fatalf("DecodeResource(v5 group)=%+v, %v; want %+v", got, err, g)
		}
		// A count of members the record cannot hold is corrupt.
		huge := append(bytes.Clone(group[:11]), 0xff, 0xff, 0xff, 0xff, 0x0f)
		if _, err := DecodeResource(huge); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("DecodeResource(huge count): %v, want ErrCorrupt", err)
		}
	})
	// The format written now, byte for byte: version 6, then the fields of
	// version 4, then the number of shared holders and each one's holder
	// and owner, length-prefixed, TTL and expiry, then the grace of a
	// revoke requested.
	t.Run("Version6", func(t *testing.T) {
		r := Resource{LastToken: 9, LastFence: 8, LeaseToken: 9, TTL: time.Second, Expires: 1, Holder: "hi", Delay: 10, Owner: "alice",
			Session: ".session/s", SessionToken: 3, RevokeGrace: 5}
		v6 := []byte{recordV6, 9, 8, 9, 0x80, 0x94, 0xeb, 0xdc, 0x03, 2, 2, 'h', 'i', 0x14, 5, 'a', 'l', 'i', 'c', 'e',
			10, '.', 's', 'e', 's', 's', 'i', 'o', 'n', '/', 's', 3, 0, 10}
		if got := EncodeResource(r); !bytes.Equal(got, v6) {
			t.Fatalf("EncodeResource(%+v)=%x, want %x", r, got, v6)
		}
		if got, err := DecodeResource(v6); err != nil || !same(got, r) {
			t.Fatalf("DecodeResource(v6)=%+v, %v; want %+v", got, err, r)
		}
		// A shared group: no lease of one holder, two members.
		g := Resource{LastToken: 9, LastFence: 9, LeaseToken: 9,
			Members: []SharedHolder{{Holder: "a", Owner: "o", TTL: 2, Expires: -1}, {Holder: "b", TTL: 3, Expires: 1}}}
		group := []byte{recordV6, 9, 9, 9, 0, 0, 0, 0, 0, 0, 0, 2, 1, 'a', 1, 'o', 2, 1, 1, 'b', 0, 3, 2, 0}
		if got := EncodeResource(g); !bytes.Equal(got, group) {
			t.Fatalf("EncodeResource(%+v)=%x, want %x", g, got, group)
		}
		if got, err := DecodeResource(group); err != nil || !same(got, g) {
			t.Fatalf("DecodeResource(group)=%+v, %v; want %+v", got, err, g)
		}
	})
	t.Run("OK", func(t *testing.T) {
		for _, r := range testResources {
			got, err := DecodeResource(EncodeResource(r))
			if err != nil {
				t.Fatalf("DecodeResource(EncodeResource(%+v)): %v", r, err)
			}
			if !same(got, r) {
				t.Fatalf("DecodeResource(EncodeResource(r))=%+v, want %+v", got, r)
			}
		}
	})

	// Every strict prefix of a record is missing something.
	t.Run("Truncated", func(t *testing.T) {
		for _, r := range testResources {
			b := EncodeResource(r)
			for n := range len(b) {
				if got, err := DecodeResource(b[:n]); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("DecodeResource(%x)=%+v, %v; want ErrCorrupt", b[:n], got, err)
				}
			}
		}
	})

	t.Run("Corrupt", func(t *testing.T) {
		good := EncodeResource(testResources[1])
		owned := EncodeResource(testResources[5])
		head := []byte{recordV1, 1, 1, 1, 1, 2}             // up to the holder's length
		head3 := []byte{recordV3, 1, 1, 1, 1, 2, 1, 'h', 0} // up to the owner's length
		noOwnerLength := EncodeResource(testResources[2])
		noOwnerLength = noOwnerLength[:len(noOwnerLength)-3] // a version 4 record that stops after the delay
		noSession := EncodeResource(testResources[5])
		noSession = noSession[:len(noSession)-2]               // a version 4 record that stops after the owner
		head4 := []byte{recordV4, 1, 1, 1, 1, 2, 1, 'h', 0, 0} // up to the session's length
		for _, c := range []struct {
			name string
			b    []byte
		}{
			{"Empty", nil},
			{"Version0", append([]byte{0}, good[1:]...)},
			{"Version7", append([]byte{7}, good[1:]...)},
			{"V5WithRevokeGrace", append([]byte{recordV5}, EncodeResource(testResources[8])[1:]...)},
			{"V4WithMembers", append([]byte{recordV4}, EncodeResource(testResources[7])[1:]...)},
			{"MemberWithoutExpiry", EncodeResource(testResources[7])[:len(EncodeResource(testResources[7]))-2]}, // the grace and the expiry's last byte
			{"TrailingByte", append(bytes.Clone(good), 0)},
			{"V3TrailingByte", append(bytes.Clone(owned), 0)},
			{"V2WithOwner", append([]byte{recordV2}, owned[1:]...)},
			{"V4WithoutOwner", noOwnerLength},
			{"V4WithoutSession", noSession},
			{"V3WithSession", append([]byte{recordV3}, EncodeResource(testResources[6])[1:]...)},
			{"SessionLongerThanRecord", append(bytes.Clone(head4), 5, 'a', 'b')},
			{"SessionWithoutToken", append(bytes.Clone(head4), 1, 's')},
			{"SessionLengthHuge", binary.AppendUvarint(bytes.Clone(head4), 1<<40)},
			{"OwnerLongerThanRecord", append(bytes.Clone(head3), 5, 'a', 'b')},
			{"OwnerLengthMaxUint64", binary.AppendUvarint(bytes.Clone(head3), math.MaxUint64)},
			{"OwnerLengthHuge", binary.AppendUvarint(bytes.Clone(head3), 1<<40)},
			{"HolderLongerThanRecord", append(bytes.Clone(head), 5, 'a', 'b')},
			{"HolderLengthNegativeAsInt", binary.AppendUvarint(bytes.Clone(head), 1<<63)},
			{"HolderLengthMaxUint64", binary.AppendUvarint(bytes.Clone(head), math.MaxUint64)},
			{"HolderLengthHuge", binary.AppendUvarint(bytes.Clone(head), 1<<40)},
			{"UvarintOverflow", []byte{recordV1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1, 1, 1, 2, 0}},
			{"UvarintTooLong", []byte{recordV1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 1, 1, 1, 2, 0}},
			{"VarintOverflow", []byte{recordV1, 1, 1, 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0}},
			{"UnterminatedVarint", []byte{recordV1, 1, 1, 1, 1, 0x80}},
			{"AllOnes", bytes.Repeat([]byte{0xff}, 64)},
			{"EntryRecord", EncodeEntry(Entry{Value: []byte("v"), Rev: 1, Token: 1})},
		} {
			t.Run(c.name, func(t *testing.T) {
				if got, err := DecodeResource(c.b); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("DecodeResource(%x)=%+v, %v; want ErrCorrupt", c.b, got, err)
				}
			})
		}
	})
}

var testEntries = []Entry{
	{Value: []byte{}},
	{Value: []byte("hello"), Rev: 42, Token: 7},
	{Value: []byte{0, 1, 0xff}, Rev: math.MaxUint64, Token: fence.MaxToken},
	{Value: bytes.Repeat([]byte("x"), fence.MaxValueSize), Rev: 1 << 40, Token: 1 << 20},
}

func equalEntry(a, b Entry) bool {
	return a.Rev == b.Rev && a.Token == b.Token && bytes.Equal(a.Value, b.Value)
}

func TestDecodeEntry(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		for _, e := range testEntries {
			got, err := DecodeEntry(EncodeEntry(e))
			if err != nil {
				t.Fatalf("DecodeEntry(EncodeEntry(rev %d)): %v", e.Rev, err)
			}
			if !equalEntry(got, e) {
				t.Fatalf("DecodeEntry(EncodeEntry(e)): Rev=%d Token=%d len(Value)=%d, want %d %d %d",
					got.Rev, got.Token, len(got.Value), e.Rev, e.Token, len(e.Value))
			}
		}
	})

	// Without its header, an entry is corrupt; after it, the rest is the value.
	t.Run("Truncated", func(t *testing.T) {
		for _, e := range testEntries {
			b := EncodeEntry(e)
			header := len(b) - len(e.Value)
			for n := range header {
				if got, err := DecodeEntry(b[:n]); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("DecodeEntry(%x)=%+v, %v; want ErrCorrupt", b[:n], got, err)
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
				if got, err := DecodeEntry(c.b); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("DecodeEntry(%x)=%+v, %v; want ErrCorrupt", c.b, got, err)
				}
			})
		}
	})
}

// FuzzDecodeResource checks that DecodeResource never panics, that what it
// accepts survives a round trip, and that every resource built from the
// inputs does.
func FuzzDecodeResource(f *testing.F) {
	for _, r := range testResources {
		f.Add(EncodeResource(r), uint64(r.LastToken), uint64(r.LastFence), uint64(r.LeaseToken), int64(r.TTL), r.Expires, r.Holder, int64(r.Delay), r.Owner)
	}
	f.Add([]byte{recordV1, 1, 1, 1, 1, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, uint64(1), uint64(1), uint64(0), int64(0), int64(0), "", int64(0), "")
	f.Add([]byte{recordV3, 1, 1, 1, 1, 2, 1, 'h', 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, uint64(1), uint64(1), uint64(1), int64(0), int64(0), "h", int64(0), "o")
	f.Fuzz(func(t *testing.T, b []byte, lastToken, lastFence, leaseToken uint64, ttl, expires int64, holder string, delay int64, owner string) {
		if r, err := DecodeResource(b); err == nil {
			again, err := DecodeResource(EncodeResource(r))
			if err != nil || !same(again, r) {
				t.Fatalf("DecodeResource(EncodeResource(%+v))=%+v, %v", r, again, err)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("DecodeResource(%x): err=%v, want ErrCorrupt", b, err)
		}
		r := Resource{LastToken: fence.Token(lastToken), LastFence: fence.Token(lastFence), LeaseToken: fence.Token(leaseToken),
			Holder: holder, Owner: owner, TTL: time.Duration(ttl), Expires: expires, Delay: time.Duration(delay),
			Session: holder + owner, SessionToken: fence.Token(lastFence), // the inputs stay those of the corpus
			Members:     []SharedHolder{{Holder: owner, Owner: holder, TTL: time.Duration(delay), Expires: ttl}},
			RevokeGrace: time.Duration(expires)}
		got, err := DecodeResource(EncodeResource(r))
		if err != nil || !same(got, r) {
			t.Fatalf("DecodeResource(EncodeResource(%+v))=%+v, %v", r, got, err)
		}
	})
}

// FuzzDecodeEntry checks that DecodeEntry never panics, that what it accepts
// survives a round trip, and that every entry built from the inputs does.
func FuzzDecodeEntry(f *testing.F) {
	for _, e := range testEntries[:3] {
		f.Add(EncodeEntry(e), uint64(e.Rev), uint64(e.Token), e.Value)
	}
	f.Add([]byte{recordV1, 0x80}, uint64(1), uint64(1), []byte(nil))
	f.Fuzz(func(t *testing.T, b []byte, rev, token uint64, value []byte) {
		if e, err := DecodeEntry(b); err == nil {
			if !bytes.HasSuffix(b, e.Value) {
				t.Fatalf("DecodeEntry(%x): Value=%x, want a suffix of the record", b, e.Value)
			}
			again, err := DecodeEntry(EncodeEntry(e))
			if err != nil || !equalEntry(again, e) {
				t.Fatalf("DecodeEntry(EncodeEntry(%+v))=%+v, %v", e, again, err)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("DecodeEntry(%x): err=%v, want ErrCorrupt", b, err)
		}
		e := Entry{Value: value, Rev: fence.Rev(rev), Token: fence.Token(token)}
		got, err := DecodeEntry(EncodeEntry(e))
		if err != nil || !equalEntry(got, e) {
			t.Fatalf("DecodeEntry(EncodeEntry(%+v))=%+v, %v", e, got, err)
		}
	})
}
