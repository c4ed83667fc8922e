package state

import (
	"context"
	"fmt"
	"time"

	"github.com/fence-lock/fence"
)

// The operations of fence.Ledger, the lock service's record per resource,
// each as its rule over a Tx and then the DB method that commits it: one
// place per operation.

// Grant records a new lease for holder, owned by owner and in session (none
// if zero), with the resource's next token and raises its fence to that
// token, so that every holder of an older token is fenced at once.
func Grant(tx Tx, resource, holder, owner string, session fence.SessionRef, ttl time.Duration, expires time.Time) (fence.Token, error) {
	r, err := tx.Resource(resource)
	if err != nil {
		return 0, err
	}
	if err := checkNextToken(resource, r); err != nil {
		return 0, err
	}
	token := r.LastToken + 1
	r.LastToken, r.LastFence = token, max(r.LastFence, token)
	r.LeaseToken, r.Holder, r.Owner, r.TTL, r.Expires = token, holder, owner, ttl, expires.UnixNano()
	r.Session, r.SessionToken = session.Resource, session.Token
	r.Members, r.RevokeGrace, r.Delay = nil, 0, 0
	if err := tx.SetResource(resource, r); err != nil {
		return 0, err
	}
	return token, nil
}

// Grant implements fence.Ledger: the lease is owned by fence.OwnerOf(ctx)
// and in the session fence.SessionOf(ctx).
func (db *DB) Grant(ctx context.Context, resource, holder string, ttl time.Duration, expires time.Time) (fence.Token, error) {
	var token fence.Token
	owner, session := fence.OwnerOf(ctx), fence.SessionOf(ctx)
	err := db.Update(ctx, func(tx Tx) (err error) {
		token, err = Grant(tx, resource, holder, owner, session, ttl, expires)
		return err
	})
	return token, db.wrap(err, "grant %q", resource)
}

// GrantAll grants every one of resources (distinct names) to holder, as
// Grant does. It checks them all before it changes anything: a rejection
// is a change's own answer and does not roll the transaction back, so a
// resource that cannot be granted (out of tokens) must leave the others
// ungranted itself.
func GrantAll(tx Tx, resources []string, holder, owner string, session fence.SessionRef, ttl time.Duration, expires time.Time) ([]fence.Token, error) {
	for _, name := range resources {
		r, err := tx.Resource(name)
		if err != nil {
			return nil, err
		}
		if err := checkNextToken(name, r); err != nil {
			return nil, err
		}
	}
	// No Grant can refuse now: any error is the engine's, and rolls the
	// transaction back.
	tokens := make([]fence.Token, len(resources))
	for i, name := range resources {
		var err error
		if tokens[i], err = Grant(tx, name, holder, owner, session, ttl, expires); err != nil {
			return nil, err
		}
	}
	return tokens, nil
}

// GrantAll implements fence.Ledger: one commit, owned by fence.OwnerOf(ctx),
// in the session fence.SessionOf(ctx).
func (db *DB) GrantAll(ctx context.Context, resources []string, holder string, ttl time.Duration, expires time.Time) ([]fence.Token, error) {
	var tokens []fence.Token
	owner, session := fence.OwnerOf(ctx), fence.SessionOf(ctx)
	err := db.Update(ctx, func(tx Tx) (err error) {
		tokens, err = GrantAll(tx, resources, holder, owner, session, ttl, expires)
		return err
	})
	return tokens, db.wrap(err, "grant %q", resources)
}

// Refresh records a new TTL and expiry for the lease with token.
func Refresh(tx Tx, resource string, token fence.Token, ttl time.Duration, expires time.Time) (fence.Token, error) {
	r, err := tx.Resource(resource)
	if err != nil {
		return 0, err
	}
	if !r.leased(token) {
		return 0, &fence.LeaseLostError{Resource: resource, Presented: token, Current: r.LeaseToken}
	}
	r.TTL, r.Expires = ttl, expires.UnixNano()
	return r.LastFence, tx.SetResource(resource, r)
}

// Refresh implements fence.Ledger.
func (db *DB) Refresh(ctx context.Context, resource string, token fence.Token, ttl time.Duration, expires time.Time) (fence.Token, error) {
	var lastFence fence.Token
	err := db.Update(ctx, func(tx Tx) (err error) {
		lastFence, err = Refresh(tx, resource, token, ttl, expires)
		return err
	})
	return lastFence, db.wrap(err, "refresh %q", resource)
}

