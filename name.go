package fence

import (
	"fmt"
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
