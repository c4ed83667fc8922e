package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// leakCheck fails the test if, after every other cleanup, more goroutines
// run than when it was called. Call it first, so that its cleanup runs last.
func leakCheck(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutines: %d before, %d after\n%s", before, n, buf)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// newServer starts an HTTP server on 127.0.0.1. /name answers name, /echo
// answers the request body, /slow signals entered (if not nil) and waits
// until the request is cancelled.
func newServer(t *testing.T, name string, entered chan<- struct{}) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/name", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, name)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Write(b)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		if entered != nil {
			entered <- struct{}{}
		}
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		io.WriteString(w, "slow")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func newProxy(t *testing.T, upstream string) *Proxy {
	t.Helper()
	p, err := New("127.0.0.1:0", upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func newClient(t *testing.T, timeout time.Duration) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: timeout}
}

func get(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func post(c *http.Client, url string, body []byte) ([]byte, error) {
	resp, err := c.Post(url, "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// setup starts a server, a proxy to it and a client, and returns the proxy
// and the base URL of the server through it.
func setup(t *testing.T, entered chan<- struct{}, timeout time.Duration) (*Proxy, *http.Client, string) {
	srv := newServer(t, "A", entered)
	p := newProxy(t, srv.Listener.Addr().String())
	return p, newClient(t, timeout), "http://" + p.Addr()
}

func TestPassthrough(t *testing.T) {
	leakCheck(t)
	p, c, base := setup(t, nil, 5*time.Second)

	for i := range 5 {
		got, err := get(c, base+"/name")
		if err != nil || got != "A" {
			t.Fatalf("GET %d: %q, %v", i, got, err)
		}
	}
	if got, err := post(c, base+"/echo", []byte("hello")); err != nil || string(got) != "hello" {
		t.Fatalf("POST: %q, %v", got, err)
	}
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 7 / 3)
	}
	got, err := post(c, base+"/echo", big)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("POST 1 MiB: %d bytes, equal %v, %v", len(got), bytes.Equal(got, big), err)
	}
	s := p.Stats()
	if s.Accepted != 1 {
		t.Errorf("Accepted = %d, want 1 (keep-alive reuse)", s.Accepted)
	}
	if s.BytesUp < 1<<20 || s.BytesDown < 1<<20 {
		t.Errorf("bytes up %d, down %d: want at least 1 MiB each", s.BytesUp, s.BytesDown)
	}
}

func TestLatency(t *testing.T) {
	leakCheck(t)
	p, c, base := setup(t, nil, 5*time.Second)
	if _, err := get(c, base+"/name"); err != nil { // connect first
		t.Fatal(err)
	}

	const d = 100 * time.Millisecond
	p.SetLatency(d, 0)
	start := time.Now()
	if _, err := get(c, base+"/name"); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 2*d {
		t.Errorf("round trip took %v, want at least %v (d each way)", el, 2*d)
	}

	// Jitter larger than the gap between chunks must not reorder them.
	p.SetLatency(5*time.Millisecond, 5*time.Millisecond)
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i / 251)
	}
	got, err := post(c, base+"/echo", big)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("POST 1 MiB with jitter: %d bytes, equal %v, %v", len(got), bytes.Equal(got, big), err)
	}

	p.Heal()
	start = time.Now()
	if _, err := get(c, base+"/name"); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el >= d {
		t.Errorf("after Heal, round trip took %v", el)
	}
}

func TestBlackhole(t *testing.T) {
	leakCheck(t)
	p, c, base := setup(t, nil, 300*time.Millisecond)
	if _, err := get(c, base+"/name"); err != nil { // an idle keep-alive connection
		t.Fatal(err)
	}

	before := p.Stats()
	p.Blackhole(true)
	for _, which := range []string{"existing", "new"} {
		start := time.Now()
		_, err := get(c, base+"/name")
		if !isTimeout(err) {
			t.Fatalf("%s connection in blackhole: err %v, want a timeout", which, err)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("%s connection: timeout took %v", which, el)
		}
		c.CloseIdleConnections()
	}
	if s := p.Stats(); s.Accepted != 2 || s.BytesUp != before.BytesUp || s.BytesDown != before.BytesDown || s.Reset != 0 {
		t.Errorf("in blackhole: %+v, before it %+v", s, before)
	}

	p.Blackhole(false)
	if s := p.Stats(); s.Reset != 2 {
		t.Errorf("Reset = %d after blackhole, want 2 (both held connections)", s.Reset)
	}
	if got, err := get(c, base+"/name"); err != nil || got != "A" {
		t.Fatalf("after blackhole: %q, %v", got, err)
	}
}

