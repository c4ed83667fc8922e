package fence

import (
	"context"
	"time"
)

// Limits of lease TTLs and acquire waits, as in the HTTP API.
const (
	DefaultTTL = 10 * time.Second
	MinTTL     = 10 * time.Millisecond
	MaxTTL     = 24 * time.Hour
	MaxWait    = 5 * time.Minute
)

// Lease is a granted lock on a resource.
type Lease struct {
	Resource string
	Holder   string
	Token    Token         // the fencing token issued with this grant
	TTL      time.Duration // the lease's time to live, renewed on every renew
	Expires  time.Time     // when the lease ends unless renewed
	// Owner is the principal that took the lease (see WithOwner), the only
	// one that may renew it, release it or acquire it again; "" without
	// authentication, or for a lease recorded before owners were, which
	// any caller may renew or release.
	Owner string
	// Sequencer is the grant signed by the lock service (see SigningKey.Sign):
	// send it with writes so that a resource can check the token offline. It
	// is empty when the server signs nothing.
	Sequencer string
	// Session is the session the lease is in (see SessionResource); zero
	// for a lease of its own.
	Session SessionRef
	// Shared reports a shared hold (see SharedAcquirer): Holder is one of
	// the group that holds the resource at once, and Token the group's.
	Shared bool
	// RevokeAt is when the lock service revokes the lease because a
	// caller asked its holder to let go (RevokeRequester): the holder
	// should release it before then. Zero if nobody asked.
	RevokeAt time.Time
	// RevokeGrace is the grace that the request gave, from when it was
	// made; a restore gives it again in full, from the restore, as it does
	// the TTL. Zero if nobody asked.
	RevokeGrace time.Duration
}

// SessionRenewer is implemented by Lockers that say, when a session is
// renewed, which leases in it a caller asked to let go (RevokeRequester):
// those leases send no renewal of their own, so this is how their holders
// learn of it (a Session does, for its leases InSession).
type SessionRenewer interface {
	// RenewSession renews the lease of session ref (on a SessionResource)
	// as Renew does, and returns the leases in the session asked to let
	// go, in byte order of resource. A lease listed and then no longer,
	// which its holder did not release, was revoked. Its errors are
	// Renew's, and ErrBadRequest for a resource that is no session's.
	RenewSession(ctx context.Context, ref SessionRef, ttl time.Duration) (Lease, []AskedLease, error)
}

// AskedLease is a lease in a session that a caller asked to let go (see
// SessionRenewer).
type AskedLease struct {
	Resource string
	Token    Token
	RevokeAt time.Time // when the lock service revokes it, if it still holds
}

// LockStatus describes a resource's lock.
type LockStatus struct {
	Resource  string
	Held      bool
	Holder    string     // only while held
	Token     Token      // only while held
	Expires   time.Time  // only while held
	LastToken Token      // the highest token ever issued for the resource; 0 if none
	Waiters   int        // acquires waiting for it (set by Lister.List only)
	Session   SessionRef // the session the lease is in; only while held, zero if none
	// Shared reports that a group of shared holders holds the resource
	// (only while held): Holders names them, in byte order, Holder is "",
	// Token is the group's and Expires the latest of their expiries.
	Shared  bool
	Holders []string
	// RevokeAt is when the lock service revokes the lease, which a caller
	// asked its holder to let go of (RevokeRequester); only while held,
	// zero if nobody asked.
	RevokeAt time.Time
}

// MaxListLimit is the most locks one Lister.List returns.
const MaxListLimit = 1000

// Lister is implemented by Lockers that can list the locks held now.
// Implementations are safe for concurrent use.
type Lister interface {
	// List returns the locks held now whose resource names start with
	// prefix and sort after after (byte order; "" from the first), in
	// byte order, at most limit (1..MaxListLimit) of them, each with its
	// holder, token, expiry and waiters (LastToken is not set), and
	// whether more follow. It wraps ErrBadRequest for a limit out of range.
	List(ctx context.Context, prefix, after string, limit int) (locks []LockStatus, more bool, err error)
}

