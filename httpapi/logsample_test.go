package httpapi

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence/internal/fake"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestHandler_RejectionLogBounded floods the server with bad requests: only
// the class's burst of them is logged, the rest are counted, and a fenced
// write rejected during the flood is still logged, from its own budget.
func TestHandler_RejectionLogBounded(t *testing.T) {
	fk := fake.New()
	srv := NewHandler(fk, fk)
	var log bytes.Buffer
	srv.Logger = slog.New(slog.NewJSONHandler(&log, nil))
	before := testutil.ToFloat64(rejectionLogSuppressed.WithLabelValues(logOther))
	const flood = 5000
	for range flood {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest("GET", "/v1/nope", nil))
		if w.Code != 404 {
			t.Fatalf("GET /v1/nope: %d, want 404", w.Code)
		}
	}
	lines := strings.Count(log.String(), `"request rejected"`)
	// The flood takes well under a second here; allow for a slow machine
	// refilling the budget meanwhile.
	if lines < otherLogBurst || lines > otherLogBurst+otherLogRate*10 {
		t.Fatalf("%d lines logged for %d rejections, want about the burst (%d)", lines, flood, otherLogBurst)
	}
	if got := testutil.ToFloat64(rejectionLogSuppressed.WithLabelValues(logOther)) - before; int(got) != flood-lines {
		t.Fatalf("fence_http_rejection_logs_suppressed_total{class=other} rose by %v, want %d", got, flood-lines)
	}

	// A fenced write is logged all the same.
	l, err := fk.Acquire(t.Context(), "r", "a", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fk.Revoke(t.Context(), "r"); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("PUT", "/v1/kv/r/k", strings.NewReader("v"))
	r.Header.Set("Fencing-Token", l.Token.String())
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	if w.Code != 409 || !strings.Contains(log.String(), `"code":"fenced"`) {
		t.Fatalf("fenced write: %d, logged: %v; want 409 and a log line", w.Code, strings.Contains(log.String(), `"code":"fenced"`))
	}
}

// TestLogSampler_Suppressed checks the count of suppressed lines that the
// next logged line of a class reports.
func TestLogSampler_Suppressed(t *testing.T) {
	var ls logSampler
	now := time.Now()
	for i := range otherLogBurst {
		if ok, n := ls.allow(logOther, now); !ok || n != 0 {
			t.Fatalf("line %d of the burst: allowed %v, suppressed %d; want allowed, 0", i, ok, n)
		}
	}
	for range 7 {
		if ok, _ := ls.allow(logOther, now); ok {
			t.Fatal("a line past the burst was allowed")
		}
	}
	if ok, _ := ls.allow(logInternal, now); !ok {
		t.Fatal("an internal error's line was refused: its budget is its own")
	}
	ok, n := ls.allow(logOther, now.Add(time.Second/otherLogRate))
	if !ok || n != 7 {
		t.Fatalf("the next line: allowed %v, suppressed %d; want allowed, 7", ok, n)
	}
}