func TestRefuse(t *testing.T) {
	leakCheck(t)
	p, c, base := setup(t, nil, 5*time.Second)

	p.Refuse(true)
	start := time.Now()
	_, err := get(c, base+"/name")
	if err == nil || isTimeout(err) {
		t.Fatalf("refused: err %v, want a connection error", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("refused request took %v, want it fast", el)
	}
	if s := p.Stats(); s.Refused < 1 {
		t.Errorf("Refused = %d", s.Refused)
	}

	p.Heal()
	if got, err := get(c, base+"/name"); err != nil || got != "A" {
		t.Fatalf("after Refuse(false): %q, %v", got, err)
	}
}

func TestResetAll(t *testing.T) {
	leakCheck(t)
	entered := make(chan struct{}, 1)
	p, c, base := setup(t, entered, 5*time.Second)

	errc := make(chan error, 1)
	go func() {
		_, err := get(c, base+"/slow")
		errc <- err
	}()
	<-entered
	start := time.Now()
	p.ResetAll()
	err := <-errc
	if el := time.Since(start); el > time.Second {
		t.Errorf("reset request failed after %v", el)
	}
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("in-flight request: err %v, want a reset or EOF", err)
	}
	if s := p.Stats(); s.Reset != 1 {
		t.Errorf("Reset = %d, want 1", s.Reset)
	}
	if got, err := get(c, base+"/name"); err != nil || got != "A" {
		t.Fatalf("after ResetAll: %q, %v", got, err)
	}
}

func TestSetUpstream(t *testing.T) {
	leakCheck(t)
	a, b := newServer(t, "A", nil), newServer(t, "B", nil)
	p := newProxy(t, a.Listener.Addr().String())
	c := newClient(t, 5*time.Second)
	url := "http://" + p.Addr() + "/name"

	if got, err := get(c, url); err != nil || got != "A" {
		t.Fatalf("before: %q, %v", got, err)
	}
	p.SetUpstream(b.Listener.Addr().String())
	if got, err := get(c, url); err != nil || got != "A" {
		t.Fatalf("existing connection: %q, %v; want A", got, err)
	}
	c.CloseIdleConnections()
	if got, err := get(c, url); err != nil || got != "B" {
		t.Fatalf("new connection: %q, %v; want B", got, err)
	}
}

func TestDialFailure(t *testing.T) {
	leakCheck(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	p := newProxy(t, dead)
	c := newClient(t, 5*time.Second)

	start := time.Now()
	if _, err := get(c, "http://"+p.Addr()+"/name"); err == nil || isTimeout(err) {
		t.Fatalf("dead upstream: err %v, want a connection error", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("took %v", el)
	}
	if s := p.Stats(); s.DialFailed != 1 {
		t.Errorf("DialFailed = %d, want 1", s.DialFailed)
	}
}

func TestHalfClose(t *testing.T) {
	leakCheck(t)
	// The upstream reads to EOF, then answers with what it read.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		b, _ := io.ReadAll(nc)
		nc.Write(append([]byte("got "), b...))
	}()
	t.Cleanup(func() { ln.Close(); <-served })
	p := newProxy(t, ln.Addr().String())

	nc, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(nc, "hello")
	if err := nc.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(nc)
	if err != nil || string(got) != "got hello" {
		t.Fatalf("half-close: %q, %v", got, err)
	}
}

func TestClose(t *testing.T) {
	leakCheck(t)
	entered := make(chan struct{}, 1)
	srv := newServer(t, "A", entered)
	p, err := New("127.0.0.1:0", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, 5*time.Second)
	base := "http://" + p.Addr()

	// Open connections of every kind: idle, in flight, held in a blackhole.
	if _, err := get(c, base+"/name"); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := get(c, base+"/slow")
		errc <- err
	}()
	<-entered
	p.SetLatency(time.Millisecond, time.Millisecond)
	p.Blackhole(true)
	held, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	io.WriteString(held, "GET /name HTTP/1.1\r\nHost: x\r\n\r\n")

	start := time.Now()
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("Close took %v", el)
	}
	if err := <-errc; err == nil {
		t.Error("in-flight request succeeded across Close")
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Error("dial after Close succeeded")
	}
}
