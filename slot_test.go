package fence

import "testing"

func TestParseSlot(t *testing.T) {
	for _, tc := range []struct {
		name     string
		resource string
		i, n     int
		ok       bool
	}{
		{"jobs/permit-1-of-2", "jobs", 1, 2, true},
		{"a/b/permit-1000-of-1000", "a/b", 1000, 1000, true},
		{"x/permit-1-of-2/permit-3-of-3", "x/permit-1-of-2", 3, 3, true},
		{"jobs/permit-3-of-2", "", 0, 0, false},    // I > N
		{"jobs/permit-0-of-2", "", 0, 0, false},    // I from 1
		{"jobs/permit-01-of-2", "", 0, 0, false},   // leading zero
		{"jobs/permit-1-of-1001", "", 0, 0, false}, // above MaxPermits
		{"jobs/permit-1-of-+2", "", 0, 0, false},
		{"jobs/permit-1-of-", "", 0, 0, false},
		{"jobs/permit--of-2", "", 0, 0, false},
		{"/permit-1-of-2", "", 0, 0, false}, // no semaphore name
		{"jobs/permit-1-of-2x", "", 0, 0, false},
		{"jobs", "", 0, 0, false},
	} {
		resource, i, n, ok := ParseSlot(tc.name)
		if resource != tc.resource || i != tc.i || n != tc.n || ok != tc.ok {
			t.Errorf("ParseSlot(%q) = %q, %d, %d, %v; want %q, %d, %d, %v", tc.name, resource, i, n, ok, tc.resource, tc.i, tc.n, tc.ok)
		}
	}
}

// FuzzParseSlot checks that ParseSlot accepts exactly the names that
// SlotResource makes: what it parses, SlotResource writes back the same.
func FuzzParseSlot(f *testing.F) {
	for _, s := range []string{"jobs/permit-1-of-2", "a/permit-10-of-999", "x/permit-1-of-01", "/permit-1-of-1", "permit-1-of-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		resource, i, n, ok := ParseSlot(name)
		if !ok {
			return
		}
		if i < 1 || i > n || n > MaxPermits || resource == "" {
			t.Fatalf("ParseSlot(%q) = %q, %d, %d: out of range", name, resource, i, n)
		}
		if back := SlotResource(resource, i, n); back != name {
			t.Fatalf("ParseSlot(%q) = %q, %d, %d, which SlotResource writes %q", name, resource, i, n, back)
		}
	})
}

func TestValidateSemaphore(t *testing.T) {
	long := make([]byte, MaxNameLen-len("/permit-1000-of-1000"))
	for i := range long {
		long[i] = 'a'
	}
	if err := ValidateSemaphore(string(long), MaxPermits); err != nil {
		t.Errorf("the longest name: %v", err)
	}
	for _, tc := range []struct {
		name  string
		limit int
	}{{string(long) + "a", MaxPermits}, {"jobs", 0}, {"jobs", MaxPermits + 1}, {"jobs/permit-1-of-2", 2}, {"", 1}} {
		if err := ValidateSemaphore(tc.name, tc.limit); err == nil {
			t.Errorf("ValidateSemaphore(%.20q, %d) accepted", tc.name, tc.limit)
		}
	}
}
