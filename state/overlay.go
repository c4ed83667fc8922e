package state

import (
	"maps"

	"github.com/fence-lock/fence"
)

// Base is committed state that an Overlay reads through to. Its methods
// see only committed changes; implementations say whether they are safe
// for concurrent use.
type Base interface {
	Resource(name string) (Resource, error)
	Entry(resource, key string) (Entry, bool, error)
	Rev() (fence.Rev, error)
	// Resources calls fn for every resource with state, in any order.
	Resources(fn func(name string, r Resource) error) error
}

// Overlay is a Tx over a Base that keeps its writes aside, for engines that
// apply a transaction after it is durable (a log, a remote engine): reads see
// the transaction's own writes, then the Base; Changes returns the writes.
// It is not safe for concurrent use.
type Overlay struct {
	base      Base
	resources map[string]Resource
	entries   map[EntryID]*Entry // nil: deleted
	rev       fence.Rev
	revRead   bool // rev holds the Base's revision or a newer one
	revSet    bool
}

var _ Tx = (*Overlay)(nil)

// NewOverlay returns an empty transaction over base.
func NewOverlay(base Base) *Overlay {
	return &Overlay{base: base, resources: map[string]Resource{}, entries: map[EntryID]*Entry{}}
}

// Changes returns the writes of the transaction.
func (o *Overlay) Changes() (*Changes, error) {
	rev, err := o.Rev()
	if err != nil {
		return nil, err
	}
	return &Changes{Resources: o.resources, Entries: o.entries, Rev: rev, RevSet: o.revSet}, nil
}

// Resource implements Tx.
func (o *Overlay) Resource(name string) (Resource, error) {
	if r, ok := o.resources[name]; ok {
		return r, nil
	}
	return o.base.Resource(name)
}

// SetResource implements Tx.
func (o *Overlay) SetResource(name string, r Resource) error {
	o.resources[name] = r
	return nil
}

// Entry implements Tx.
func (o *Overlay) Entry(resource, key string) (Entry, bool, error) {
	if e, ok := o.entries[EntryID{resource, key}]; ok {
		if e == nil {
			return Entry{}, false, nil
		}
		return *e, true, nil
	}
	return o.base.Entry(resource, key)
}

// SetEntry implements Tx. It keeps a copy of the value: the caller's buffer
// is not the transaction's.
func (o *Overlay) SetEntry(resource, key string, e Entry) error {
	e.Value = append(make([]byte, 0, len(e.Value)), e.Value...)
	o.entries[EntryID{resource, key}] = &e
	return nil
}

// DeleteEntry implements Tx.
func (o *Overlay) DeleteEntry(resource, key string) error {
	o.entries[EntryID{resource, key}] = nil
	return nil
}

// Rev implements Tx.
func (o *Overlay) Rev() (fence.Rev, error) {
	if !o.revRead {
		rev, err := o.base.Rev()
		if err != nil {
			return 0, err
		}
		o.rev, o.revRead = rev, true
	}
	return o.rev, nil
}

// SetRev implements Tx.
func (o *Overlay) SetRev(rev fence.Rev) error {
	o.rev, o.revRead, o.revSet = rev, true, true
	return nil
}

// Resources implements Tx.
func (o *Overlay) Resources(fn func(name string, r Resource) error) error {
	err := o.base.Resources(func(name string, r Resource) error {
		if _, ok := o.resources[name]; ok {
			return nil // the transaction's own, below
		}
		return fn(name, r)
	})
	if err != nil {
		return err
	}
	for name, r := range o.resources {
		if err := fn(name, r); err != nil {
			return err
		}
	}
	return nil
}

// Pending is the state that a transaction sent now builds on (see Sender):
// the changes of the transactions in flight, the newest first, over the
// committed state.
type Pending struct {
	Committed Base
	InFlight  []*Changes // oldest first
}

var _ Base = Pending{}

// Resource implements Base.
func (p Pending) Resource(name string) (Resource, error) {
	for i := len(p.InFlight) - 1; i >= 0; i-- {
		if r, ok := p.InFlight[i].Resources[name]; ok {
			return r, nil
		}
	}
	return p.Committed.Resource(name)
}

// Entry implements Base.
func (p Pending) Entry(resource, key string) (Entry, bool, error) {
	for i := len(p.InFlight) - 1; i >= 0; i-- {
		if e, ok := p.InFlight[i].Entries[EntryID{resource, key}]; ok {
			if e == nil {
				return Entry{}, false, nil
			}
			return *e, true, nil
		}
	}
	return p.Committed.Entry(resource, key)
}

// Rev implements Base.
func (p Pending) Rev() (fence.Rev, error) {
	if n := len(p.InFlight); n > 0 {
		return p.InFlight[n-1].Rev, nil
	}
	return p.Committed.Rev()
}

// Resources implements Base.
func (p Pending) Resources(fn func(name string, r Resource) error) error {
	if len(p.InFlight) == 0 {
		return p.Committed.Resources(fn)
	}
	all := map[string]Resource{}
	if err := p.Committed.Resources(func(name string, r Resource) error {
		all[name] = r
		return nil
	}); err != nil {
		return err
	}
	for _, c := range p.InFlight {
		maps.Copy(all, c.Resources)
	}
	for name, r := range all {
		if err := fn(name, r); err != nil {
			return err
		}
	}
	return nil
}
