package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/fence-lock/fence"
)

// Go's encoding/json accepts unknown members, duplicate members (the last
// wins), member names in the wrong case, and null or a missing member as the
// zero value, and it replaces invalid UTF-8 and lone surrogates with U+FFFD.
// Each of those would let a malformed request through, or make two different
// requests mean the same, so the decoders below walk objects themselves and
// decode every member by an explicit rule.

// member is one member of a JSON object, with its value undecoded.
type member struct {
	name  string
	value json.RawMessage
}

// badRequest returns an error wrapping fence.ErrBadRequest.
func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{fence.ErrBadRequest}, args...)...)
}

// checkText rejects a body that is not valid UTF-8 or holds an escaped lone
// surrogate (\ud800), which encoding/json would silently turn into U+FFFD.
func checkText(data []byte) error {
	if !utf8.Valid(data) {
		return badRequest("body is not valid UTF-8")
	}
	// A backslash occurs only inside strings of valid JSON, and the syntax is
	// checked later, so a plain scan finds every \u escape.
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		if i+1 < len(data) && data[i+1] != 'u' {
			i++ // skip the escaped character, which may be a backslash
			continue
		}
		r, ok := hex4(data, i+2)
		if !ok {
			continue // a syntax error, reported when the object is read
		}
		switch {
		case r >= 0xD800 && r < 0xDC00:
			lo, ok := hex4(data, i+8)
			if !ok || i+7 >= len(data) || data[i+6] != '\\' || data[i+7] != 'u' || lo < 0xDC00 || lo > 0xDFFF {
				return badRequest("body has a lone surrogate \\u%04x", r)
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return badRequest("body has a lone surrogate \\u%04x", r)
		default:
			i += 5
		}
	}
	return nil
}

// hex4 decodes the four hex digits at data[i:i+4].
func hex4(data []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(data) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(data[i:i+4]), 16, 16)
	return rune(v), err == nil
}

// maxMembers is the most members an object of a request may have, but for
// a txn's fences (fence.MaxTxnEntries): none has more than a few known
// ones, so more is a bad_request, as an unknown member is.
const maxMembers = 64

// members returns the members of the JSON object in data, in order. It
// rejects anything but one object (with nothing after it), duplicate names
// and more than maxMembers members; unknownMember checks the names.
func members(what string, data []byte) ([]member, error) {
	return membersUpTo(what, data, maxMembers, fence.ErrBadRequest)
}

// membersUpTo is members with at most limit members: past it, it stops
// reading and returns an error wrapping tooMany, so that the cost of an
// object does not grow with what it holds beyond the limit.
//
// It reads data in one pass, without a json.Decoder (whose tokens allocate):
// it checks the object's own grammar (braces, names, colons, commas) and
// finds the extent of each value with skipValue, which json.Valid then
// checks, so it accepts exactly the objects that are valid JSON.
func membersUpTo(what string, data []byte, limit int, tooMany error) ([]member, error) {
	i := skipSpace(data, 0)
	if i == len(data) {
		return nil, badRequest("%s: empty, want a JSON object", what)
	}
	if data[i] != '{' {
		if !json.Valid(data) {
			return nil, syntaxError(what, data)
		}
		return nil, badRequest("%s: want a JSON object", what)
	}
	var ms []member
	var seen map[string]bool // past a few members, so that finding duplicates stays linear
	end, err := eachItem(data, i+1, '}', func(i int) (int, error) {
		raw, next, err := value(data, i)
		if err != nil || raw[0] != '"' {
			return 0, errSyntax
		}
		name, err := unquote(raw)
		if err != nil { // cannot happen: json.Valid accepted raw
			return 0, badRequest("%s: %v", what, err)
		}
		if len(ms) == limit {
			return 0, fmt.Errorf("%w: %s has more than %d members", tooMany, what, limit)
		}
		dup := false
		if seen != nil {
			dup = seen[name]
		} else {
			for _, m := range ms {
				dup = dup || m.name == name
			}
			if len(ms) == 8 {
				seen = make(map[string]bool)
				for _, m := range ms {
					seen[m.name] = true
				}
			}
		}
		if dup {
			return 0, badRequest("%s: duplicate member %q", what, name)
		}
		if seen != nil {
			seen[name] = true
		}
		if i = skipSpace(data, next); i == len(data) || data[i] != ':' {
			return 0, errSyntax
		}
		v, next, err := value(data, i+1)
		if err != nil {
			return 0, err
		}
		ms = append(ms, member{name, v})
		return next, nil
	})
	switch {
	case errors.Is(err, errSyntax):
		return nil, syntaxError(what, data)
	case err != nil:
		return nil, err
	case skipSpace(data, end) != len(data):
		return nil, badRequest("%s: data after the JSON object", what)
	}
	return ms, nil
}

