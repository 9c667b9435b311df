package redistest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards loopback connections to a Server. Cut severs them and
// refuses new ones, as a network partition or a killed client would, while
// the server and its other clients go on.
type Proxy struct {
	// Addr is the proxy's host:port on 127.0.0.1: give it to the client to
	// cut off instead of the server's.
	Addr string

	target string
	l      net.Listener
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	cut    bool
	wg     sync.WaitGroup
}

// Proxy starts a proxy to s for the test; it is cut when the test ends.
func (s *Server) Proxy(tb testing.TB) *Proxy {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redistest: proxy: %v", err)
	}
	p := &Proxy{Addr: l.Addr().String(), target: s.Addr, l: l, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.Cut)
	return p
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.l.Accept()
		if err != nil {
			return // Cut closed the listener
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		if !p.track(in, out) {
			return
		}
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// track records a connection pair, or closes it when the proxy is cut.
func (p *Proxy) track(a, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		a.Close()
		b.Close()
		return false
	}
	p.conns[a], p.conns[b] = struct{}{}, struct{}{}
	return true
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// Cut closes the proxy's connections and stops accepting new ones; its
// clients see a server that is gone. Cutting again does nothing.
func (p *Proxy) Cut() {
	p.mu.Lock()
	if !p.cut {
		p.cut = true
		p.l.Close()
		for c := range p.conns {
			c.Close()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
}
