package object_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"testing"

	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/guard/object"
)

// memStore is an object store in memory with conditional writes, for the
// guard's logic alone (the stores' adapters run the same suite on real
// servers). ignoreConditions makes it a store that does not honour them:
// the check's negative control.
type memStore struct {
	mu               sync.Mutex
	next             int
	objects          map[string]memObject
	ignoreConditions bool
}

type memObject struct {
	body    []byte
	meta    map[string]string
	version object.Version
}

func newMemStore() *memStore { return &memStore{objects: make(map[string]memObject)} }

func (s *memStore) Head(ctx context.Context, key string) (object.Version, map[string]string, error) {
	_, v, meta, err := s.Get(ctx, key)
	return v, meta, err
}

func (s *memStore) Get(_ context.Context, key string) ([]byte, object.Version, map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	if !ok {
		return nil, "", nil, fmt.Errorf("%w: %s", object.ErrNotFound, key)
	}
	return append([]byte(nil), o.body...), o.version, maps.Clone(o.meta), nil
}

// holds reports whether cond holds for key; with the lock held.
func (s *memStore) holds(key string, cond object.Cond) error {
	if s.ignoreConditions {
		return nil
	}
	o, ok := s.objects[key]
	switch {
	case cond.IfAbsent && ok, cond.IfMatch != "" && ok && o.version != cond.IfMatch:
		return fmt.Errorf("%w: %s", object.ErrConditionFailed, key)
	case cond.IfMatch != "" && !ok:
		return fmt.Errorf("%w: %s", object.ErrNotFound, key)
	}
	return nil
}

func (s *memStore) Put(_ context.Context, key string, body []byte, meta map[string]string, cond object.Cond) (object.Version, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.holds(key, cond); err != nil {
		return "", err
	}
	s.next++
	v := object.Version(strconv.Itoa(s.next))
	s.objects[key] = memObject{body: append([]byte(nil), body...), meta: maps.Clone(meta), version: v}
	return v, nil
}

func (s *memStore) Delete(_ context.Context, key string, cond object.Cond) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.holds(key, cond); err != nil {
		return err
	}
	if _, ok := s.objects[key]; !ok {
		return fmt.Errorf("%w: %s", object.ErrNotFound, key)
	}
	delete(s.objects, key)
	return nil
}

func (s *memStore) Forms(v object.Version) []object.Version { return []object.Version{v} }

// TestGuard runs the object guards' conformance suite on the store in
// memory: the guard's logic, without a server.
func TestGuard(t *testing.T) {
	fencetest.TestObjectGuard(t, "memory", func(tb testing.TB) *object.Guard {
		g := object.New(newMemStore(), "memory")
		g.TrustEndpoint = true
		return g
	})
}

// TestCheck_ConditionsIgnored: a store that does not honour the conditions
// fails the check, and the guard writes nothing through it.
func TestCheck_ConditionsIgnored(t *testing.T) {
	s := newMemStore()
	s.ignoreConditions = true
	g := object.New(s, "memory")
	if _, err := g.Check(t.Context()); !errors.Is(err, object.ErrEndpoint) {
		t.Fatalf("Check: %v, want ErrEndpoint", err)
	}
	if err := g.PutObject(t.Context(), "k", []byte("v"), 1); !errors.Is(err, object.ErrEndpoint) {
		t.Fatalf("PutObject: %v, want ErrEndpoint", err)
	}
	if _, err := g.Write(t.Context(), "r", 1, object.Change{Key: "k", Value: []byte("v")}); !errors.Is(err, object.ErrEndpoint) {
		t.Fatalf("Write: %v, want ErrEndpoint", err)
	}
	if n := len(s.objects); n != 0 {
		t.Fatalf("%d objects left after the check and the refused writes, want none", n)
	}
}