// elements returns the elements of the JSON array v, at most limit of them:
// past it, it stops reading and returns an error wrapping fence.ErrTooLarge.
// It reads v as membersUpTo reads an object.
func elements(what string, v json.RawMessage, limit int) ([]json.RawMessage, error) {
	if len(v) == 0 || v[0] != '[' {
		return nil, badRequest("%s must be an array", what)
	}
	var es []json.RawMessage
	end, err := eachItem(v, 1, ']', func(i int) (int, error) {
		if len(es) == limit {
			return 0, fmt.Errorf("%w: %s has more than %d elements", fence.ErrTooLarge, what, limit)
		}
		e, next, err := value(v, i)
		if err == nil {
			es = append(es, e)
		}
		return next, err
	})
	if errors.Is(err, errSyntax) || err == nil && skipSpace(v, end) != len(v) {
		return nil, syntaxError(what, v)
	}
	if err != nil {
		return nil, err
	}
	return es, nil
}

// errSyntax stands for a syntax error, which syntaxError then describes.
var errSyntax = errors.New("JSON syntax error")

// eachItem reads the items of the object or array whose opening bracket is
// data[i-1] and whose closing one is close: item reads one item from its
// first byte and returns the index after it, and eachItem checks the commas
// between items and returns the index after the closing bracket.
func eachItem(data []byte, i int, close byte, item func(i int) (int, error)) (int, error) {
	if i = skipSpace(data, i); i < len(data) && data[i] == close {
		return i + 1, nil
	}
	for {
		next, err := item(i)
		if err != nil {
			return 0, err
		}
		if i = skipSpace(data, next); i == len(data) {
			return 0, errSyntax
		}
		switch data[i] {
		case close:
			return i + 1, nil
		case ',':
			i = skipSpace(data, i+1)
		default:
			return 0, errSyntax
		}
	}
}

// value returns the JSON value at data[i], after whitespace, and the index
// after it; errSyntax if it is not valid JSON.
func value(data []byte, i int) (json.RawMessage, int, error) {
	v, next := skipValue(data, skipSpace(data, i))
	if len(v) == 0 || !json.Valid(v) {
		return nil, 0, errSyntax
	}
	return v, next, nil
}

// skipSpace returns the index of the first byte of data at or after i that
// is not JSON whitespace.
func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the JSON value that starts at data[i], unchecked, and the
// index after it. For a valid value it finds exactly its extent: a string
// ends at its first unescaped quote, an object or array at the bracket that
// closes it (brackets in strings not counted), anything else (a number,
// true, false, null) before the next comma, closing bracket or whitespace
// outside strings and brackets. Whatever it returns for an invalid one,
// json.Valid refuses.
func skipValue(data []byte, i int) (json.RawMessage, int) {
	start, depth := i, 0
	for i < len(data) {
		switch c := data[i]; c {
		case '"':
			i++
			for i < len(data) && data[i] != '"' {
				if data[i] == '\\' {
					i++
				}
				i++
			}
			i++
		case '{', '[':
			depth++
			i++
		case '}', ']':
			if depth == 0 {
				return data[start:i], i
			}
			depth--
			i++
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return data[start:i], i
			}
			i++
		default:
			i++
		}
		if depth == 0 && (data[start] == '"' || data[start] == '{' || data[start] == '[') {
			break
		}
	}
	i = min(i, len(data))
	return data[start:i], i
}

