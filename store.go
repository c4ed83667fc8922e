package fence

import "context"

// Rev is a store-wide revision: it grows by one with every accepted write.
type Rev uint64

// Cond is a precondition on a key's current state; the zero Cond always holds.
type Cond struct {
	IfMatch  Rev  // if non-zero, the key must exist at this revision
	IfExists bool // the key must exist (If-Match: *)
	IfAbsent bool // the key must not exist (If-None-Match: *)
}

// Item is a stored value with the revision and token of the write that stored it.
type Item struct {
	Resource string
	Key      string
	Value    []byte
	Rev      Rev
	Token    Token
}

// WriteResult describes an accepted write.
type WriteResult struct {
	Rev       Rev    // the store revision of the write (unchanged by a claim)
	LastFence Token  // the resource's fence after the write
	Holder    string // the holder the token was granted to, if it is the current lease's; else ""
}

// OpKind is the kind of a transaction operation.
type OpKind string

// Transaction operations.
const (
	OpPut    OpKind = "put"
	OpDelete OpKind = "delete"
)

// Op is one write of a transaction.
type Op struct {
	Kind     OpKind
	Resource string
	Key      string
	Value    []byte // for OpPut
}

// Compare is a transaction precondition: the key is at Rev, or absent if Rev is 0.
type Compare struct {
	Resource string
	Key      string
	Rev      Rev
}

// MaxTxnEntries is the most entries each of a Txn's Fences, If and Then may
// have, so that the work of one transaction stays small and bounded.
const MaxTxnEntries = 1000

// Txn is an all-or-nothing transaction across resources and keys. Every entry of
// Fences is checked and raised; every Op's resource must have an entry. Each
// of Fences, If and Then has at most MaxTxnEntries entries.
type Txn struct {
	Fences map[string]Token
	If     []Compare
	Then   []Op
}

// Store is storage that enforces fencing tokens. Implementations are safe for
// concurrent use.
//
// A write with token is accepted iff LastFence(resource) <= token <= LastToken(resource),
// and then raises the resource's fence to token. A lower token returns
// *FencedError, a higher one *TokenNotIssuedError; a rejected write changes
// nothing. Writes return only after they are durable. An error that is not one
// of the fence sentinels (a context cancelled, an I/O failure) leaves the
// outcome unknown.
type Store interface {
	// Put stores value under resource/key if c holds and the token is accepted.
	// It returns ErrPreconditionFailed if c does not hold.
	Put(ctx context.Context, resource, key string, value []byte, token Token, c Cond) (WriteResult, error)
	// Delete removes resource/key. It returns ErrNotFound if the key does not exist.
	Delete(ctx context.Context, resource, key string, token Token, c Cond) (WriteResult, error)
	// Get returns the item stored under resource/key, or ErrNotFound.
	Get(ctx context.Context, resource, key string) (Item, error)
	// Fence returns the resource's last fence, 0 if it was never fenced.
	Fence(ctx context.Context, resource string) (Token, error)
	// Claim raises the resource's fence to token without writing a key.
	Claim(ctx context.Context, resource string, token Token) (WriteResult, error)
	// Txn applies t all or nothing and returns the revision its writes share
	// (the current revision if it has none). A failed compare returns ErrPreconditionFailed.
	Txn(ctx context.Context, t *Txn) (Rev, error)
}

// UnfencedStore is implemented by stores that can also write best-effort
// resources without a fencing token (fence serve --unfenced): a cache fill,
// say, whose loss of mutual exclusion only wastes work. The fence is neither
// checked nor raised, and the stored item has token 0. Ledgers, inventory
// and bookings must never be written this way.
type UnfencedStore interface {
	// PutUnfenced stores value under resource/key if c holds.
	PutUnfenced(ctx context.Context, resource, key string, value []byte, c Cond) (WriteResult, error)
	// DeleteUnfenced removes resource/key if c holds and the key exists.
	DeleteUnfenced(ctx context.Context, resource, key string, c Cond) (WriteResult, error)
}

// FenceStatus is a resource's fencing state: the last token the lock
// service issued for it and the last fence its storage accepted or a grant
// raised (LastFence <= LastToken).
type FenceStatus struct {
	Resource  string
	LastToken Token
	LastFence Token
}

// FenceLister is implemented by stores that can list every resource they
// hold fencing state for, held now or not.
type FenceLister interface {
	// ListFences returns the resources with a token issued or a fence
	// raised whose names start with prefix, sort after after (byte order;
	// "" from the first) and keep accepts (nil: all), in byte order, at
	// most limit (1..MaxListLimit) of them, and whether more follow. One
	// call reads the store once, however few keep accepts. It wraps
	// ErrBadRequest for a limit out of range.
	ListFences(ctx context.Context, prefix, after string, limit int, keep func(resource string) bool) (fences []FenceStatus, more bool, err error)
}
