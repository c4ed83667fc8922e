// Package auth authenticates bearer tokens against a table read from a file
// and authorises requests by permission and resource-name prefix.
//
// # File format
//
// One token per line:
//
//	<name> <sha256-hex of the token> <perm>:<prefix> [<perm>:<prefix> ...]
//
// Blank lines and lines whose first non-blank character is '#' are ignored.
// Fields are separated by spaces or tabs. name is a label for logs; it must
// be unique. The second field is the lower- or upper-case hex SHA-256 of the
// token (HashToken computes it); the file never holds tokens themselves.
// perm is one of lock (acquire, renew, release, transfer), write, read or admin. prefix
// is a resource-name prefix, or "*" for every resource. For example:
//
//	# orders service: lock and write its own resources, read everything
//	orders  9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  lock:orders/ write:orders/ read:*
//	ops     60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752  admin:*
//
// A grant's prefix is a plain string prefix: "orders" matches "orders",
// "orders/1" and also "orders-archive". End prefixes with a separator
// ("orders/") to grant one family of names only. Permissions do not imply
// each other: admin does not grant read.
package auth

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/fence-lock/fence"
)

// Perm is a permission a grant gives.
type Perm string

// The permissions.
const (
	PermLock  Perm = "lock"  // acquire, renew, release, transfer
	PermWrite Perm = "write" // storage writes: put, delete, claim, txn
	PermRead  Perm = "read"  // storage reads and lock status
	PermAdmin Perm = "admin" // revoke, and /metrics when protected
)

// AllPrefixes is the prefix that matches every resource.
const AllPrefixes = "*"

func validPerm(p Perm) bool {
	switch p {
	case PermLock, PermWrite, PermRead, PermAdmin:
		return true
	}
	return false
}

// Grant is a permission on the resources whose names start with Prefix
// ("*" for all).
type Grant struct {
	Perm   Perm
	Prefix string
}

// Principal is an authenticated token's holder.
type Principal struct {
	Name   string
	Grants []Grant
	hash   [sha256.Size]byte
}

// Allowed reports whether p may use perm on resource: whether one of its
// grants has perm and a prefix of resource (a string prefix; see the package
// doc) or "*".
func (p *Principal) Allowed(perm Perm, resource string) bool {
	if p == nil {
		return false
	}
	for _, g := range p.Grants {
		if g.Perm == perm && (g.Prefix == AllPrefixes || strings.HasPrefix(resource, g.Prefix)) {
			return true
		}
	}
	return false
}

// Table is a parsed auth file. It is immutable and safe for concurrent use.
type Table struct {
	principals []*Principal
}

// HashToken returns the lower-case hex SHA-256 of token, as the auth file
// holds it.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Parse reads an auth file. It rejects the whole file on the first bad line,
// naming the line.
func Parse(r io.Reader) (*Table, error) {
	t := &Table{}
	names := map[string]bool{}
	hashes := map[[sha256.Size]byte]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			return nil, fmt.Errorf("auth: line %d: want <name> <sha256-hex> <perm>:<prefix>..., got %d field(s)", n, len(f))
		}
		p := &Principal{Name: f[0]}
		if names[p.Name] {
			return nil, fmt.Errorf("auth: line %d: duplicate name %q", n, p.Name)
		}
		if len(f[1]) != hex.EncodedLen(sha256.Size) {
			return nil, fmt.Errorf("auth: line %d: %q: hash must be %d hex digits (the SHA-256 of the token, not the token)", n, p.Name, hex.EncodedLen(sha256.Size))
		}
		if _, err := hex.Decode(p.hash[:], []byte(f[1])); err != nil {
			return nil, fmt.Errorf("auth: line %d: %q: hash: %v", n, p.Name, err)
		}
		if hashes[p.hash] {
			return nil, fmt.Errorf("auth: line %d: %q: the same token hash appears on an earlier line", n, p.Name)
		}
		for _, g := range f[2:] {
			perm, prefix, ok := strings.Cut(g, ":")
			if !ok || !validPerm(Perm(perm)) {
				return nil, fmt.Errorf("auth: line %d: %q: grant %q: want <perm>:<prefix> with perm lock, write, read or admin", n, p.Name, g)
			}
			if prefix == "" {
				return nil, fmt.Errorf("auth: line %d: %q: grant %q: empty prefix (use %q for all resources)", n, p.Name, g, AllPrefixes)
			}
			p.Grants = append(p.Grants, Grant{Perm: Perm(perm), Prefix: prefix})
		}
		names[p.Name] = true
		hashes[p.hash] = true
		t.principals = append(t.principals, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("auth: line %d: %w", n+1, err)
	}
	return t, nil
}

// ParseFile reads the auth file at path.
func ParseFile(path string) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	defer f.Close()
	t, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Len returns the number of tokens in t.
func (t *Table) Len() int { return len(t.principals) }

// Principals returns t's principals in file order. Callers must not modify them.
func (t *Table) Principals() []*Principal { return slices.Clone(t.principals) }

