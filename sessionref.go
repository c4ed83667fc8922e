package fence

import (
	"context"
	"fmt"
	"strings"
)

// SessionPrefix begins the name of every session resource.
const SessionPrefix = ".session/"

// SessionResource returns the name of the resource of the session called
// name: SessionPrefix + name.
//
// A session is one keepalive for many leases. It is itself an exclusive
// lease on its session resource: acquiring that resource opens the
// session, renewing it renews the session, releasing it closes the
// session, and its expiry or a revoke ends it. A lease acquired in the
// session (WithSession) has the session's TTL and lives as long as the
// session does: renewing the session renews it, and the session's end
// ends it, released with a release, expired with an expiry and revoked
// with a revoke. Each lease keeps its own token and fence.
func SessionResource(name string) string { return SessionPrefix + name }

// IsSessionResource reports whether resource is the resource of a session.
func IsSessionResource(resource string) bool {
	return strings.HasPrefix(resource, SessionPrefix) && len(resource) > len(SessionPrefix)
}

// SessionRef names a session: its resource and the token of the lease on
// it that is the session. A session resource acquired again is a new
// session, with a new token.
type SessionRef struct {
	Resource string
	Token    Token
}

// IsZero reports whether r names no session.
func (r SessionRef) IsZero() bool { return r.Resource == "" && r.Token == 0 }

// Validate returns an error wrapping ErrBadRequest unless r names a
// session: a session resource and a token.
func (r SessionRef) Validate() error {
	if err := ValidateResource(r.Resource); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	if !IsSessionResource(r.Resource) {
		return fmt.Errorf("%w: session %q is not a session resource (they begin with %q)", ErrBadRequest, r.Resource, SessionPrefix)
	}
	if r.Token == 0 {
		return fmt.Errorf("%w: session %q without its token", ErrBadRequest, r.Resource)
	}
	return nil
}

type sessionKey struct{}

// WithSession returns a copy of ctx in which a Locker's acquire, and a
// Ledger's grant, put the lease in session ref (see SessionResource). The
// caller must own the session.
func WithSession(ctx context.Context, ref SessionRef) context.Context {
	return context.WithValue(ctx, sessionKey{}, ref)
}

// SessionOf returns the session set by WithSession, the zero SessionRef if
// none.
func SessionOf(ctx context.Context) SessionRef {
	ref, _ := ctx.Value(sessionKey{}).(SessionRef)
	return ref
}
