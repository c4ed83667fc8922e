package redis

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// proxy is a TCP proxy to a Redis server that can lose one reply, to make a
// write's outcome ambiguous: the server ran the command, the client never
// hears back.
type proxy struct {
	ln     net.Listener
	target string
	mode   atomic.Int32 // what to do with the next reply from the server
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

// Modes of the proxy for the next reply from the server.
const (
	pass  = iota // forward it
	drop         // close the client's connection instead: the client reads EOF
	stall        // never forward it: the client's read times out
)

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			io.Copy(server, client)
			server.Close()
		}()
		go func() {
			defer p.wg.Done()
			defer client.Close()
			buf := make([]byte, 64<<10)
			stalled := false
			for {
				n, err := server.Read(buf)
				if n > 0 && !stalled {
					switch p.mode.Swap(pass) {
					case drop:
						return
					case stall:
						stalled = true
						continue
					}
					if _, err := client.Write(buf[:n]); err != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
