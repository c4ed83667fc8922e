package wire

import (
	"cmp"
	"fmt"
	"time"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/internal/support/wallclock"
)

// Timestamp formats t as the API's times are: RFC 3339 in UTC, with
// nanoseconds where they are not zero.
//
// On a server whose wall clock a test skews (package wallclock), t is
// reported as that clock would read it.
func Timestamp(t time.Time) string { return wallclock.Report(t).UTC().Format(time.RFC3339Nano) }

// ParseTimestamp parses a time of the API.
func ParseTimestamp(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time", s)
	}
	return t, nil
}

// Health is the body of GET /healthz and /readyz.
type Health struct {
	Status string `json:"status"`
}

// AcquireRequest is the body of POST /v1/locks/{resource}/acquire.
// Limit, if not 0, asks for one of the Limit permits of a semaphore; Mode
// ModeShared for a shared hold.
type AcquireRequest struct {
	Holder  string      `json:"holder"`
	TTLMS   int64       `json:"ttl_ms,omitempty"` // absent: the server's default, or the session's
	WaitMS  int64       `json:"wait_ms"`
	Limit   int         `json:"limit,omitempty"`
	Session *SessionRef `json:"session,omitempty"`
	Mode    string      `json:"mode,omitempty"` // absent: ModeExclusive
}

// The modes of a hold: an acquire's "mode", and a lease's or a lock's.
const (
	ModeExclusive = "exclusive"
	ModeShared    = "shared"
)

// ModeOf is the mode member of a hold: ModeShared for a shared one, ""
// (absent: exclusive) otherwise.
func ModeOf(shared bool) string {
	if shared {
		return ModeShared
	}
	return ""
}

// SessionRef names a session (fence.SessionRef): the lease on its
// resource that is it.
type SessionRef struct {
	Resource string      `json:"resource"`
	Token    fence.Token `json:"token"`
}

// NewSessionRef is ref on the wire: nil for none.
func NewSessionRef(ref fence.SessionRef) *SessionRef {
	if ref.IsZero() {
		return nil
	}
	return &SessionRef{Resource: ref.Resource, Token: ref.Token}
}

// Decode returns the session named; zero for nil.
func (r *SessionRef) Decode() fence.SessionRef {
	if r == nil {
		return fence.SessionRef{}
	}
	return fence.SessionRef{Resource: r.Resource, Token: r.Token}
}

// AcquireAllRequest is the body of POST /v1/locks: several resources at
// once, all or none.
type AcquireAllRequest struct {
	Resources []string    `json:"resources"`
	Holder    string      `json:"holder"`
	TTLMS     int64       `json:"ttl_ms,omitempty"` // absent: the server's default, or the session's
	WaitMS    int64       `json:"wait_ms"`
	Session   *SessionRef `json:"session,omitempty"`
}

// AcquireAllResponse is the answer to POST /v1/locks: a lease per
// resource, in the order of the request.
type AcquireAllResponse struct {
	Leases []Lease `json:"leases"`
}

// RenewRequest is the body of POST /v1/locks/{resource}/renew. TTLMS 0 keeps
// the lease's TTL.
type RenewRequest struct {
	Token  fence.Token `json:"token"`
	TTLMS  int64       `json:"ttl_ms,omitempty"`
	Holder string      `json:"holder,omitempty"` // required for a shared hold
}

// ReleaseRequest is the body of POST /v1/locks/{resource}/release.
type ReleaseRequest struct {
	Token  fence.Token `json:"token"`
	Holder string      `json:"holder,omitempty"` // required for a shared hold
}

// Lease is the answer to acquire and renew.
type Lease struct {
	Resource  string      `json:"resource"`
	Holder    string      `json:"holder"`
	Token     fence.Token `json:"token"`
	TTLMS     int64       `json:"ttl_ms"`
	ExpiresAt string      `json:"expires_at"`
	Sequencer string      `json:"sequencer,omitempty"` // absent when the server signs nothing
	Session   *SessionRef `json:"session,omitempty"`   // absent for a lease of its own
	Mode      string      `json:"mode,omitempty"`      // ModeShared for a shared hold; absent for an exclusive lease
	RevokeAt  string      `json:"revoke_at,omitempty"` // when it is revoked, its holder asked to let go; absent if not asked
	// Asked is, in a session's renewal, the leases in the session asked to
	// let go; absent if none (fence.SessionRenewer).
	Asked []AskedLease `json:"asked,omitempty"`
}

// AskedLease is a lease in a session asked to let go (Lease.Asked).
type AskedLease struct {
	Resource string      `json:"resource"`
	Token    fence.Token `json:"token"`
	RevokeAt string      `json:"revoke_at"`
}

// NewLease is the answer for l, a lease on resource.
func NewLease(resource string, l fence.Lease) Lease {
	return Lease{
		Resource:  cmp.Or(l.Resource, resource),
		Holder:    l.Holder,
		Token:     l.Token,
		TTLMS:     l.TTL.Milliseconds(),
		ExpiresAt: Timestamp(l.Expires),
		Sequencer: l.Sequencer,
		Session:   NewSessionRef(l.Session),
		Mode:      ModeOf(l.Shared),
		RevokeAt:  optionalTimestamp(l.RevokeAt),
	}
}