// Authenticate returns the principal whose token is bearer. It compares the
// token's hash with every entry in constant time.
func (t *Table) Authenticate(bearer string) (*Principal, bool) {
	if t == nil || bearer == "" {
		return nil, false
	}
	sum := sha256.Sum256([]byte(bearer))
	var found *Principal
	for _, p := range t.principals {
		if subtle.ConstantTimeCompare(sum[:], p.hash[:]) == 1 {
			found = p
		}
	}
	return found, found != nil
}

// WriteTo writes t in the file format; Parse reads it back to the same table.
func (t *Table) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	for _, p := range t.principals {
		b.WriteString(p.Name)
		b.WriteByte(' ')
		b.WriteString(hex.EncodeToString(p.hash[:]))
		for _, g := range p.Grants {
			fmt.Fprintf(&b, " %s:%s", g.Perm, g.Prefix)
		}
		b.WriteByte('\n')
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// Reloader holds the current table of an auth file, swapped atomically by
// Load. The zero Reloader has no table and authenticates nobody.
type Reloader struct {
	cur atomic.Pointer[Table]
}

// Load parses the file at path and makes it the current table. On error it
// keeps the current table.
func (r *Reloader) Load(path string) error {
	t, err := ParseFile(path)
	if err != nil {
		return err
	}
	r.cur.Store(t)
	return nil
}

// Table returns the current table, nil before the first successful Load.
func (r *Reloader) Table() *Table { return r.cur.Load() }

// Authenticate authenticates bearer against the current table.
func (r *Reloader) Authenticate(bearer string) (*Principal, bool) {
	return r.cur.Load().Authenticate(bearer)
}

// Identify authenticates bearer against the current table: its principal,
// or an error wrapping fence.ErrUnauthorized for a missing or unknown token.
func (r *Reloader) Identify(bearer string) (*Principal, error) {
	p, ok := r.Authenticate(bearer)
	if !ok {
		if bearer == "" {
			return nil, fmt.Errorf("%w: no bearer token", fence.ErrUnauthorized)
		}
		return nil, fmt.Errorf("%w: unknown bearer token", fence.ErrUnauthorized)
	}
	return p, nil
}

// Check authenticates bearer and authorises perm on resource against the
// current table. It returns an error wrapping fence.ErrUnauthorized for a
// missing or unknown token and fence.ErrForbidden for a missing grant.
func (r *Reloader) Check(bearer string, perm Perm, resource string) (*Principal, error) {
	p, err := r.Identify(bearer)
	if err != nil {
		return nil, err
	}
	return p, p.authorize(perm, resource)
}

// authorize returns an error wrapping fence.ErrForbidden unless p may use
// perm on resource.
func (p *Principal) authorize(perm Perm, resource string) error {
	if !p.Allowed(perm, resource) {
		return fmt.Errorf("%w: %q has no %s permission on %q", fence.ErrForbidden, p.Name, perm, resource)
	}
	return nil
}

// RequestToken returns the token of an Authorization header value:
// "Bearer <token>", or "Basic <base64 of user:token>" (HTTP Basic, as
// browsers send it for the dashboard: the password is the token, the user
// name is ignored). Schemes are case-insensitive; any other value is "".
func RequestToken(authorization string) string {
	scheme, cred, ok := strings.Cut(authorization, " ")
	if !ok {
		return ""
	}
	cred = strings.TrimSpace(cred)
	switch {
	case strings.EqualFold(scheme, "Bearer"):
		return cred
	case strings.EqualFold(scheme, "Basic"):
		b, err := base64.StdEncoding.DecodeString(cred)
		if err != nil {
			return ""
		}
		_, tok, ok := strings.Cut(string(b), ":")
		if !ok {
			return ""
		}
		return tok
	}
	return ""
}

// Principal returns the principal named name (an auth file's NAME column).
// fence serve uses it to map a verified client certificate's CommonName to
// that principal's grants.
func (t *Table) Principal(name string) (*Principal, bool) {
	if t == nil || name == "" {
		return nil, false
	}
	for _, p := range t.principals {
		if p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// IdentifyName returns the principal named name in the current table, or
// an error wrapping fence.ErrUnauthorized if there is none.
func (r *Reloader) IdentifyName(name string) (*Principal, error) {
	p, ok := r.cur.Load().Principal(name)
	if !ok {
		return nil, fmt.Errorf("%w: no principal named %q", fence.ErrUnauthorized, name)
	}
	return p, nil
}

// CheckName authorises perm on resource for the principal named name in the
// current table, as Check does for a bearer token. An unknown name is
// fence.ErrUnauthorized, a missing grant fence.ErrForbidden.
func (r *Reloader) CheckName(name string, perm Perm, resource string) (*Principal, error) {
	p, err := r.IdentifyName(name)
	if err != nil {
		return nil, err
	}
	return p, p.authorize(perm, resource)
}
