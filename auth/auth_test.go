package auth

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fence-lock/fence"
)

func line(name, token string, grants ...string) string {
	return name + " " + HashToken(token) + " " + strings.Join(grants, " ") + "\n"
}

func TestParseErrors(t *testing.T) {
	h := HashToken("t")
	tests := []struct {
		name, in, want string
	}{
		{"too few fields", "a " + h + "\n", "line 1"},
		{"short hash", "# c\na abcd read:*\n", "line 2"},
		{"bad hex", "a " + strings.Repeat("z", 64) + " read:*\n", "line 1"},
		{"bad perm", "a " + h + " delete:*\n", "grant"},
		{"no colon", "a " + h + " read\n", "grant"},
		{"empty prefix", "a " + h + " read:\n", "empty prefix"},
		{"duplicate name", "a " + h + " read:*\n\na " + HashToken("u") + " read:*\n", "line 3: duplicate name"},
		{"duplicate hash", "a " + h + " read:*\nb " + h + " read:*\n", "line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse: err = %v, want containing %q", err, tt.want)
			}
		})
	}
}

func TestAuthenticateAllowed(t *testing.T) {
	in := "# tokens\n\n" +
		line("orders", "tok-orders", "lock:orders/", "write:orders/", "read:*") +
		"  # indented comment\n" +
		line("ops", "tok-ops", "admin:*") +
		line("loose", "tok-loose", "write:orders")
	tab, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if tab.Len() != 3 {
		t.Fatalf("Len = %d, want 3", tab.Len())
	}
	if _, ok := tab.Authenticate("nope"); ok {
		t.Error("unknown token authenticated")
	}
	if _, ok := tab.Authenticate(""); ok {
		t.Error("empty token authenticated")
	}
	if _, ok := tab.Authenticate(HashToken("tok-ops")); ok {
		t.Error("the hash itself authenticated")
	}
	tests := []struct {
		token    string
		perm     Perm
		resource string
		want     bool
	}{
		{"tok-orders", PermLock, "orders/1", true},
		{"tok-orders", PermWrite, "orders/1", true},
		{"tok-orders", PermWrite, "payments/1", false},
		{"tok-orders", PermRead, "payments/1", true},
		{"tok-orders", PermAdmin, "orders/1", false},
		{"tok-orders", PermLock, "orders-archive", false}, // "orders/" is not a prefix of it
		{"tok-ops", PermAdmin, "anything", true},
		{"tok-ops", PermRead, "anything", false}, // admin does not imply read
		// A prefix that is a prefix of another name matches that name too.
		{"tok-loose", PermWrite, "orders", true},
		{"tok-loose", PermWrite, "orders-archive", true},
		{"tok-loose", PermWrite, "order", false},
	}
	for _, tt := range tests {
		p, ok := tab.Authenticate(tt.token)
		if !ok {
			t.Fatalf("Authenticate(%q) failed", tt.token)
		}
		if got := p.Allowed(tt.perm, tt.resource); got != tt.want {
			t.Errorf("%s.Allowed(%s, %q) = %v, want %v", p.Name, tt.perm, tt.resource, got, tt.want)
		}
	}
}

func TestReloader(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "auth")
	var r Reloader
	if _, err := r.Check("x", PermRead, "a"); !errors.Is(err, fence.ErrUnauthorized) {
		t.Fatalf("empty Reloader: err = %v, want ErrUnauthorized", err)
	}
	if err := os.WriteFile(path, []byte(line("a", "ta", "read:a/")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Load(path); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Check("ta", PermRead, "a/1"); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if _, err := r.Check("ta", PermWrite, "a/1"); !errors.Is(err, fence.ErrForbidden) {
		t.Fatalf("Check write: err = %v, want ErrForbidden", err)
	}
	if _, err := r.Check("", PermRead, "a/1"); !errors.Is(err, fence.ErrUnauthorized) {
		t.Fatalf("Check no token: err = %v, want ErrUnauthorized", err)
	}
	// A bad file keeps the old table.
	if err := os.WriteFile(path, []byte("broken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Load(path); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("Load bad file: err = %v", err)
	}
	if _, err := r.Check("ta", PermRead, "a/1"); err != nil {
		t.Fatalf("after bad reload: %v", err)
	}
	// A good file replaces it.
	if err := os.WriteFile(path, []byte(line("b", "tb", "read:*")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Load(path); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Check("ta", PermRead, "a/1"); !errors.Is(err, fence.ErrUnauthorized) {
		t.Fatalf("old token after reload: err = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(line("a", "t", "read:*", "lock:orders/"))
	f.Add("# comment\n\n" + line("x", "y", "admin:*"))
	f.Add("a b c\n")
	f.Fuzz(func(t *testing.T, in string) {
		tab, err := Parse(strings.NewReader(in))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if _, err := tab.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		tab2, err := Parse(&buf)
		if err != nil {
			t.Fatalf("re-parse of %q: %v", buf.String(), err)
		}
		if tab.Len() != tab2.Len() {
			t.Fatalf("round trip: %d principals, then %d", tab.Len(), tab2.Len())
		}
		for i, p := range tab.principals {
			q := tab2.principals[i]
			if p.Name != q.Name || p.hash != q.hash || len(p.Grants) != len(q.Grants) {
				t.Fatalf("round trip: %+v, then %+v", p, q)
			}
			for j := range p.Grants {
				if p.Grants[j] != q.Grants[j] {
					t.Fatalf("round trip grant %d: %+v, then %+v", j, p.Grants[j], q.Grants[j])
				}
				g := p.Grants[j]
				if g.Prefix != AllPrefixes && !p.Allowed(g.Perm, g.Prefix+"x") {
					t.Fatalf("grant %+v does not allow its own prefix", g)
				}
			}
		}
	})
}

func TestRequestToken(t *testing.T) {
	basic := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	for in, want := range map[string]string{
		"Bearer abc": "abc", "bearer abc": "abc", "Bearer  abc ": "abc",
		basic("anyone:abc"): "abc", basic(":abc"): "abc", basic("a:b:c"): "b:c",
		basic("abc"): "", "Basic abc!": "", "Digest abc": "", "Bearer": "", "": "", "abc": "",
	} {
		if got := RequestToken(in); got != want {
			t.Errorf("RequestToken(%q) = %q, want %q", in, got, want)
		}
	}
}