// NewAsked is the Asked of a session's renewal.
func NewAsked(asked []fence.AskedLease) []AskedLease {
	if len(asked) == 0 {
		return nil
	}
	out := make([]AskedLease, len(asked))
	for i, a := range asked {
		out[i] = AskedLease{Resource: a.Resource, Token: a.Token, RevokeAt: Timestamp(a.RevokeAt)}
	}
	return out
}

// optionalTimestamp is Timestamp(t), or "" for the zero time.
func optionalTimestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return Timestamp(t)
}

// Decode returns the lease that l describes.
func (l Lease) Decode() (fence.Lease, error) {
	exp, err := ParseTimestamp(l.ExpiresAt)
	if err != nil {
		return fence.Lease{}, fmt.Errorf("lease expires_at: %w", err)
	}
	lease := fence.Lease{Resource: l.Resource, Holder: l.Holder, Token: l.Token,
		TTL: time.Duration(l.TTLMS) * time.Millisecond, Expires: exp, Sequencer: l.Sequencer, Session: l.Session.Decode(),
		Shared: l.Mode == ModeShared}
	if l.RevokeAt != "" {
		if lease.RevokeAt, err = ParseTimestamp(l.RevokeAt); err != nil {
			return fence.Lease{}, fmt.Errorf("lease revoke_at: %w", err)
		}
	}
	return lease, nil
}

// DecodeAsked returns the leases that l, a session's renewal, lists as
// asked to let go.
func (l Lease) DecodeAsked() ([]fence.AskedLease, error) {
	var asked []fence.AskedLease
	for _, a := range l.Asked {
		at, err := ParseTimestamp(a.RevokeAt)
		if err != nil {
			return nil, fmt.Errorf("lease asked %q revoke_at: %w", a.Resource, err)
		}
		asked = append(asked, fence.AskedLease{Resource: a.Resource, Token: a.Token, RevokeAt: at})
	}
	return asked, nil
}

// ReleaseResponse is the answer to release.
type ReleaseResponse struct {
	Resource string `json:"resource"`
	Released bool   `json:"released"`
}

// TransferResponse is the answer to transfer: the successor's lease, as
// observers see it (no sequencer: that is the successor's).
type TransferResponse struct {
	Resource  string      `json:"resource"`
	Holder    string      `json:"holder"`
	Token     fence.Token `json:"token"`
	ExpiresAt string      `json:"expires_at"`
}

// RevokeResponse is the answer to revoke. RevokedToken is 0 if the resource
// was free.
type RevokeResponse struct {
	Resource     string      `json:"resource"`
	RevokedToken fence.Token `json:"revoked_token"`
	LastFence    fence.Token `json:"last_fence"`
}

// RevokeRequest is the body of POST /v1/locks/{resource}/revoke: GraceMS,
// if not 0, asks the holder to let go within it, and revokes at its end.
type RevokeRequest struct {
	GraceMS int64 `json:"grace_ms,omitempty"`
}

// RevokeAsked is the 202 answer to a revoke with grace_ms of a held
// resource: the lease asked to let go, and when it is revoked unless it
// does. Holder is absent and Mode ModeShared for a shared group.
type RevokeAsked struct {
	Resource string      `json:"resource"`
	Holder   string      `json:"holder,omitempty"`
	Token    fence.Token `json:"token"`
	RevokeAt string      `json:"revoke_at"`
	Mode     string      `json:"mode,omitempty"`
}

// LockStatus is the answer to GET /v1/locks/{resource}. Holder, Token and
// ExpiresAt are set only while the lock is held.
type LockStatus struct {
	Resource  string      `json:"resource"`
	Held      bool        `json:"held"`
	Holder    string      `json:"holder,omitempty"`
	Token     fence.Token `json:"token,omitempty"`
	ExpiresAt string      `json:"expires_at,omitempty"`
	LastToken fence.Token `json:"last_token"`
	Session   *SessionRef `json:"session,omitempty"`   // the held lease's, if it is in one
	Mode      string      `json:"mode,omitempty"`      // ModeShared while a shared group holds it (Holder then absent)
	Holders   []string    `json:"holders,omitempty"`   // the shared group's holders, in byte order
	RevokeAt  string      `json:"revoke_at,omitempty"` // when the lease is revoked, its holder asked to let go
}

// NewLockStatus is the answer for st.
func NewLockStatus(st fence.LockStatus) LockStatus {
	resp := LockStatus{Resource: st.Resource, Held: st.Held, LastToken: st.LastToken}
	if st.Held {
		resp.Holder, resp.Token, resp.ExpiresAt, resp.Session = st.Holder, st.Token, Timestamp(st.Expires), NewSessionRef(st.Session)
		resp.Mode, resp.Holders, resp.RevokeAt = ModeOf(st.Shared), st.Holders, optionalTimestamp(st.RevokeAt)
	}
	return resp
}

