package redis

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fence-lock/fence"
)

// opKind is the kind of an Op; its value is the op's code in the script.
type opKind byte

const (
	opSet    opKind = 'S'
	opDel    opKind = 'D'
	opHSet   opKind = 'H'
	opIncrBy opKind = 'I'
	opCAS    opKind = 'C'
)

func (k opKind) String() string {
	switch k {
	case opSet:
		return "SET"
	case opDel:
		return "DEL"
	case opHSet:
		return "HSET"
	case opIncrBy:
		return "INCRBY"
	case opCAS:
		return "compare-and-set"
	}
	return "invalid op"
}

// Op is one write that Guard.Apply applies atomically with the fence check.
// Build it with Set, Del, HSet, IncrBy or CompareAndSet; the zero Op is
// invalid and makes Apply fail with fence.ErrBadRequest.
type Op struct {
	kind   opKind
	key    string
	field  string        // HSet
	value  []byte        // Set, HSet; the new value of CompareAndSet
	old    []byte        // CompareAndSet
	hasOld bool          // CompareAndSet: false means the key must not exist
	n      int64         // IncrBy
	ttl    time.Duration // Set
}

// Set stores value under key, like SET key value [PX ttl]. A ttl of 0 means
// no expiry (and, as with SET, removes an expiry the key had); a ttl under a
// millisecond is rounded up to one, and a negative ttl is invalid.
func Set(key string, value []byte, ttl time.Duration) Op {
	return Op{kind: opSet, key: key, value: value, ttl: ttl}
}

// Del deletes key, like DEL key. Deleting a missing key is not an error.
func Del(key string) Op { return Op{kind: opDel, key: key} }

// HSet sets field of the hash at key to value, like HSET key field value. It
// fails with ErrWrongType if key holds something other than a hash.
func HSet(key, field string, value []byte) Op {
	return Op{kind: opHSet, key: key, field: field, value: value}
}

// IncrBy adds n to the integer at key, like INCRBY key n (a missing key
// counts as 0). It fails with ErrNotInteger if the value is not a 64-bit
// integer or the sum overflows, and with ErrWrongType if key holds something
// other than a string.
func IncrBy(key string, n int64) Op { return Op{kind: opIncrBy, key: key, n: n} }

// CompareAndSet stores new under key (with no expiry, like SET) if key holds
// exactly old; if old is nil, if key does not exist. Otherwise Apply fails
// with an error wrapping fence.ErrPreconditionFailed and changes nothing. A
// non-nil empty old matches an existing empty string. A key that holds
// something other than a string fails with ErrWrongType (or, when old is nil,
// with fence.ErrPreconditionFailed: it exists).
func CompareAndSet(key string, old, new []byte) Op {
	return Op{kind: opCAS, key: key, old: old, hasOld: old != nil, value: new}
}

// args appends the op's four script arguments: its kind and three operands.
func (op Op) args(args []any) []any {
	switch op.kind {
	case opSet:
		return append(args, "S", op.value, ttlMillis(op.ttl), "")
	case opDel:
		return append(args, "D", "", "", "")
	case opHSet:
		return append(args, "H", op.field, op.value, "")
	case opIncrBy:
		return append(args, "I", strconv.FormatInt(op.n, 10), "", "")
	default: // opCAS, checked by check
		has := "0"
		if op.hasOld {
			has = "1"
		}
		return append(args, "C", has, op.old, op.value)
	}
}

// ttlMillis returns ttl in whole milliseconds, rounded up, as SET's PX wants
// it; "0" means no expiry.
func ttlMillis(ttl time.Duration) string {
	ms := ttl / time.Millisecond
	if ttl%time.Millisecond != 0 {
		ms++
	}
	return strconv.FormatInt(int64(ms), 10)
}

// check returns an error unless op can be sent for a resource whose fence
// key is in slot: it must be built by a constructor, with a valid ttl, and
// a key that is in that slot and is not a fence key.
func (op Op) check(resource string, slot int) error {
	switch op.kind {
	case opSet, opDel, opHSet, opIncrBy, opCAS:
	default:
		return fmt.Errorf("%w: the zero Op; build ops with Set, Del, HSet, IncrBy or CompareAndSet", fence.ErrBadRequest)
	}
	if op.key == "" {
		return fmt.Errorf("%w: %s of an empty key", fence.ErrBadRequest, op.kind)
	}
	if op.kind == opSet && op.ttl < 0 {
		return fmt.Errorf("%w: SET %q with a negative ttl %s", fence.ErrBadRequest, op.key, op.ttl)
	}
	if strings.HasPrefix(op.key, fenceKeyPrefix) {
		return fmt.Errorf("%w: %s %q: keys beginning with %q are fence keys", fence.ErrBadRequest, op.kind, op.key, fenceKeyPrefix)
	}
	if s := Slot(op.key); s != slot {
		return &CrossSlotError{Resource: resource, Key: op.key, Slot: s, FenceSlot: slot}
	}
	return nil
}
