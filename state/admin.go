package state

import (
	"fmt"

	"github.com/fence-lock/fence"
)

// Bump raises the resource's last token by n and its fence to that token,
// and ends its lease and lock-delay: what a store restored from a backup
// needs, since tokens were issued after the backup was taken that it does
// not know of. Every token issued before is then fenced, and the next grant
// gets a greater one. It changes nothing and returns ErrTokensExhausted if
// the token would pass fence.MaxToken.
func Bump(tx Tx, resource string, n fence.Token) error {
	r, err := tx.Resource(resource)
	if err != nil {
		return err
	}
	if r.LastToken > fence.MaxToken-n {
		return fmt.Errorf("%w: %q: bumping %d by %d passes %d", ErrTokensExhausted, resource, r.LastToken, n, fence.MaxToken)
	}
	r.LastToken += n
	r.LastFence = r.LastToken
	r.LeaseToken, r.Holder, r.Owner, r.TTL, r.Expires, r.Delay = 0, "", "", 0, 0, 0
	return tx.SetResource(resource, r)
}

// BumpRev raises the store revision by n, so that a revision handed out
// after a backup was taken is not handed out again for other data.
func BumpRev(tx Tx, n fence.Rev) error {
	rev, err := tx.Rev()
	if err != nil {
		return err
	}
	if rev > MaxRev-n {
		return fmt.Errorf("%w: bumping revision %d by %d passes %d", ErrRevisionsExhausted, rev, n, MaxRev)
	}
	return tx.SetRev(rev + n)
}
