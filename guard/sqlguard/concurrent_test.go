package sqlguard_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/fencetest"
	"github.com/fence-lock/fence/guard/reject"
	"github.com/fence-lock/fence/guard/sqlguard"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestGuard_RacingTokens runs many writers whose tokens race upward (each
// write takes the next token of a shared counter, as successive lock holders
// do), each write appending its token to a log table and setting a value,
// and checks the end state: the log holds exactly the accepted writes, in
// commit order with non-decreasing tokens; the fence and the value are the
// highest accepted token's; the rejected writes left nothing.
func TestGuard_RacingTokens(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		a := newGuarded(t, b)
		logDDL := `CREATE TABLE ` + a.ns + `.log (id bigserial PRIMARY KEY, token bigint NOT NULL)`
		if b.dialect == sqlguard.MySQL {
			logDDL = `CREATE TABLE ` + a.ns + `.log (id bigint AUTO_INCREMENT PRIMARY KEY, token bigint NOT NULL) ENGINE=InnoDB`
		}
		if _, err := a.db.ExecContext(t.Context(), logDDL); err != nil {
			t.Fatal(err)
		}
		const writers, perWriter = 12, 20
		var (
			next     atomic.Int64
			accepted atomic.Int64
			rejected atomic.Int64
			mu       sync.Mutex
			top      fence.Token
			wg       sync.WaitGroup
		)
		start := make(chan struct{})
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range perWriter {
					token := fence.Token(next.Add(1))
					err := a.Run(t.Context(), "r", token, func(ctx context.Context, tx *sql.Tx) error {
						if _, err := tx.ExecContext(ctx, `INSERT INTO `+a.ns+`.log (token) VALUES (`+b.ph(1)+`)`, int64(token)); err != nil {
							return err
						}
						return a.apply(ctx, tx, "r", kv("k", token.String()))
					})
					var fe *fence.FencedError
					switch {
					case err == nil:
						accepted.Add(1)
						mu.Lock()
						top = max(top, token)
						mu.Unlock()
					case errors.As(err, &fe):
						if fe.LastFence <= token {
							t.Errorf("token %d rejected by fence %d", token, fe.LastFence)
						}
						rejected.Add(1)
					default:
						t.Errorf("Run(%d): %v", token, err)
						return
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			return
		}
		rows, err := a.db.QueryContext(t.Context(), `SELECT token FROM `+a.ns+`.log ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var n int64
		var last int64
		for rows.Next() {
			var tok int64
			if err := rows.Scan(&tok); err != nil {
				t.Fatal(err)
			}
			if tok < last {
				t.Fatalf("token %d committed after token %d", tok, last)
			}
			last = tok
			n++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if n != accepted.Load() || n == 0 {
			t.Fatalf("%d writes logged, %d accepted", n, accepted.Load())
		}
		t.Logf("%d accepted, %d rejected", accepted.Load(), rejected.Load())
		fencetest.WantState(t, a, "r", top, "k", top.String())
	})
}

// TestGuard_Rejections checks that every refusal, and nothing else, is
// counted once in the Recorder, and logged.
func TestGuard_Rejections(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		a := newGuarded(t, b)
		reg := prometheus.NewRegistry()
		var logs strings.Builder
		rec, err := reject.New("sqlguard", slog.New(slog.NewTextHandler(&logs, nil)), reg)
		if err != nil {
			t.Fatal(err)
		}
		a.Rejections = rec
		ok := func(context.Context, *sql.Tx) error { return nil }
		ctx := t.Context()
		if err := a.Claim(ctx, "r", 10); err != nil {
			t.Fatal(err)
		}
		a.Run(ctx, "r", 9, ok)                                                                    // fenced
		a.Claim(ctx, "r", 8)                                                                      // fenced
		a.Run(ctx, "r", 0, ok)                                                                    // invalid token
		a.Run(ctx, "", 11, ok)                                                                    // bad request
		a.Run(ctx, "r", 12, func(context.Context, *sql.Tx) error { return errBoom })              // fn's error: not counted
		a.Run(ctx, "r", 12, func(context.Context, *sql.Tx) error { return &fence.FencedError{} }) // fn's, even a FencedError
		tx, err := a.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		a.Check(ctx, tx, "r", 7) // fenced
		tx.Rollback()
		a.Keys = fence.KeySet{}
		a.Run(ctx, "r", 20, ok) // invalid sequencer
		a.Keys = nil
		if err := a.Run(ctx, "r", 10, ok); err != nil { // accepted: not counted
			t.Fatal(err)
		}
		for reason, want := range map[string]float64{reject.ReasonFenced: 3, reject.ReasonInvalidToken: 1, reject.ReasonBadRequest: 1, reject.ReasonInvalidSequencer: 1} {
			if got := counted(t, reg, reason); got != want {
				t.Errorf("%s{reason=%s} = %g, want %g", reject.MetricName, reason, got, want)
			}
		}
		if n := strings.Count(logs.String(), "guarded write rejected"); n != 6 {
			t.Errorf("%d log lines, want 6:\n%s", n, logs.String())
		}
		if !strings.Contains(logs.String(), "op=check") || !strings.Contains(logs.String(), "last_fence=10") {
			t.Errorf("logs:\n%s", logs.String())
		}
	})
}

var errBoom = errors.New("boom")

func counted(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	n, err := testutil.GatherAndCount(reg, reject.MetricName)
	if err != nil || n == 0 {
		t.Fatalf("gather: %d, %v", n, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["store"] == "sqlguard" && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
