package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eppkit/eppkit/examples/fakeserver"
)

// TestMinimalEPP runs the program against two fake model servers on
// loopback, sends requests through it until the pool is discovered, checks
// that a fake server answered, and stops it.
func TestMinimalEPP(t *testing.T) {
	fakes, err := fakeserver.StartCluster(fakeserver.Config{}, "127.0.0.1", 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer fakes.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--endpoints", strings.Join(fakes.Addrs(), ","), "--listen", "127.0.0.1:0"}, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no listening line: %v (run: %v)", err, <-done)
	}
	go io.Copy(io.Discard, pr)
	url := strings.TrimSpace(strings.TrimPrefix(line, "minimalepp: listening on "))

	body := `{"model":"fake-model","max_tokens":2,"messages":[{"role":"user","content":"hello"}]}`
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		served := resp.Header.Get(fakeserver.HeaderServedBy)
		if resp.StatusCode == http.StatusOK && served != "" {
			if !strings.Contains(strings.Join(fakes.Addrs(), ","), served) {
				t.Errorf("served by %q, not one of %v", served, fakes.Addrs())
			}
			break
		}
		// 503 rejected-no-endpoints until discovery has run.
		if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("status %d, served by %q", resp.StatusCode, served)
		}
		time.Sleep(10 * time.Millisecond)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after its context was cancelled")
	}
}

func TestBadConfig(t *testing.T) {
	err := run(context.Background(), []string{"--config", "testdata/nope.yaml"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("err = %v, want one naming the missing file", err)
	}
}