// DefaultListLimit is the locks GET /v1/locks returns without a limit.
const DefaultListLimit = 100

// ListResponse is the answer to GET /v1/locks. Next, when set, is the
// after of the next page.
type ListResponse struct {
	Locks []ListedLock `json:"locks"`
	Next  string       `json:"next,omitempty"`
}

// ListedLock is one held lock of a ListResponse.
type ListedLock struct {
	Resource  string      `json:"resource"`
	Holder    string      `json:"holder"`
	Token     fence.Token `json:"token"`
	ExpiresAt string      `json:"expires_at"`
	Waiters   int         `json:"waiters"`
	Session   *SessionRef `json:"session,omitempty"`   // the lease's, if it is in one
	Mode      string      `json:"mode,omitempty"`      // ModeShared for a shared group ("holder" is then "")
	Holders   []string    `json:"holders,omitempty"`   // the shared group's holders, in byte order
	RevokeAt  string      `json:"revoke_at,omitempty"` // when the lease is revoked, its holder asked to let go
}

// NewListedLock is the listing of l, a held lock.
func NewListedLock(l fence.LockStatus) ListedLock {
	return ListedLock{Resource: l.Resource, Holder: l.Holder, Token: l.Token, ExpiresAt: Timestamp(l.Expires),
		Waiters: l.Waiters, Session: NewSessionRef(l.Session), Mode: ModeOf(l.Shared), Holders: l.Holders, RevokeAt: optionalTimestamp(l.RevokeAt)}
}

// PutResponse is the answer to PUT /v1/kv/{resource}/{key}.
type PutResponse struct {
	Resource string      `json:"resource"`
	Key      string      `json:"key"`
	Revision fence.Rev   `json:"revision"`
	Fence    fence.Token `json:"fence"`
}

// DeleteResponse is the answer to DELETE /v1/kv/{resource}/{key}.
type DeleteResponse struct {
	Resource string    `json:"resource"`
	Key      string    `json:"key"`
	Revision fence.Rev `json:"revision"`
}

// FenceResponse is the answer to GET and POST /v1/fences/{resource}.
type FenceResponse struct {
	Resource  string      `json:"resource"`
	LastFence fence.Token `json:"last_fence"`
}

// FenceListResponse is the answer to GET /v1/fences. Next, when set, is
// the after of the next page.
type FenceListResponse struct {
	Fences []ListedFence `json:"fences"`
	Next   string        `json:"next,omitempty"`
}

// ListedFence is one resource of a FenceListResponse.
type ListedFence struct {
	Resource  string      `json:"resource"`
	LastToken fence.Token `json:"last_token"`
	LastFence fence.Token `json:"last_fence"`
}

// KeysResponse is the answer to GET /v1/keys. Keys is [] when the server
// signs nothing.
type KeysResponse struct {
	Keys []fence.PublicKey `json:"keys"`
}

// TxnResponse is the answer to POST /v1/txn.
type TxnResponse struct {
	Revision fence.Rev `json:"revision"`
}

// ClusterStatus is the answer to GET /v1/cluster: what this server knows of
// the servers that share its store.
type ClusterStatus struct {
	// Role is this server's: "leader" (it serves requests from its state)
	// or "standby" (it forwards them to the leader).
	Role string `json:"role"`
	// Leader is the leader's advertise URL; "" while no server leads.
	Leader string `json:"leader"`
	// Epoch is the leader's writer epoch: it grows with every new leader.
	Epoch uint64 `json:"epoch"`
	// Store names the store's engine: "embedded", "etcd" or "postgres".
	Store string `json:"store"`
	// Servers are the servers that share the store, this one included.
	Servers []ClusterServer `json:"servers"`
}

// ClusterServer is one server of a ClusterStatus.
type ClusterServer struct {
	URL  string `json:"url"`  // its advertise URL; "" for an embedded store's server
	Role string `json:"role"` // "leader" or "standby"
}

// Roles of ClusterStatus and ClusterServer.
const (
	RoleLeader  = "leader"
	RoleStandby = "standby"
)

// Event is a watch event as GET /v1/watch sends it in an event's data: one
// JSON object; members that do not apply to its type are absent. Its SSE
// id, "<stream>-<seq>", is not in the data.
type Event struct {
	Type      string      `json:"type"`
	Resource  string      `json:"resource,omitempty"`
	Holder    string      `json:"holder,omitempty"`
	Token     fence.Token `json:"token,omitempty"`
	LastFence fence.Token `json:"last_fence,omitempty"`
	Key       string      `json:"key,omitempty"`
	Op        string      `json:"op,omitempty"`
	ExpiresAt string      `json:"expires_at,omitempty"`
	Mode      string      `json:"mode,omitempty"` // ModeShared for a shared hold's event
	Time      string      `json:"time"`
	Detail    string      `json:"detail,omitempty"`
}
