package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/fence-lock/fence"
)

// The binary records in which engines store state (bolt's values, etcd's
// values). Each starts with a version byte so that a later format can be
// told apart; integers are varints, strings and values are length-prefixed
// (resources) or the remaining bytes (entries).
//
// Resource records: version 1 is LastToken, LastFence, LeaseToken, TTL,
// Expires, Holder; version 2 (written since lock-delays are recorded)
// appends Delay; version 3 (written since leases record their owner)
// appends Owner; version 4 (written since leases may be in a session)
// appends Session and SessionToken; version 5 (written since shared
// holds) appends the number of Members and then each one's Holder, Owner,
// TTL and Expires; version 6 (written since revokes may be requested)
// appends RevokeGrace. Older versions decode with the fields
// they lack zero: no delay, no owner, no session, no shared group, no revoke requested. Entry records: version 1
// is Rev, Token, Value.
const (
	recordV1 = 1
	recordV2 = 2
	recordV3 = 3
	recordV4 = 4
	recordV5 = 5
	recordV6 = 6
)

// ErrCorrupt means a stored record does not decode.
var ErrCorrupt = errors.New("state: corrupt record")

// EncodeResource returns r as a record, in the newest format.
func EncodeResource(r Resource) []byte {
	n := 89 + len(r.Holder) + len(r.Owner) + len(r.Session)
	for _, m := range r.Members {
		n += 30 + len(m.Holder) + len(m.Owner)
	}
	b := make([]byte, 0, n)
	b = append(b, recordV6)
	b = binary.AppendUvarint(b, uint64(r.LastToken))
	b = binary.AppendUvarint(b, uint64(r.LastFence))
	b = binary.AppendUvarint(b, uint64(r.LeaseToken))
	b = binary.AppendUvarint(b, uint64(r.TTL))
	b = binary.AppendVarint(b, r.Expires)
	b = binary.AppendUvarint(b, uint64(len(r.Holder)))
	b = append(b, r.Holder...)
	b = binary.AppendVarint(b, int64(r.Delay))
	b = binary.AppendUvarint(b, uint64(len(r.Owner)))
	b = append(b, r.Owner...)
	b = binary.AppendUvarint(b, uint64(len(r.Session)))
	b = append(b, r.Session...)
	b = binary.AppendUvarint(b, uint64(r.SessionToken))
	b = appendMembers(b, r.Members)
	return binary.AppendVarint(b, int64(r.RevokeGrace))
}

// appendMembers appends the number of members and each one's Holder and
// Owner, length-prefixed, TTL and Expires.
func appendMembers(b []byte, members []SharedHolder) []byte {
	b = binary.AppendUvarint(b, uint64(len(members)))
	for _, m := range members {
		b = binary.AppendUvarint(b, uint64(len(m.Holder)))
		b = append(b, m.Holder...)
		b = binary.AppendUvarint(b, uint64(len(m.Owner)))
		b = append(b, m.Owner...)
		b = binary.AppendUvarint(b, uint64(m.TTL))
		b = binary.AppendVarint(b, m.Expires)
	}
	return b
}

// EncodeMembers returns the members of a shared group as bytes, in the
// format of a version 5 resource record's tail; nil for none.
func EncodeMembers(members []SharedHolder) []byte {
	if len(members) == 0 {
		return nil
	}
	return appendMembers(nil, members)
}

// DecodeMembers decodes what EncodeMembers returned; ErrCorrupt if it does
// not decode. Empty bytes are no members.
func DecodeMembers(b []byte) ([]SharedHolder, error) {
	if len(b) == 0 {
		return nil, nil
	}
	d := decoder{b: b}
	members := d.members()
	if d.err != nil || len(d.b) != 0 {
		return nil, fmt.Errorf("%w: shared holders", ErrCorrupt)
	}
	return members, nil
}

// DecodeResource decodes a record of any version; ErrCorrupt if it does not decode.
func DecodeResource(b []byte) (Resource, error) {
	d := decoder{b: b}
	version := d.byte()
	if version < recordV1 || version > recordV6 {
		return Resource{}, fmt.Errorf("%w: resource record version", ErrCorrupt)
	}
	r := Resource{
		LastToken:  fence.Token(d.uvarint()),
		LastFence:  fence.Token(d.uvarint()),
		LeaseToken: fence.Token(d.uvarint()),
		TTL:        time.Duration(d.uvarint()),
		Expires:    d.varint(),
	}
	r.Holder = string(d.bytes(d.uvarint()))
	if version >= recordV2 {
		r.Delay = time.Duration(d.varint())
	}
	if version >= recordV3 {
		r.Owner = string(d.bytes(d.uvarint()))
	}
	if version >= recordV4 {
		r.Session = string(d.bytes(d.uvarint()))
		r.SessionToken = fence.Token(d.uvarint())
	}
	if version >= recordV5 {
		r.Members = d.members()
	}
	if version >= recordV6 {
		r.RevokeGrace = time.Duration(d.varint())
	}
	if d.err != nil || len(d.b) != 0 {
		return Resource{}, fmt.Errorf("%w: resource record", ErrCorrupt)
	}
	return r, nil
}

// EncodeEntry returns e as a record.
func EncodeEntry(e Entry) []byte {
	b := make([]byte, 0, 21+len(e.Value))
	b = append(b, recordV1)
	b = binary.AppendUvarint(b, uint64(e.Rev))
	b = binary.AppendUvarint(b, uint64(e.Token))
	return append(b, e.Value...)
}

// DecodeEntry decodes an entry; its Value aliases b.
func DecodeEntry(b []byte) (Entry, error) {
	d := decoder{b: b}
	if d.byte() != recordV1 {
		return Entry{}, fmt.Errorf("%w: entry version", ErrCorrupt)
	}
	e := Entry{Rev: fence.Rev(d.uvarint()), Token: fence.Token(d.uvarint())}
	if d.err != nil {
		return Entry{}, fmt.Errorf("%w: entry", ErrCorrupt)
	}
	e.Value = d.b
	return e, nil
}

// decoder reads a record; the first failure sticks in err and later reads return zero.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.err = ErrCorrupt
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if d.err != nil || n <= 0 {
		d.err = ErrCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if d.err != nil || n <= 0 {
		d.err = ErrCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

// members reads what appendMembers wrote; nil for none.
func (d *decoder) members() []SharedHolder {
	n := d.uvarint()
	if n == 0 || d.err != nil {
		return nil
	}
	// Each member takes at least 4 bytes: a count beyond them is corrupt,
	// and allocates nothing.
	if n > uint64(len(d.b))/4 {
		d.err = ErrCorrupt
		return nil
	}
	members := make([]SharedHolder, n)
	for i := range members {
		m := &members[i]
		m.Holder = string(d.bytes(d.uvarint()))
		m.Owner = string(d.bytes(d.uvarint()))
		m.TTL = time.Duration(d.uvarint())
		m.Expires = d.varint()
	}
	return members
}

func (d *decoder) bytes(n uint64) []byte {
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = ErrCorrupt
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

// EntryKey is resource, a zero byte, then key: names contain no control
// characters, so the zero byte cannot occur inside either.
func EntryKey(resource, key string) []byte {
	b := make([]byte, 0, len(resource)+1+len(key))
	b = append(b, resource...)
	b = append(b, 0)
	return append(b, key...)
}
