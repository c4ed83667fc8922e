package chaos

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/fence-lock/fence"
)

// unsafeStore is a last-writer-wins store: it takes the same requests as
// fence storage and assigns revisions the same way, but accepts every token.
// It exists only to show that the checker catches what fencing prevents.
type unsafeStore struct {
	mu      sync.Mutex
	rev     fence.Rev
	entries map[[2]string]fence.Item
}

var _ fence.Store = (*unsafeStore)(nil)

func newUnsafeStore() *unsafeStore {
	return &unsafeStore{entries: map[[2]string]fence.Item{}}
}

func (s *unsafeStore) Put(ctx context.Context, resource, key string, value []byte, token fence.Token, c fence.Cond) (fence.WriteResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev++
	s.entries[[2]string{resource, key}] = fence.Item{Resource: resource, Key: key, Value: bytes.Clone(value), Rev: s.rev, Token: token}
	return fence.WriteResult{Rev: s.rev, LastFence: token}, nil
}

func (s *unsafeStore) Delete(ctx context.Context, resource, key string, token fence.Token, c fence.Cond) (fence.WriteResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.entries[[2]string{resource, key}]; !ok {
		return fence.WriteResult{}, fmt.Errorf("%w: %q", fence.ErrNotFound, key)
	}
	s.rev++
	delete(s.entries, [2]string{resource, key})
	return fence.WriteResult{Rev: s.rev, LastFence: token}, nil
}

func (s *unsafeStore) Get(ctx context.Context, resource, key string) (fence.Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	item, ok := s.entries[[2]string{resource, key}]
	if !ok {
		return fence.Item{}, fmt.Errorf("%w: %q", fence.ErrNotFound, key)
	}
	item.Value = bytes.Clone(item.Value)
	return item, nil
}

func (s *unsafeStore) Fence(ctx context.Context, resource string) (fence.Token, error) { return 0, nil }

func (s *unsafeStore) Claim(ctx context.Context, resource string, token fence.Token) (fence.WriteResult, error) {
	return fence.WriteResult{LastFence: token}, nil
}

func (s *unsafeStore) Txn(ctx context.Context, t *fence.Txn) (fence.Rev, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(t.Then) == 0 {
		return s.rev, nil
	}
	s.rev++
	for _, op := range t.Then {
		k := [2]string{op.Resource, op.Key}
		if op.Kind == fence.OpDelete {
			delete(s.entries, k)
			continue
		}
		s.entries[k] = fence.Item{Resource: op.Resource, Key: op.Key, Value: bytes.Clone(op.Value), Rev: s.rev, Token: t.Fences[op.Resource]}
	}
	return s.rev, nil
}
