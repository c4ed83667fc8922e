package fence

import "strings"

// Unfenced names best-effort resources by prefix, as fence serve --unfenced
// does: data whose writers may skip fencing because two of them at once only
// waste work (a cache fill from the same source). A guard with Unfenced set
// applies a write of such a resource that comes with token 0 without the
// fence: it is neither checked nor raised. A write with a token is checked
// as any other, claims always need a token, and every other resource needs
// one. Ledgers, inventory and bookings must never be unfenced.
type Unfenced []string

// Has reports whether resource is a best-effort resource.
func (u Unfenced) Has(resource string) bool {
	for _, p := range u {
		if strings.HasPrefix(resource, p) {
			return true
		}
	}
	return false
}
