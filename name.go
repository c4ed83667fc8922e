package fence

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on names, in bytes.
const (
	MaxNameLen   = 512 // resource and key names
	MaxHolderLen = 256 // holder ids
	MaxValueSize = 1 << 20
)

// ValidateResource returns an error wrapping ErrBadRequest unless name is a valid
// resource name: 1..MaxNameLen bytes of valid UTF-8 without control characters.
func ValidateResource(name string) error {
	return validateText("resource", name, MaxNameLen)
}

// ValidateHolder returns an error wrapping ErrBadRequest unless holder is
// 1..MaxHolderLen bytes of valid UTF-8 without control characters.
func ValidateHolder(holder string) error {
	return validateText("holder", holder, MaxHolderLen)
}

// ValidateKey returns an error wrapping ErrBadRequest unless key is a valid key:
// a resource name that may contain '/', but no empty, "." or ".." segment.
func ValidateKey(key string) error {
	if err := validateText("key", key, MaxNameLen); err != nil {
		return err
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: key %q has an empty, \".\" or \"..\" segment", ErrBadRequest, key)
		}
	}
	return nil
}

func validateText(what, s string, maxLen int) error {
	switch {
	case len(s) == 0:
		return fmt.Errorf("%w: %s is empty", ErrBadRequest, what)
	case len(s) > maxLen:
		return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrBadRequest, what, len(s), maxLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrBadRequest, what)
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: %s %q contains a control character", ErrBadRequest, what, s)
	}
	return nil
}

// MaxPermits is the largest limit of a semaphore (see PermitAcquirer).
const MaxPermits = 1000

// slotInfix separates a semaphore's name from the number of one of its
// permits in the name of that permit's slot resource.
const slotInfix = "/permit-"

// SlotResource returns the name of the slot resource of permit i (1..n) of
// the semaphore named resource with limit n: resource + "/permit-I-of-N".
// Each permit is an exclusive lease on its slot, with the slot's own tokens
// and fence.
func SlotResource(resource string, i, n int) string {
	return resource + slotInfix + strconv.Itoa(i) + "-of-" + strconv.Itoa(n)
}

// ParseSlot reports whether name is the name of a semaphore's slot resource
// (as SlotResource makes them: I and N decimal without leading zeros, 1 <= I
// <= N <= MaxPermits), and if so returns the semaphore's name, I and N.
func ParseSlot(name string) (resource string, i, n int, ok bool) {
	at := strings.LastIndex(name, slotInfix)
	if at <= 0 {
		return "", 0, 0, false
	}
	is, ns, found := strings.Cut(name[at+len(slotInfix):], "-of-")
	if !found {
		return "", 0, 0, false
	}
	i, iok := parsePermitNumber(is)
	n, nok := parsePermitNumber(ns)
	if !iok || !nok || i > n {
		return "", 0, 0, false
	}
	return name[:at], i, n, true
}

// parsePermitNumber parses 1..MaxPermits written in decimal without a sign
// or leading zeros.
func parsePermitNumber(s string) (int, bool) {
	if s == "" || len(s) > 4 || s[0] == '0' {
		return 0, false
	}
	v := 0
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, v <= MaxPermits
}

// ValidateSemaphore returns an error wrapping ErrBadRequest unless resource
// may name a semaphore with limit n: a valid resource name that is neither
// a slot resource nor a session's, whose slot names fit in MaxNameLen, and
// n in 1..MaxPermits.
func ValidateSemaphore(resource string, n int) error {
	if err := ValidateResource(resource); err != nil {
		return err
	}
	if n < 1 || n > MaxPermits {
		return fmt.Errorf("%w: limit %d is outside 1..%d", ErrBadRequest, n, MaxPermits)
	}
	if _, _, _, ok := ParseSlot(resource); ok {
		return fmt.Errorf("%w: resource %q is the slot of a permit, not a semaphore", ErrBadRequest, resource)
	}
	if IsSessionResource(resource) {
		return fmt.Errorf("%w: resource %q is a session's, not a semaphore", ErrBadRequest, resource)
	}
	if l := len(SlotResource(resource, n, n)); l > MaxNameLen {
		return fmt.Errorf("%w: resource %q is too long for a semaphore: its slots' names would be %d bytes, more than %d", ErrBadRequest, resource, l, MaxNameLen)
	}
	return nil
}