// Locker is a lock service that issues fencing tokens. Implementations are safe
// for concurrent use.
//
// A lease belongs to the principal that took it, the owner that ctx carries
// (WithOwner; "" for none): Acquire records it in the lease, and a call whose
// owner is not the lease's (a call with none included) gets an error
// wrapping ErrForbidden and changes nothing. A lease whose Owner is "" (taken
// without authentication, or recorded before owners were) is not checked:
// any caller may renew or release it.
//
// Acquire, Renew and Release return only after their effect is durable. Acquire
// returns *LockHeldError, Renew and Release *LeaseLostError, and every method
// wraps ErrBadRequest for a name or TTL out of range. An error that is none of
// these (a context cancelled, an I/O failure) leaves the outcome unknown: the
// lock may have been granted, renewed or released.
type Locker interface {
	// Acquire grants resource to holder for ttl, waiting up to wait for the
	// current holder to release or expire; waiters are served first come, first
	// served. A holder acquiring a lease it still holds gets the same token, with
	// its TTL refreshed to ttl, if the acquire comes from the lease's owner; from
	// another owner it wraps ErrForbidden at once (no token, no refresh, no
	// wait), and so does a waiting acquire when the lease it would share passes
	// to its holder on behalf of another owner. A lease granted to a waiter
	// belongs to the waiter's owner.
	Acquire(ctx context.Context, resource, holder string, ttl, wait time.Duration) (Lease, error)
	// Renew extends the lease with token by ttl from now (0: its current TTL).
	// It wraps ErrForbidden if the lease belongs to another owner.
	Renew(ctx context.Context, resource string, token Token, ttl time.Duration) (Lease, error)
	// Release ends the lease with token. A stale token never ends a newer lease.
	// It wraps ErrForbidden if the lease belongs to another owner.
	Release(ctx context.Context, resource string, token Token) error
	// Status reports the resource's lock.
	Status(ctx context.Context, resource string) (LockStatus, error)
}

// Ledger is the durable record behind a lock service: per resource, the last
// token issued and the current lease. Implementations are safe for concurrent
// use and return only after a change is durable. The lock service serialises
// calls per resource, so a Ledger need not arbitrate between holders.
//
// Grant and Handoff record the owner that ctx carries (OwnerOf) as the new
// lease's Owner, and Leases returns it, so that the lock service checks who
// may renew or release a restored lease as it did before the restart; the
// Ledger itself checks no owner.
type Ledger interface {
	// Grant records a new lease for holder, owned by OwnerOf(ctx) and in
	// the session SessionOf(ctx) (none if zero), with the next token (one
	// more than the last issued), raises the resource's last fence to it in
	// the same atomic step, and returns the token. GrantAll and Handoff
	// record the session in ctx too.
	Grant(ctx context.Context, resource, holder string, ttl time.Duration, expires time.Time) (Token, error)
	// GrantAll grants every one of resources (distinct names) to holder as
	// Grant does, owned by OwnerOf(ctx), in one atomic, durable change: all
	// of them or, on any error, none. It returns their tokens in the order
	// of resources.
	GrantAll(ctx context.Context, resources []string, holder string, ttl time.Duration, expires time.Time) ([]Token, error)
	// Refresh records a new TTL and expiry for the lease with token and returns
	// the resource's last fence. It returns *LeaseLostError if token is not the
	// recorded lease.
	Refresh(ctx context.Context, resource string, token Token, ttl time.Duration, expires time.Time) (lastFence Token, err error)
	// End records that the lease with token is over and returns the resource's
	// last fence. It changes nothing when token is not the recorded lease. The
	// end of a permit (on a slot resource, ParseSlot) also fences its token:
	// it issues the slot's next token into its last fence, without a lease.
	End(ctx context.Context, resource string, token Token) (lastFence Token, err error)
	// Handoff passes the resource from one holder to the next in one atomic,
	// durable change: it ends the lease with token and records a new lease
	// for holder, owned by OwnerOf(ctx), with the next token, raising the
	// resource's last fence to it, as End and then Grant would, but
	// committed once. It returns the new token and the resource's last
	// fence afterwards. If token is not the recorded lease, it returns
	// *LeaseLostError and changes nothing: a stale hand-off never ends or
	// replaces a newer lease. Any other error may leave the outcome
	// unknown: the whole hand-off may have been recorded, or none of it,
	// but never the end without the grant.
	Handoff(ctx context.Context, resource string, token Token, holder string, ttl time.Duration, expires time.Time) (next, lastFence Token, err error)
	// Leases returns every recorded lease, expired or not, with its holder
	// and owner (a shared group as one Lease per holder, Shared set, each
	// with the group's token), and every lock-delay in progress, to restore them after a
	// restart or a failover.
	Leases(ctx context.Context) ([]Lease, []LockDelay, error)
	// SetDelay records that a lock-delay of d is in progress on resource
	// since its lease expired (d > 0), or that it has ended (d == 0). A
	// grant ends a delay too.
	SetDelay(ctx context.Context, resource string, d time.Duration) error
	// LastToken returns the highest token issued for resource, 0 if none.
	LastToken(ctx context.Context, resource string) (Token, error)
	// Share records holder, owned by OwnerOf(ctx), in a shared group of the
	// resource with ttl and expiry and returns the group's token. With from
	// 0 it starts a new group with the next token, raising the fence to it
	// as Grant does (and replacing whatever lease or group is recorded);
	// with from the token of the group recorded it joins that group (again:
	// a holder in it gets the new TTL); with from the token of the
	// exclusive lease recorded it ends that lease and starts the group with
	// the next token in the same change (a downgrade). Any other from gets
	// *LeaseLostError and changes nothing.
	Share(ctx context.Context, resource, holder string, from Token, ttl time.Duration, expires time.Time) (Token, error)
	// RefreshShare records a new TTL and expiry for holder in the shared
	// group of token and returns the resource's last fence; it returns
	// *LeaseLostError if holder is not in that group.
	RefreshShare(ctx context.Context, resource string, token Token, holder string, ttl time.Duration, expires time.Time) (lastFence Token, err error)
	// EndShare takes holder out of the shared group of token (which ends
	// with its last holder) and returns the resource's last fence. It
	// changes nothing when holder is not in that group.
	EndShare(ctx context.Context, resource string, token Token, holder string) (lastFence Token, err error)
	// RequestRevoke records that the lease (or shared group) with token is
	// to be revoked grace after the request, which a restore gives again
	// in full; Leases returns it as the lease's RevokeGrace. It returns
	// *LeaseLostError if token is not the recorded lease.
	RequestRevoke(ctx context.Context, resource string, token Token, grace time.Duration) error
	// Revoke ends the recorded lease, if any, and issues the next token
	// straight into the resource's last fence, without a lease, so that
	// every holder of an older token is fenced at once. It returns the new
	// last fence and the token of the lease it ended (0 if none was recorded).
	Revoke(ctx context.Context, resource string) (lastFence, revoked Token, err error)
}

