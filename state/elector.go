package state

import (
	"context"
	"time"
)

// Member is a fence server that shares a replicated store with others.
type Member struct {
	URL   string // its advertise URL, where clients and the other servers reach it
	KeyID string // the ID of the key that signs its sequencers; "" if none
}

// Term is one leadership of a store by one server: from the writer epoch it
// raised until the engine may have given the store to another.
type Term interface {
	// Epoch is the writer epoch this server raised; every commit of the
	// term is conditional on it.
	Epoch() Epoch
	// Done is closed when the engine may have let another server lead
	// (the leadership's lease expired or was lost). The epoch check keeps
	// commits safe after that; Done lets the server step down promptly.
	Done() <-chan struct{}
	// Resign ends the leadership so that another server can take over at
	// once. Commits under the term's epoch fail after it.
	Resign(ctx context.Context) error
}

// Elector is implemented by replicated engines: leadership of the store is
// decided through the engine itself, so that at most one server raises each
// epoch. Implementations are safe for concurrent use.
type Elector interface {
	// Campaign waits until this server leads the store, then raises the
	// writer epoch with a durable compare-and-swap and returns the term.
	Campaign(ctx context.Context) (Term, error)
	// Leader returns the server that leads now and its epoch; ok is false
	// while none does (an election or a takeover in progress).
	Leader(ctx context.Context) (leader Member, epoch Epoch, ok bool, err error)
	// Members returns the servers that share the store now (those alive,
	// as the engine knows them), this one included.
	Members(ctx context.Context) ([]Member, error)
}

// EngineOptions configure a replicated engine (etcd.Store, postgres.Store)
// when it is opened.
type EngineOptions struct {
	// Self is the server that opens it, as the others see it.
	Self Member
	// ElectionTTL is the lease of this server's leadership and membership:
	// a leader that dies is replaced about this long after. Zero means the
	// engine's default (2s).
	ElectionTTL time.Duration
	// UnsafeSkipEpochCheck makes commits skip the writer-epoch check. It
	// exists only so that tests can show what the check prevents: never
	// set it elsewhere.
	UnsafeSkipEpochCheck bool
}