// End records that the lease with token is over; it changes nothing if token is
// not the recorded lease. The end of a permit (a lease on a slot resource,
// fence.ParseSlot) also issues the slot's next token straight into its last
// fence, as Revoke does: a slot may never be granted again (its semaphore
// asked for with another limit once idle), and its last holder, paused past
// its TTL, must be fenced all the same.
func End(tx Tx, resource string, token fence.Token) (fence.Token, error) {
	r, err := tx.Resource(resource)
	if err != nil {
		return 0, err
	}
	if !r.leased(token) {
		return r.LastFence, nil
	}
	r.endLease()
	if _, _, _, slot := fence.ParseSlot(resource); slot && checkNextToken(resource, r) == nil {
		r.LastToken++
		r.LastFence = max(r.LastFence, r.LastToken)
	}
	return r.LastFence, tx.SetResource(resource, r)
}

// End implements fence.Ledger.
func (db *DB) End(ctx context.Context, resource string, token fence.Token) (fence.Token, error) {
	var lastFence fence.Token
	err := db.Update(ctx, func(tx Tx) (err error) {
		lastFence, err = End(tx, resource, token)
		return err
	})
	return lastFence, db.wrap(err, "end %q", resource)
}

// Handoff ends the lease with token and grants the resource to holder, owned
// by owner, with the next token, raising the fence to it: End and then Grant
// in one transaction. It checks for both before it changes anything: a
// token that is not the recorded lease gets *fence.LeaseLostError, a
// resource with no token left ErrTokensExhausted, and either way the old
// lease stays recorded. It returns the new token and the resource's last
// fence.
func Handoff(tx Tx, resource string, token fence.Token, holder, owner string, session fence.SessionRef, ttl time.Duration, expires time.Time) (next, lastFence fence.Token, err error) {
	r, err := tx.Resource(resource)
	if err != nil {
		return 0, 0, err
	}
	if !r.leased(token) {
		return 0, 0, &fence.LeaseLostError{Resource: resource, Presented: token, Current: r.LeaseToken}
	}
	if err := checkNextToken(resource, r); err != nil {
		return 0, 0, err
	}
	// Neither End nor Grant can refuse now: any error is the engine's, and
	// rolls the transaction back.
	if _, err := End(tx, resource, token); err != nil {
		return 0, 0, err
	}
	if next, err = Grant(tx, resource, holder, owner, session, ttl, expires); err != nil {
		return 0, 0, err
	}
	if r, err = tx.Resource(resource); err != nil {
		return 0, 0, err
	}
	return next, r.LastFence, nil
}

// Handoff implements fence.Ledger: the end and the grant are one change of
// one commit, and the new lease is owned by fence.OwnerOf(ctx), in the
// session fence.SessionOf(ctx).
func (db *DB) Handoff(ctx context.Context, resource string, token fence.Token, holder string, ttl time.Duration, expires time.Time) (next, lastFence fence.Token, err error) {
	owner, session := fence.OwnerOf(ctx), fence.SessionOf(ctx)
	err = db.Update(ctx, func(tx Tx) (err error) {
		next, lastFence, err = Handoff(tx, resource, token, holder, owner, session, ttl, expires)
		return err
	})
	return next, lastFence, db.wrap(err, "hand off %q", resource)
}

// Revoke ends the recorded lease, if any, and issues the resource's next token
// straight into its fence, without a lease: every holder of an older token is
// fenced, and the next grant gets a greater token still. It returns the new
// last fence and the token of the lease it ended (0 if none was recorded).
func Revoke(tx Tx, resource string) (lastFence, revoked fence.Token, err error) {
	r, err := tx.Resource(resource)
	if err != nil {
		return 0, 0, err
	}
	if err := checkNextToken(resource, r); err != nil {
		return 0, 0, err
	}
	revoked = r.LeaseToken
	token := r.LastToken + 1
	r.LastToken, r.LastFence = token, max(r.LastFence, token)
	r.endLease()
	r.Delay = 0
	if err := tx.SetResource(resource, r); err != nil {
		return 0, 0, err
	}
	return r.LastFence, revoked, nil
}

