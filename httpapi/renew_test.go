package httpapi

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fence-lock/fence/wire"
)

// TestHandler_RenewDeadline checks Fence-Deadline on a renewal: one read
// after its client gave up is refused and applies nothing; one in time, or
// without the header, renews; a malformed one is 400.
func TestHandler_RenewDeadline(t *testing.T) {
	e := newEnv(t)
	tok := e.acquire("orders", "A")
	body := fmt.Sprintf(`{"token":%d,"ttl_ms":60000}`, tok)
	before := e.do("GET", "/v1/locks/orders", "").ok(t)["expires_at"]
	past := time.Now().Add(-50 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	p := e.do("POST", "/v1/locks/orders/renew", body, wire.DeadlineHeader, past).problem(t, 400, "bad_request")
	if d := p["detail"].(string); !strings.Contains(d, "given up") || !strings.Contains(d, past) {
		t.Errorf("detail %q does not say the client gave up", d)
	}
	if after := e.do("GET", "/v1/locks/orders", "").ok(t)["expires_at"]; after != before {
		t.Fatalf("a renewal past its deadline moved the expiry from %v to %v", before, after)
	}
	if got := e.f.Calls("Renew"); got != 0 {
		t.Fatalf("the lock service was asked to renew %d times, want 0", got)
	}
	e.do("POST", "/v1/locks/orders/renew", body, wire.DeadlineHeader, "soon").problem(t, 400, "bad_request")
	e.do("POST", "/v1/locks/orders/renew", body, wire.DeadlineHeader, time.Now().Add(time.Minute).UTC().Format(time.RFC3339)).ok(t)
	e.do("POST", "/v1/locks/orders/renew", body).ok(t)
}
