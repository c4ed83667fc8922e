package fence

import (
	"context"
	"fmt"
)

type sequencerKey struct{}

// WithSequencer returns a copy of ctx that carries sequencer s, the signed
// form of the fencing token that a write in ctx presents. Guards with Keys set
// and httpapi.RequireFenceSigned verify it; the client package sends it in the
// Fence-Sequencer header. "" carries none.
func WithSequencer(ctx context.Context, s string) context.Context {
	return context.WithValue(ctx, sequencerKey{}, s)
}

// SequencerFrom returns the sequencer set by WithSequencer, and whether there
// is a non-empty one.
func SequencerFrom(ctx context.Context) (string, bool) {
	s, _ := ctx.Value(sequencerKey{}).(string)
	return s, s != ""
}

// Check is what a guard with keys ks requires before a write or claim of
// resource with token: nil if ks is nil (sequencers not required); otherwise
// ctx must carry a sequencer (WithSequencer) that ks.Verify accepts for exactly
// resource and token. Its errors wrap ErrInvalidSequencer. Check does not
// compare token with any fence: a valid sequencer never makes a stale token
// acceptable. An empty but non-nil KeySet rejects every sequencer.
func (ks KeySet) Check(ctx context.Context, resource string, token Token) error {
	if ks == nil {
		return nil
	}
	s, ok := SequencerFrom(ctx)
	if !ok {
		return fmt.Errorf("%w: no sequencer", ErrInvalidSequencer)
	}
	_, err := ks.Verify(s, resource, token)
	return err
}
