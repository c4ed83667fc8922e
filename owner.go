package fence

import "context"

type ownerKey struct{}

// WithOwner returns a copy of ctx that carries owner, the principal on whose
// behalf a Locker call in ctx is made: the authenticated caller's name when
// the server checks credentials, "" (none) when it does not.
//
// A lease belongs to the principal that took it. Holder names are chosen by
// clients, so they prove nothing: a Locker that sees an owner refuses, with
// ErrForbidden, an acquire of a holder whose lease another principal holds,
// and a renew or release of another principal's lease, as if the token were
// a password nobody else may present. A lease that passes to a waiter
// belongs to the waiter's principal. The owner is recorded with the lease in
// the Ledger, so that it survives a restart or a failover. Without owners
// ("" everywhere) nothing is checked.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// OwnerOf returns the owner set by WithOwner, "" if none.
func OwnerOf(ctx context.Context) string {
	owner, _ := ctx.Value(ownerKey{}).(string)
	return owner
}
