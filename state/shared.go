package state

import (
	"context"
	"slices"
	"time"

	"github.com/fence-lock/fence"
)

// SharedHolder is one holder of a resource's shared group: the group's token is
// the resource's LeaseToken, and its Holder is "".
type SharedHolder struct {
	Holder  string
	Owner   string        // the principal that took the hold; "" for none
	TTL     time.Duration // the hold's TTL
	Expires int64         // the hold's expiry, Unix nanoseconds (wall clock)
}

// shared reports whether r records a shared group.
func (r Resource) shared() bool { return len(r.Members) > 0 }

// member returns the index of holder in r's group, -1 if it is not in it.
func (r Resource) member(holder string) int {
	return slices.IndexFunc(r.Members, func(m SharedHolder) bool { return m.Holder == holder })
}

// Share records holder, owned by owner, in a shared group of the resource
// and returns the group's token (see fence.Ledger.Share): with from 0 in a
// new group, with the next token; with from the token of the group
// recorded, in that group; with from the token of the exclusive lease
// recorded, in a new group that replaces it. Members are never changed in
// place: a Resource read from a Tx may share its slice with the engine's
// committed state.
func Share(tx Tx, resource, holder, owner string, from fence.Token, ttl time.Duration, expires time.Time) (fence.Token, error) {
	r, err := tx.Resource(resource)
	if err != nil {
		return 0, err
	}
	m := SharedHolder{Holder: holder, Owner: owner, TTL: ttl, Expires: expires.UnixNano()}
	if from != 0 && !r.leased(from) {
		return 0, &fence.LeaseLostError{Resource: resource, Presented: from, Current: r.LeaseToken}
	}
	if from != 0 && r.shared() {
		members := slices.Clone(r.Members)
		if i := r.member(holder); i >= 0 {
			members[i] = m
		} else {
			members = append(members, m)
		}
		r.Members = members
		return r.LeaseToken, tx.SetResource(resource, r)
	}
	// A downgrade is a new grant: a revoke requested of the lease is void.
	if err := checkNextToken(resource, r); err != nil {
		return 0, err
	}
	token := r.LastToken + 1
	r.endLease()
	r.LastToken, r.LastFence = token, max(r.LastFence, token)
	r.LeaseToken, r.Members, r.Delay = token, []SharedHolder{m}, 0
	return token, tx.SetResource(resource, r)
}

// Share implements fence.Ledger: the hold is owned by fence.OwnerOf(ctx).
func (db *DB) Share(ctx context.Context, resource, holder string, from fence.Token, ttl time.Duration, expires time.Time) (fence.Token, error) {
	var token fence.Token
	owner := fence.OwnerOf(ctx)
	err := db.Update(ctx, func(tx Tx) (err error) {
		token, err = Share(tx, resource, holder, owner, from, ttl, expires)
		return err
	})
	return token, db.wrap(err, "share %q", resource)
}

// RefreshShare records a new TTL and expiry for holder in the shared group
// of token.
func RefreshShare(tx Tx, resource string, token fence.Token, holder string, ttl time.Duration, expires time.Time) (fence.Token, error) {
	r, err := tx.Resource(resource)
	if err != nil {
		return 0, err
	}
	i := r.member(holder)
	if !r.leased(token) || i < 0 {
		return 0, &fence.LeaseLostError{Resource: resource, Presented: token, Current: r.LeaseToken}
	}
	members := slices.Clone(r.Members)
	members[i].TTL, members[i].Expires = ttl, expires.UnixNano()
	r.Members = members
	return r.LastFence, tx.SetResource(resource, r)
}

// RefreshShare implements fence.Ledger.
func (db *DB) RefreshShare(ctx context.Context, resource string, token fence.Token, holder string, ttl time.Duration, expires time.Time) (fence.Token, error) {
	var lastFence fence.Token
	err := db.Update(ctx, func(tx Tx) (err error) {
		lastFence, err = RefreshShare(tx, resource, token, holder, ttl, expires)
		return err
	})
	return lastFence, db.wrap(err, "refresh %q", resource)
}

// EndShare takes holder out of the shared group of token, which ends with
// its last holder; it changes nothing if holder is not in that group.
func EndShare(tx Tx, resource string, token fence.Token, holder string) (fence.Token, error) {
	r, err := tx.Resource(resource)
	if err != nil {
		return 0, err
	}
	i := r.member(holder)
	if !r.leased(token) || i < 0 {
		return r.LastFence, nil
	}
	if len(r.Members) == 1 {
		r.endLease()
	} else {
		r.Members = slices.Delete(slices.Clone(r.Members), i, i+1)
	}
	return r.LastFence, tx.SetResource(resource, r)
}

// EndShare implements fence.Ledger.
func (db *DB) EndShare(ctx context.Context, resource string, token fence.Token, holder string) (fence.Token, error) {
	var lastFence fence.Token
	err := db.Update(ctx, func(tx Tx) (err error) {
		lastFence, err = EndShare(tx, resource, token, holder)
		return err
	})
	return lastFence, db.wrap(err, "end %q", resource)
}

// memberLeases returns the leases of r's shared group, one per holder.
func (r Resource) memberLeases(name string) []fence.Lease {
	leases := make([]fence.Lease, len(r.Members))
	for i, m := range r.Members {
		leases[i] = fence.Lease{Resource: name, Holder: m.Holder, Owner: m.Owner, Token: r.LeaseToken, TTL: m.TTL,
			Expires: time.Unix(0, m.Expires), Shared: true, RevokeGrace: r.RevokeGrace}
	}
	return leases
}
