package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fence-lock/fence/state"
)

// Take leads the shared store that storeURL names for a tool (fence migrate,
// fence bump) and returns its state, and a function that gives the store up
// again. It waits at most wait for the leadership: the tool must run while
// no fence server does, and a server that leads makes it fail, naming that
// server. While the tool leads, servers that start stand by.
func Take(ctx context.Context, storeURL string, wait time.Duration) (*state.DB, func() error, error) {
	eng, err := OpenEngine(ctx, storeURL, state.EngineOptions{Self: state.Member{URL: "fence-admin:"}})
	if err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	t, err := eng.Campaign(cctx)
	if err != nil {
		msg := err
		if errors.Is(err, context.DeadlineExceeded) {
			msg = errors.New("another server leads the store: stop every fence server on it first")
			if m, _, ok, lerr := eng.Leader(ctx); lerr == nil && ok {
				msg = fmt.Errorf("%s leads the store: stop every fence server on it first", m.URL)
			}
		}
		eng.Close()
		return nil, nil, fmt.Errorf("server: taking the store: %w", msg)
	}
	cache, err := state.NewLeaderEngine(ctx, eng, t.Epoch())
	if err != nil {
		t.Resign(context.Background())
		eng.Close()
		return nil, nil, err
	}
	db := state.NewDB(EngineName(storeURL), cache)
	release := func() error {
		db.Close()
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer rcancel()
		return errors.Join(t.Resign(rctx), eng.Close())
	}
	return db, release, nil
}
