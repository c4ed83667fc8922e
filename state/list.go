package state

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fence-lock/fence"
)

var _ fence.FenceLister = (*DB)(nil)

// ListFences implements fence.FenceLister on committed state (confirmed
// like any read). It reads every resource's record: a page costs the
// number of resources the store holds, not the page's size.
func (db *DB) ListFences(ctx context.Context, prefix, after string, limit int, keep func(string) bool) ([]fence.FenceStatus, bool, error) {
	if limit < 1 || limit > fence.MaxListLimit {
		return nil, false, fmt.Errorf("%s: list fences: %w: limit %d is outside 1..%d", db.name, fence.ErrBadRequest, limit, fence.MaxListLimit)
	}
	var fences []fence.FenceStatus
	err := db.View(ctx, func(tx Tx) error {
		fences = fences[:0] // a View may run fn again
		return tx.Resources(func(name string, r Resource) error {
			if strings.HasPrefix(name, prefix) && name > after && (r.LastToken > 0 || r.LastFence > 0) && (keep == nil || keep(name)) {
				fences = append(fences, fence.FenceStatus{Resource: name, LastToken: r.LastToken, LastFence: r.LastFence})
				if len(fences) > 4*(limit+1) { // keep memory to the page's order
					fences = firstFences(fences, limit+1)
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, false, db.wrap(err, "list fences")
	}
	fences = firstFences(fences, limit+1)
	more := len(fences) > limit
	if more {
		fences = fences[:limit:limit]
	}
	return fences, more, nil
}

// firstFences returns the first n of fences in byte order of their names.
func firstFences(fences []fence.FenceStatus, n int) []fence.FenceStatus {
	slices.SortFunc(fences, func(a, b fence.FenceStatus) int { return strings.Compare(a.Resource, b.Resource) })
	return fences[:min(n, len(fences))]
}