// Revoke implements fence.Ledger.
func (db *DB) Revoke(ctx context.Context, resource string) (lastFence, revoked fence.Token, err error) {
	err = fence.ValidateResource(resource)
	if err == nil {
		err = db.Update(ctx, func(tx Tx) (err error) {
			lastFence, revoked, err = Revoke(tx, resource)
			return err
		})
	}
	return lastFence, revoked, db.wrap(err, "revoke %q", resource)
}

// RequestRevoke records that the lease (or group) with token is to be
// revoked grace after the request; an earlier request with a shorter grace
// stands.
func RequestRevoke(tx Tx, resource string, token fence.Token, grace time.Duration) error {
	r, err := tx.Resource(resource)
	if err != nil {
		return err
	}
	if !r.leased(token) {
		return &fence.LeaseLostError{Resource: resource, Presented: token, Current: r.LeaseToken}
	}
	if r.RevokeGrace != 0 && r.RevokeGrace <= grace {
		return nil
	}
	r.RevokeGrace = grace
	return tx.SetResource(resource, r)
}

// RequestRevoke implements fence.Ledger.
func (db *DB) RequestRevoke(ctx context.Context, resource string, token fence.Token, grace time.Duration) error {
	err := db.Update(ctx, func(tx Tx) error { return RequestRevoke(tx, resource, token, grace) })
	return db.wrap(err, "request a revoke of %q", resource)
}

// SetDelay records that a lock-delay of d is in progress on the resource
// (d > 0), or that none is (d == 0). It changes nothing while a lease is
// recorded: a grant ends any delay.
func SetDelay(tx Tx, resource string, d time.Duration) error {
	r, err := tx.Resource(resource)
	if err != nil {
		return err
	}
	if r.LeaseToken != 0 || r.Delay == d {
		return nil
	}
	r.Delay = d
	return tx.SetResource(resource, r)
}

// SetDelay implements fence.Ledger.
func (db *DB) SetDelay(ctx context.Context, resource string, d time.Duration) error {
	err := db.Update(ctx, func(tx Tx) error { return SetDelay(tx, resource, d) })
	return db.wrap(err, "set lock-delay %q", resource)
}

// Leases implements fence.Ledger.
func (db *DB) Leases(ctx context.Context) ([]fence.Lease, []fence.LockDelay, error) {
	var leases []fence.Lease
	var delays []fence.LockDelay
	err := db.View(ctx, func(tx Tx) error {
		leases, delays = leases[:0], delays[:0]
		return tx.Resources(func(name string, r Resource) error {
			if r.shared() {
				leases = append(leases, r.memberLeases(name)...)
			} else if l, ok := r.Lease(name); ok {
				leases = append(leases, l)
			} else if r.Delay > 0 {
				delays = append(delays, fence.LockDelay{Resource: name, Delay: r.Delay})
			}
			return nil
		})
	})
	if err != nil {
		return nil, nil, db.wrap(err, "leases")
	}
	return leases, delays, nil
}

// endLease clears the recorded lease.
func (r *Resource) endLease() {
	r.LeaseToken, r.Holder, r.Owner, r.TTL, r.Expires = 0, "", "", 0, 0
	r.Session, r.SessionToken, r.Members, r.RevokeGrace = "", 0, nil, 0
}

// leased reports whether token is the lease recorded in r.
func (r Resource) leased(token fence.Token) bool {
	return r.LeaseToken != 0 && r.LeaseToken == token
}

// checkNextToken returns ErrTokensExhausted if the resource cannot issue another token.
func checkNextToken(name string, r Resource) error {
	if r.LastToken >= fence.MaxToken {
		return fmt.Errorf("%w: %q", ErrTokensExhausted, name)
	}
	return nil
}

// Lease returns the lease recorded in r, if any.
func (r Resource) Lease(name string) (fence.Lease, bool) {
	if r.LeaseToken == 0 {
		return fence.Lease{}, false
	}
	return fence.Lease{Resource: name, Holder: r.Holder, Owner: r.Owner, Token: r.LeaseToken, TTL: r.TTL,
		Expires: time.Unix(0, r.Expires), Session: fence.SessionRef{Resource: r.Session, Token: r.SessionToken}, RevokeGrace: r.RevokeGrace}, true
}