// syntaxError returns a bad_request saying what is wrong with data, which
// is not valid JSON: encoding/json's message, which checks the syntax
// before it decodes anything.
func syntaxError(what string, data []byte) error {
	var v json.RawMessage
	if err := json.Unmarshal(data, &v); err != nil {
		return badRequest("%s: %v", what, err)
	}
	return badRequest("%s: malformed JSON", what)
}

// unquote decodes the JSON string raw; one without escapes, control
// characters or invalid UTF-8 is taken as it is.
func unquote(raw json.RawMessage) (string, error) {
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' && plainText(raw[1:n-1]) {
		return string(raw[1 : n-1]), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", err
	}
	return s, nil
}

// plainText reports whether b is valid UTF-8 without quotes, backslashes or
// control characters: a JSON string's contents that mean themselves.
func plainText(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return utf8.Valid(b)
}

// get returns the value of the member called name, or nil.
func get(ms []member, name string) json.RawMessage {
	for _, m := range ms {
		if m.name == name {
			return m.value
		}
	}
	return nil
}

// str decodes the JSON string v.
func str(what string, v json.RawMessage) (string, error) {
	if len(v) < 2 || v[0] != '"' {
		return "", badRequest("%s must be a string", what)
	}
	s, err := unquote(v)
	if err != nil {
		return "", badRequest("%s: %v", what, err)
	}
	return s, nil
}

// integer decodes v as a JSON integer literal (no fraction, no exponent) in
// lo..hi; it reports false for anything else.
func integer(v json.RawMessage, lo, hi int64) (int64, bool) {
	s := string(v)
	digits := s
	if len(digits) > 0 && digits[0] == '-' && lo < 0 { // and so no -0 where lo is 0
		digits = digits[1:]
	}
	if digits == "" {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, false
	}
	return n, true
}

// millis decodes an optional duration in milliseconds in lo..hi; an absent
// member gives def.
func millis(what string, v json.RawMessage, lo, hi, def int64) (time.Duration, error) {
	if v == nil {
		return time.Duration(def) * time.Millisecond, nil
	}
	n, ok := integer(v, lo, hi)
	if !ok {
		return 0, badRequest("%s must be an integer in %d..%d, not %s", what, lo, hi, clip(v))
	}
	return time.Duration(n) * time.Millisecond, nil
}

// jsonToken decodes a fencing token: a JSON integer literal in 1..MaxToken.
// Anything else, a string "5" and null included, wraps fence.ErrInvalidToken.
func jsonToken(what string, v json.RawMessage) (fence.Token, error) {
	t, err := fence.ParseToken(string(v)) // digits only, so 1.5, 1e3, -1, "5" and null all fail
	if err != nil {
		return 0, fmt.Errorf("%w: %s %s is not an integer in 1..%d", fence.ErrInvalidToken, what, clip(v), fence.MaxToken)
	}
	return t, nil
}

// clip shortens a raw value for an error message.
func clip(v json.RawMessage) string {
	const n = 40
	if len(v) > n {
		return string(v[:n]) + "..."
	}
	return string(v)
}

// decodeObject checks that data is UTF-8 text and returns the members of the
// one JSON object in it.
func decodeObject(what string, data []byte, allowed ...string) ([]member, error) {
	if err := checkText(data); err != nil {
		return nil, err
	}
	ms, err := members(what, data)
	if err != nil {
		return nil, err
	}
	return ms, unknownMember(what, ms, allowed...)
}

// unknownMember returns a bad_request naming the first member of ms whose name
// is not in allowed, or nil.
func unknownMember(what string, ms []member, allowed ...string) error {
	for _, m := range ms {
		if !slices.Contains(allowed, m.name) {
			return badRequest("%s: unknown member %q", what, m.name)
		}
	}
	return nil
}
