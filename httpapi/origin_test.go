package httpapi

import (
	"encoding/base64"
	"testing"
)

// TestHandler_CrossSite checks that a change a page of another origin makes a
// browser send is forbidden, whatever credentials the browser attaches,
// that a browser's HTTP Basic credentials are taken for reads only, and
// that clients that are not browsers, and the dashboard's own reads, pass.
func TestHandler_CrossSite(t *testing.T) {
	e := newAuthEnv(t, false)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("anyone:admin"))
	acquire := `{"holder":"evil","ttl_ms":86400000}`

	// A page on another origin: Sec-Fetch-Site (every browser since 2023),
	// or only Origin (older ones); any method that changes state.
	e.do("POST", "/v1/locks/orders/acquire", acquire, "Authorization", "Bearer orders", "Sec-Fetch-Site", "cross-site").problem(t, 403, "forbidden")
	e.do("POST", "/v1/locks/orders/acquire", acquire, "Authorization", "Bearer orders", "Sec-Fetch-Site", "same-site").problem(t, 403, "forbidden")
	e.do("POST", "/v1/locks/orders/revoke", "", "Authorization", "Bearer admin", "Origin", "http://evil.example").problem(t, 403, "forbidden")
	e.do("POST", "/v1/txn", `{"fences":{}}`, "Authorization", "Bearer orders", "Origin", "http://evil.example", "Content-Type", "text/plain").problem(t, 403, "forbidden")
	e.do("PUT", "/v1/kv/orders/k", "v", "Authorization", "Bearer orders", "Fencing-Token", "1", "Sec-Fetch-Site", "cross-site").problem(t, 403, "forbidden")
	// Refused before the lock service saw it: orders is free.
	if b := e.do("GET", "/v1/locks/orders", "", "Authorization", "Bearer orders").ok(t); b["held"] != false {
		t.Fatalf("orders after the refused acquires: %v, want it free", b)
	}

	// Basic credentials, which a browser sends on its own, never change
	// anything, even from the same origin.
	e.do("POST", "/v1/locks/orders/revoke", "", "Authorization", basic).problem(t, 401, "unauthorized")
	e.do("POST", "/v1/locks/orders/acquire", acquire, "Authorization", basic, "Sec-Fetch-Site", "same-origin").problem(t, 401, "unauthorized")

	// What passes: a client that is not a browser, a same-origin page, and
	// reads from anywhere (a page of another origin cannot read the answer).
	e.do("POST", "/v1/locks/orders/acquire", `{"holder":"a"}`, "Authorization", "Bearer orders").ok(t)
	e.do("POST", "/v1/locks/orders/acquire", `{"holder":"a"}`, "Authorization", "Bearer orders", "Sec-Fetch-Site", "same-origin").ok(t)
	e.do("GET", "/v1/locks/orders", "", "Authorization", "Bearer orders", "Sec-Fetch-Site", "cross-site").ok(t)
	e.do("GET", "/v1/locks/orders", "", "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("anyone:orders")), "Sec-Fetch-Site", "same-origin").ok(t)
}
