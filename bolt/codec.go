package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/state"
)

// Record formats. Each starts with a version byte so that a later format can
// be told apart; integers are unsigned varints, strings and values are
// length-prefixed (resources) or the remaining bytes (entries).
const recordV1 = 1

var errCorrupt = errors.New("bolt: corrupt record")

func encodeResource(r state.Resource) []byte {
	b := make([]byte, 0, 48+len(r.Holder))
	b = append(b, recordV1)
	b = binary.AppendUvarint(b, uint64(r.LastToken))
	b = binary.AppendUvarint(b, uint64(r.LastFence))
	b = binary.AppendUvarint(b, uint64(r.LeaseToken))
	b = binary.AppendUvarint(b, uint64(r.TTL))
	b = binary.AppendVarint(b, r.Expires)
	b = binary.AppendUvarint(b, uint64(len(r.Holder)))
	return append(b, r.Holder...)
}

func decodeResource(b []byte) (state.Resource, error) {
	d := decoder{b: b}
	if d.byte() != recordV1 {
		return state.Resource{}, fmt.Errorf("%w: resource record version", errCorrupt)
	}
	r := state.Resource{
		LastToken:  fence.Token(d.uvarint()),
		LastFence:  fence.Token(d.uvarint()),
		LeaseToken: fence.Token(d.uvarint()),
		TTL:        time.Duration(d.uvarint()),
		Expires:    d.varint(),
	}
	r.Holder = string(d.bytes(d.uvarint()))
	if d.err != nil || len(d.b) != 0 {
		return state.Resource{}, fmt.Errorf("%w: resource record", errCorrupt)
	}
	return r, nil
}

func encodeEntry(e state.Entry) []byte {
	b := make([]byte, 0, 21+len(e.Value))
	b = append(b, recordV1)
	b = binary.AppendUvarint(b, uint64(e.Rev))
	b = binary.AppendUvarint(b, uint64(e.Token))
	return append(b, e.Value...)
}

// decodeEntry decodes an entry; its Value aliases b.
func decodeEntry(b []byte) (state.Entry, error) {
	d := decoder{b: b}
	if d.byte() != recordV1 {
		return state.Entry{}, fmt.Errorf("%w: entry version", errCorrupt)
	}
	e := state.Entry{Rev: fence.Rev(d.uvarint()), Token: fence.Token(d.uvarint())}
	if d.err != nil {
		return state.Entry{}, fmt.Errorf("%w: entry", errCorrupt)
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
		d.err = errCorrupt
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if d.err != nil || n <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if d.err != nil || n <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(n uint64) []byte {
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = errCorrupt
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

// entryKey is resource, a zero byte, then key: names contain no control
// characters, so the zero byte cannot occur inside either.
func entryKey(resource, key string) []byte {
	b := make([]byte, 0, len(resource)+1+len(key))
	b = append(b, resource...)
	b = append(b, 0)
	return append(b, key...)
}
