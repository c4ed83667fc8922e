package zookeeper

import (
	"errors"
	"fmt"
	"strings"
)

// EscapeName returns the znode name of resource's fence: resource with
// every byte other than an ASCII letter, digit, '-', '_', '.' or '~'
// written as '%' and two upper-case hex digits ('/' is "%2F", '%' is "%25",
// "é" is "%C3%A9"). The names ZooKeeper forbids or reserves, "." and ".."
// (and "zookeeper", reserved at the top of the tree), have their first byte
// escaped too: "%2E", "%2E.", "%7Aookeeper". The result is a valid znode
// name, distinct for distinct resources, and UnescapeName returns resource
// from it.
func EscapeName(resource string) string {
	var b strings.Builder
	b.Grow(len(resource))
	for i := 0; i < len(resource); i++ {
		c := resource[i]
		reserved := i == 0 && (resource == "." || resource == ".." || resource == "zookeeper")
		if unreserved(c) && !reserved {
			b.WriteByte(c)
			continue
		}
		const hex = "0123456789ABCDEF"
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
	return b.String()
}

// UnescapeName returns the resource whose fence znode is named name: the
// inverse of EscapeName. It returns an error for a name that EscapeName does
// not return.
func UnescapeName(name string) (string, error) {
	var b strings.Builder
	b.Grow(len(name))
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '%' {
			if !unreserved(c) {
				return "", fmt.Errorf("zookeeper: fence znode name %q: byte %q is not escaped", name, c)
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(name) {
			return "", fmt.Errorf("zookeeper: fence znode name %q: %w", name, errShortEscape)
		}
		hi, ok1 := unhex(name[i+1])
		lo, ok2 := unhex(name[i+2])
		if !ok1 || !ok2 {
			return "", fmt.Errorf("zookeeper: fence znode name %q: bad escape %q", name, name[i:i+3])
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	r := b.String()
	if EscapeName(r) != name {
		return "", fmt.Errorf("zookeeper: fence znode name %q is not the escape of a resource name", name)
	}
	return r, nil
}

var errShortEscape = errors.New("'%' not followed by two hex digits")

// unreserved reports whether EscapeName keeps c as it is: RFC 3986's
// unreserved characters.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == '~'
}

// unhex decodes an upper-case hex digit, as EscapeName writes them.
func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