// LockDelay is a lock-delay in progress on a resource, as a Ledger records
// it: its length, not its end, so that a restore gives it its full length
// again instead of trusting another machine's clock.
type LockDelay struct {
	Resource string
	Delay    time.Duration
}

// RevokeRequester is implemented by Lockers whose holders can be asked to
// let go (cooperative revocation). Implementations are safe for concurrent
// use.
//
// RequestRevoke asks the holder of resource to release it within grace
// (MinTTL..MaxTTL): the request is recorded with the lease and its holder
// learns of it (the lease's RevokeAt, on its next renewal, and a
// RevokeRequested event), and if the same lease still holds the resource at
// the deadline, the lock service revokes it as Revoke does, fencing its
// holder. A second request keeps the earlier deadline. It returns the lease
// asked, with RevokeAt set; on a free resource it revokes at once and
// returns a zero Lease and the revoke's result. It wraps ErrBadRequest for
// a bad name or grace; any other error leaves the outcome unknown.
type RevokeRequester interface {
	RequestRevoke(ctx context.Context, resource string, grace time.Duration) (Lease, RevokeResult, error)
}

// RevokeResult is the outcome of a revoke.
type RevokeResult struct {
	Resource  string
	Revoked   Token // the token of the lease that was ended; 0 if the resource was free
	LastFence Token // the resource's new fence, a token issued to nobody
}

// Revoker is implemented by Lockers that can take a resource away from its
// holder (an admin action). Implementations are safe for concurrent use.
//
// Revoke ends the current lease, if any, and raises the resource's fence to a
// newly issued token that no holder gets, so that the old holder's renewals
// fail with *LeaseLostError and its writes with *FencedError at once, even
// while nobody holds the lock. Waiters are then served as after a release,
// with tokens greater than the fence. It returns after its effect is durable
// and wraps ErrBadRequest for a bad name. Any other error leaves the outcome
// unknown: the resource may have been revoked.
type Revoker interface {
	Revoke(ctx context.Context, resource string) (RevokeResult, error)
}

// MaxSharedHolders is the most holders one shared group has at once; a
// shared acquire beyond them waits for the next group.
const MaxSharedHolders = 256

