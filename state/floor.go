package state

import (
	"fmt"

	"github.com/fence-lock/fence"
)

// FloorName is the name of the record that holds a store's token floor:
// every resource, whether it has a record or not, is read as if its last
// token and its fence were at least the floor, and a lease with a token
// below it as ended. Raising the floor is one write that fences every token
// issued below it, on every resource, known to the store or not: what a
// store restored from a backup needs (see RaiseFloor).
//
// The floor is kept as one more resource record (LastToken is the floor),
// so that every engine stores, replicates, snapshots and migrates it as it
// does any record. No resource can be named so (the name holds a control
// character), and DB never shows the record as a resource.
const FloorName = "\x7ffence.floor"

// Floor returns the store's token floor; 0 if none was set.
func Floor(tx Tx) (fence.Token, error) {
	if f, ok := tx.(*flooredTx); ok {
		return f.floorValue()
	}
	r, err := tx.Resource(FloorName)
	return r.LastToken, err
}

// RaiseFloor sets the store's token floor n above the highest token it
// knows of, on any resource, and the store revision n above its own: run
// on a store restored from a backup, before any server serves it, with n
// larger than the number of grants (and writes) of any one resource made
// after the backup was taken. Every token issued before the restore is then
// below the floor: fenced, its lease ended, on every resource, including
// those created after the backup, which the store does not know. It returns
// the new floor, and changes nothing if the floor or the revision would
// pass its maximum (ErrTokensExhausted, ErrRevisionsExhausted).
func RaiseFloor(tx Tx, n fence.Token) (fence.Token, error) {
	if n < 1 {
		return 0, fmt.Errorf("%w: raise the token floor by %d: want 1 or more", fence.ErrBadRequest, n)
	}
	highest, err := Floor(tx)
	if err != nil {
		return 0, err
	}
	err = tx.Resources(func(name string, r Resource) error {
		highest = max(highest, r.LastToken, r.LastFence)
		return nil
	})
	if err != nil {
		return 0, err
	}
	if highest > fence.MaxToken-n {
		return 0, fmt.Errorf("%w: raising the token floor from %d by %d passes %d", ErrTokensExhausted, highest, n, fence.MaxToken)
	}
	rev, err := tx.Rev()
	if err != nil {
		return 0, err
	}
	if rev > MaxRev-fence.Rev(n) {
		return 0, fmt.Errorf("%w: bumping revision %d by %d passes %d", ErrRevisionsExhausted, rev, n, MaxRev)
	}
	floor := highest + n
	if err := tx.SetResource(FloorName, Resource{LastToken: floor, LastFence: floor}); err != nil {
		return 0, err
	}
	return floor, tx.SetRev(rev + fence.Rev(n))
}

// floored applies the floor to r: a resource whose last token is below it
// reads as one whose every token up to the floor was issued and fenced,
// with no lease and no lock-delay. A resource granted since the floor was
// raised has a last token above it, and reads as it is.
func floored(r Resource, floor fence.Token) Resource {
	if r.LastToken >= floor {
		return r
	}
	return Resource{LastToken: floor, LastFence: floor}
}

// flooredTx is the Tx that DB gives the rules: an engine's Tx whose
// resources read through the floor, and whose listing leaves the floor's
// record out. It reads the floor once, when first needed.
type flooredTx struct {
	Tx
	floor fence.Token
	read  bool
}

// withFloor returns tx reading through the store's floor.
func withFloor(tx Tx) *flooredTx { return &flooredTx{Tx: tx} }

func (f *flooredTx) floorValue() (fence.Token, error) {
	if !f.read {
		r, err := f.Tx.Resource(FloorName)
		if err != nil {
			return 0, err
		}
		f.floor, f.read = r.LastToken, true
	}
	return f.floor, nil
}

// Resource implements Tx.
func (f *flooredTx) Resource(name string) (Resource, error) {
	r, err := f.Tx.Resource(name)
	if err != nil || name == FloorName {
		return r, err
	}
	floor, err := f.floorValue()
	if err != nil {
		return Resource{}, err
	}
	return floored(r, floor), nil
}

// SetResource implements Tx.
func (f *flooredTx) SetResource(name string, r Resource) error {
	if err := f.Tx.SetResource(name, r); err != nil {
		return err
	}
	if name == FloorName {
		f.floor, f.read = r.LastToken, true
	}
	return nil
}

// Resources implements Tx: every resource with a record, through the floor.
func (f *flooredTx) Resources(fn func(name string, r Resource) error) error {
	floor, err := f.floorValue()
	if err != nil {
		return err
	}
	return f.Tx.Resources(func(name string, r Resource) error {
		if name == FloorName {
			return nil
		}
		return fn(name, floored(r, floor))
	})
}
