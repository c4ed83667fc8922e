package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// maxBody bounds the response bodies the benchmark reads.
const maxBody = 1 << 20

// apiError is an answer other than 200: a problem with its code, or a body
// that is not one.
type apiError struct {
	status int
	code   string // the problem's code; "http_<status>" if it has none
	detail string
}

func (e *apiError) Error() string {
	if e.detail == "" {
		return fmt.Sprintf("%d %s", e.status, e.code)
	}
	return fmt.Sprintf("%d %s: %s", e.status, e.code, e.detail)
}

// badResponse is a 200 whose body could not be read as the expected JSON.
type badResponse struct{ err error }

func (e *badResponse) Error() string { return "bad response: " + e.err.Error() }
func (e *badResponse) Unwrap() error { return e.err }

// Error codes of failures that are not problems.
const (
	codeNetwork     = "network"      // the request or response was lost: refused, reset, closed
	codeTimeout     = "timeout"      // the request ran out of Config.Timeout
	codeBadResponse = "bad_response" // a 200 the benchmark could not read
	codeFenced      = "fenced"       // the API's code for a stale token
	codeLeaseLost   = "lease_lost"   // the API's code for a lease that is no longer current
	codeNotIssued   = "token_not_issued"
)

// errorCode returns the code under which err is counted: the problem's
// code, or "network", "timeout" or "bad_response".
func errorCode(err error) string {
	var api *apiError
	if errors.As(err, &api) {
		return api.code
	}
	var bad *badResponse
	if errors.As(err, &bad) {
		return codeBadResponse
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return codeTimeout
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return codeTimeout
	}
	return codeNetwork
}

// endpoints are the URLs of one resource.
type endpoints struct {
	acquire, renew, release, kv string
}

func newEndpoints(base, resource, key string) endpoints {
	locks := base + "/v1/locks/" + escapeSegment(resource)
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = escapeSegment(s)
	}
	return endpoints{
		acquire: locks + "/acquire",
		renew:   locks + "/renew",
		release: locks + "/release",
		kv:      base + "/v1/kv/" + escapeSegment(resource) + "/" + strings.Join(segs, "/"),
	}
}

// escapeSegment percent-encodes s as one path segment ('/' included).
func escapeSegment(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// conn is one client's HTTP connection and buffers. It is not safe for
// concurrent use.
type conn struct {
	http      *http.Client
	acquireJS []byte // the acquire body, the same for every acquire of this client
	tryJS     []byte // the same without waiting
	authToken string // sent as a bearer token if not ""
	resp      bytes.Buffer
}

// newConn returns a conn with a transport of its own, so that the client
// keeps one connection to the server.
func newConn(holder string, ttlMS, waitMS int64) *conn {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 1
	t.DisableCompression = true
	body := func(waitMS int64) []byte {
		b, _ := json.Marshal(struct {
			Holder string `json:"holder"`
			TTLMS  int64  `json:"ttl_ms"`
			WaitMS int64  `json:"wait_ms"`
		}{holder, ttlMS, waitMS})
		return b
	}
	return &conn{http: &http.Client{Transport: t}, acquireJS: body(waitMS), tryJS: body(0)}
}

func (c *conn) close() { c.http.CloseIdleConnections() }

// do sends one request and reads the whole answer into c.resp. A body with a
// fencingToken is a value; without, JSON. It returns *apiError for any status
// but 200.
func (c *conn) do(ctx context.Context, method, url string, body []byte, fencingToken string) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if fencingToken == "" {
		req.Header.Set("Content-Type", "application/json")
	} else {
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("Fencing-Token", fencingToken)
	}
	if c.authToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.authToken)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	c.resp.Reset()
	_, err = c.resp.ReadFrom(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var p struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(c.resp.Bytes(), &p) // a body that is no problem leaves Code empty
		if p.Code == "" {
			p.Code = "http_" + strconv.Itoa(resp.StatusCode)
		}
		return &apiError{status: resp.StatusCode, code: p.Code, detail: p.Detail}
	}
	return nil
}

// acquire asks for the lock and returns the lease's token. If wait is false,
// it does not wait for the lock, whatever the client's wait_ms.
func (c *conn) acquire(ctx context.Context, e *endpoints, wait bool) (uint64, error) {
	body := c.acquireJS
	if !wait {
		body = c.tryJS
	}
	if err := c.do(ctx, http.MethodPost, e.acquire, body, ""); err != nil {
		return 0, err
	}
	var lease struct {
		Token uint64 `json:"token"`
	}
	if err := json.Unmarshal(c.resp.Bytes(), &lease); err != nil {
		return 0, &badResponse{err}
	}
	if lease.Token == 0 {
		return 0, &badResponse{errors.New("acquire answered no token")}
	}
	return lease.Token, nil
}

// renew extends the lease of token.
func (c *conn) renew(ctx context.Context, e *endpoints, token uint64) error {
	// A new body each time: the transport may still read a request's body
	// after Do returns, so a scratch buffer cannot be reused.
	return c.do(ctx, http.MethodPost, e.renew, fmt.Appendf(nil, `{"token":%d}`, token), "")
}

// release gives the lease of token back.
func (c *conn) release(ctx context.Context, e *endpoints, token uint64) error {
	return c.do(ctx, http.MethodPost, e.release, fmt.Appendf(nil, `{"token":%d}`, token), "")
}

// put writes value with token as the Fencing-Token.
func (c *conn) put(ctx context.Context, e *endpoints, token uint64, value []byte) error {
	return c.do(ctx, http.MethodPut, e.kv, value, strconv.FormatUint(token, 10))
}

// ready checks GET /readyz.
func (c *conn) ready(ctx context.Context, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /readyz: %d %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return nil
}
