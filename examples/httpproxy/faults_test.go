package httpproxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eppkit/eppkit/examples/fakeserver"
)

// startUpstream serves h on 127.0.0.1 (its /metrics answers 404) and
// returns its host:port.
func startUpstream(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// resetConn hijacks the request's connection and resets it (RST), after
// writing raw, if any.
func resetConn(w http.ResponseWriter, raw string) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	if raw != "" {
		_, _ = buf.WriteString(raw)
		_ = buf.Flush()
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

const sseHead = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

// sseChunk is one HTTP chunk carrying one event.
const sseChunk = "2a\r\ndata: {\"model\":\"fake-model\",\"choices\":[]}\n\n\r\n"

// TestClientDisconnectMidStream: the client reads one event and goes away;
// the upstream request is cancelled and the in-flight count released.
func TestClientDisconnectMidStream(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, envConfig{fake: []fakeserver.Config{{DecodePerToken: 50 * time.Millisecond}}})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/v1/completions",
		strings.NewReader(`{"model":"fake-model","prompt":"go on","max_tokens":1000,"stream":true}`))
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q, %v", line, err)
	}
	if e.inFlight() != 1 {
		t.Errorf("in flight %d, want 1", e.inFlight())
	}
	cancel()
	resp.Body.Close()
	e.settled()
	if m := e.rec.last(t, 1); m.Status != 200 || m.ResponseBytes == 0 {
		t.Errorf("metrics %+v", m)
	}
}

// TestUpstreamHangs: an upstream that never answers is a 504 after the
// response-header timeout; one that stalls mid-stream is cut after the
// stream idle timeout. Both release the in-flight count.
func TestUpstreamHangs(t *testing.T) {
	leakCheck(t)
	release := make(chan struct{})
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "chat") { // stall mid-stream
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {}\n\n")
			http.NewResponseController(w).Flush()
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	e := newEnv(t, envConfig{extra: []string{up}, yaml: testConfig, proxy: func(p *Proxy) {
		p.Transport = NewTransport(Timeouts{ResponseHeader: 200 * time.Millisecond})
		p.StreamIdleTimeout = 200 * time.Millisecond
	}})
	start := time.Now()
	resp, body := e.post("/v1/completions", `{"model":"m","prompt":"x"}`)
	if resp.StatusCode != http.StatusGatewayTimeout || time.Since(start) > 3*time.Second {
		t.Errorf("hung upstream: status %d after %v: %s", resp.StatusCode, time.Since(start), body)
	}
	req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`))
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || string(b) != "data: {}\n\n" {
		t.Errorf("stalled stream: read %q, %v; want the first event, then an error", b, err)
	}
	e.waitFor("in-flight release", func() bool { return e.inFlight() == 0 })
}

// TestUpstreamResets: a reset before the response falls back (or is a 502
// with no fallback); a reset mid-stream cuts the client's response.
func TestUpstreamResets(t *testing.T) {
	leakCheck(t)
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.Contains(r.URL.Path, "chat") {
			resetConn(w, sseHead+sseChunk)
			return
		}
		resetConn(w, "")
	})
	e := newEnv(t, envConfig{extra: []string{up}})
	resp, body := e.post("/v1/completions", `{"model":"m","prompt":"x"}`)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "upstream") {
		t.Errorf("reset before the response: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`))
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || !strings.HasPrefix(string(b), "data: ") {
		t.Errorf("reset mid-stream: read %q, %v; want an event, then an error", b, err)
	}
	e.waitFor("in-flight release", func() bool { return e.inFlight() == 0 })
}

// TestResetFallsBack: the primary resets the connection; the request goes
// to the fallback, a fake server.
func TestResetFallsBack(t *testing.T) {
	leakCheck(t)
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) { resetConn(w, "") })
	// Only the resetting upstream and one fake server; the picker orders
	// them at random, so some of the requests start on the bad one.
	e := newEnv(t, envConfig{fake: []fakeserver.Config{{}}, extra: []string{up},
		yaml: header + "plugins:\n- type: random-picker\n  parameters:\n    maxNumOfEndpoints: 2\n"})
	for i := range 10 {
		resp, body := e.post("/v1/completions", `{"model":"fake-model","prompt":"x"}`)
		if resp.StatusCode != 200 || resp.Header.Get(fakeserver.HeaderServedBy) != e.fakes[0].Addr() {
			t.Fatalf("request %d: %d from %q: %s", i, resp.StatusCode, resp.Header.Get(fakeserver.HeaderServedBy), body)
		}
	}
	e.settled()
}

// TestMalformedChunks: an upstream whose chunked encoding is broken cuts
// the client's response and releases the request.
func TestMalformedChunks(t *testing.T) {
	leakCheck(t)
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		resetConn(w, sseHead+sseChunk+"zz\r\nnot a chunk\r\n")
	})
	e := newEnv(t, envConfig{extra: []string{up}})
	req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`))
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Errorf("malformed chunks: read %q without error", b)
	}
	e.waitFor("in-flight release", func() bool { return e.inFlight() == 0 })
}

// TestHugeBody: a 100 MB body is refused with 413 after reading at most the
// limit, and the upstream never sees it.
func TestHugeBody(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, envConfig{fake: []fakeserver.Config{{}}})
	body := io.MultiReader(strings.NewReader(`{"model":"fake-model","prompt":"`), &zeros{n: 100 << 20}, strings.NewReader(`"}`))
	req, _ := http.NewRequest("POST", e.url+"/v1/completions", body)
	resp, err := e.client.Do(req)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "larger than the limit") {
			t.Errorf("status %d: %s", resp.StatusCode, b)
		}
	} else if !isConnError(err) {
		t.Fatal(err) // the proxy may close the connection after answering
	}
	if m := e.rec.last(t, 1); m.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("metrics %+v", m)
	}
	if n := e.fakes[0].Stats().Requests; n != 0 {
		t.Errorf("the upstream got %d requests", n)
	}
}

type zeros struct{ n int }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n == 0 {
		return 0, io.EOF
	}
	n := min(len(p), z.n)
	for i := range p[:n] {
		p[i] = 'a'
	}
	z.n -= n
	return n, nil
}

func isConnError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe")
}
