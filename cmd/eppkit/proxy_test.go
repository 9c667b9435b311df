package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is an io.Writer safe to read while a command writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serving runs a serving command in the background until the test ends
// and returns the first stdout line naming what it serves.
func serving(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	prev := signalContext
	signalContext = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(args, &out, &errOut) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("%s exited %d: %s", args[0], code, errOut.String())
		}
		signalContext = prev
	})
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "\n") {
		select {
		case code := <-done:
			done <- code
			t.Fatalf("%s exited %d: %s", args[0], code, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start: %s", args[0], errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return strings.TrimSpace(out.String())
}

// TestProxyCommand runs "eppkit fakeserver" and "eppkit proxy" in front of
// it, as the README does, and sends a request through.
func TestProxyCommand(t *testing.T) {
	line := serving(t, "fakeserver", "--count", "2", "--base-port", "0")
	_, addrs, ok := strings.Cut(line, ": ")
	if !ok || !strings.HasPrefix(line, "eppkit fakeserver: 2 servers") {
		t.Fatalf("fakeserver said %q", line)
	}
	addrs = addrs[strings.LastIndex(addrs, " ")+1:]
	line = serving(t, "proxy", "--endpoints", addrs, "--listen", "127.0.0.1:0")
	_, url, ok := strings.Cut(line, "listening on ")
	if !ok {
		t.Fatalf("proxy said %q", line)
	}
	url, _, _ = strings.Cut(url, ",")
	resp, err := http.Get(url + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"model":"fake-model","prompt":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if served := resp.Header.Get("x-served-by"); resp.StatusCode != 200 || !strings.Contains(addrs, served) || served == "" {
		t.Errorf("status %d from %q: %s", resp.StatusCode, served, body)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestProxyUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"proxy"}, "--endpoints is required"},
		{[]string{"proxy", "--endpoints", "nohost"}, `endpoint "nohost": want host:port`},
		{[]string{"proxy", "--endpoints", "127.0.0.1:1", "--scheme", "ftp"}, "--scheme must be http or https"},
		{[]string{"fakeserver", "--count", "0"}, "--count must be 1 to 1000"},
		{[]string{"fakeserver", "--kv-events-bind"}, "--kv-events-bind needs --kv-events"},
	} {
		if code, _, errOut := eppkit(t, c.args...); code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %s; want usage error %q", c.args, code, errOut, c.want)
		}
	}
	if code, _, errOut := eppkit(t, "proxy", "--endpoints", "127.0.0.1:1", "--config", td("bad-config.yaml")); code != exitFail ||
		!strings.Contains(errOut, "invalid configuration") {
		t.Errorf("bad config: exit %d, %s", code, errOut)
	}
}