// SharedAcquirer is implemented by Lockers that grant shared (read) holds
// beside exclusive ones. Implementations are safe for concurrent use.
//
// AcquireShared grants holder a shared hold of resource for ttl: any number
// of holders (up to MaxSharedHolders) hold it shared at once, and an
// exclusive lease (Acquire) excludes them all. A group of shared holders
// shares one token: the first of them is issued the next token, raising the
// fence, and those who join while the group holds the resource get the
// same. So an exclusive grant's token is above every shared token before
// it, and the next group's above the exclusive one's, and storage fences
// either side with its one rule. A shared acquire waits, first come first
// served, behind an exclusive one that waits already: a waiting writer
// stops new shared grants (no writer starvation), at the cost of readers
// waiting for it although the group still holds the resource. The holder
// of the exclusive lease downgrades it by acquiring it shared: in one
// durable change the lease ends and a group with a new token holds the
// resource, the holder in it. The converse, a shared holder acquiring
// exclusively, is refused at once (wrapping ErrBadRequest): two holders
// upgrading at once would each wait for the other for ever. A shared hold
// is in no session, and is neither transferred nor renewed or released
// without its holder's name: see RenewShared and ReleaseShared.
type SharedAcquirer interface {
	AcquireShared(ctx context.Context, resource, holder string, ttl, wait time.Duration) (Lease, error)
	// RenewShared renews holder's shared hold of the group of token, as
	// Renew renews a lease.
	RenewShared(ctx context.Context, resource, holder string, token Token, ttl time.Duration) (Lease, error)
	// ReleaseShared ends holder's shared hold of the group of token, as
	// Release ends a lease; the group ends with its last holder.
	ReleaseShared(ctx context.Context, resource, holder string, token Token) error
}

// PermitAcquirer is implemented by Lockers that grant counted permits: a
// semaphore of limit n lets at most n holders hold resource at once.
// Implementations are safe for concurrent use.
//
// AcquirePermit grants holder one of the n permits of resource for ttl,
// waiting up to wait for one to be free; waiters are served first come,
// first served. A permit is an exclusive lease on its own slot resource,
// SlotResource(resource, i, n), which the lease names as its Resource: renew,
// release, revoke and fence it as any lease, with its own tokens, so that a
// permit holder that paused past its TTL is fenced while the other permits'
// writes go on. A holder that holds a permit of resource already gets it
// again, as Acquire gives a lease's holder its lease. It wraps ErrBadRequest
// for a name, TTL or limit out of range (ValidateSemaphore), and for a limit
// other than the one the permits held or waited for now were asked with;
// otherwise it fails as Acquire does. Acquire refuses slot resources' names:
// a slot is taken only as a permit.
type PermitAcquirer interface {
	AcquirePermit(ctx context.Context, resource, holder string, limit int, ttl, wait time.Duration) (Lease, error)
}

// MaxMultiAcquire is the most resources one MultiAcquirer.AcquireAll takes.
const MaxMultiAcquire = 100

// MultiAcquirer is implemented by Lockers that grant several resources at
// once. Implementations are safe for concurrent use.
//
// AcquireAll grants every one of resources (1..MaxMultiAcquire distinct
// names) to holder for ttl, all in one durable change or none: an acquire
// refused, timed out or failed holds none of them afterwards (a resource the
// holder held already, by itself, it keeps). It waits up to wait in all for
// them, in each resource's queue in turn; concurrent AcquireAll calls never
// deadlock. Each lease has its own token, one more than its resource's last,
// and they are returned in the order of resources. A holder that holds all
// of them gets them again with their TTLs refreshed, as with Acquire. It
// returns *LockHeldError naming a resource it could not get, and otherwise
// fails as Acquire does.
type MultiAcquirer interface {
	AcquireAll(ctx context.Context, resources []string, holder string, ttl, wait time.Duration) ([]Lease, error)
}

// Transferer is implemented by Lockers whose holders can hand a lease to a
// named successor (a handover). Implementations are safe for concurrent use.
//
// Transfer ends the lease of token and grants the resource to the first
// waiter whose holder is to ("" means the first waiter, whatever its
// holder; a multi-acquire's waiting is passed over, since its grant is a
// change of its own), in one durable change: the successor's token is greater, and the
// old token is fenced as the grant is recorded, so that there is no instant
// without a holder and none with two. Only the lease's owner, OwnerOf(ctx),
// may transfer it. It returns the successor's lease without its Sequencer
// (the successor's proof of its lease, not the caller's). It fails with
// *LeaseLostError if token does not hold the lease, and wraps ErrNotFound,
// changing nothing, if nobody named to waits; it wraps ErrBadRequest for a
// bad name, ErrInvalidToken for an invalid token, ErrForbidden for another
// owner's lease. Any other error leaves the outcome unknown.
type Transferer interface {
	Transfer(ctx context.Context, resource string, token Token, to string) (Lease, error)
}

// Fencer raises a resource's fence without writing: what a guard in front of
// another store (PostgreSQL, Redis, etcd) or fence storage does at the door
// of a request. Implementations are safe for concurrent use.
type Fencer interface {
	// Claim raises resource's fence to token if token >= the fence (equal is
	// a retry) and returns nil; a lower token returns *FencedError and
	// changes nothing. Any other error leaves the outcome unknown.
	Claim(ctx context.Context, resource string, token Token) error
}
