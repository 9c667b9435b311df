package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/eppkit/eppkit/examples/extproc/envoytest"
	"github.com/eppkit/eppkit/examples/fakeserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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

// TestServe runs the binary in-process in front of a fake server: a request
// over ext_proc, one through the HTTP proxy, then the metrics of both.
func TestServe(t *testing.T) {
	fake, err := fakeserver.Start(fakeserver.Config{}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--endpoints", fake.Addr(), "--grpc-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
			"--proxy-listen", "127.0.0.1:0", "--drain-timeout", "1s"}, &out, &errOut)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exit %d: %s", code, errOut.String())
		}
	}()
	re := regexp.MustCompile(`ext_proc on (\S+)\n.*metrics on (\S+)\n.*HTTP proxy on (\S+)\n`)
	var m []string
	for deadline := time.Now().Add(10 * time.Second); m == nil; m = re.FindStringSubmatch(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("not serving: %s %s", out.String(), errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	grpcAddr, metricsURL, proxyURL := m[1], m[2], m[3]
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	// Wait for the first scrape of the fake server's metrics.
	time.Sleep(200 * time.Millisecond)

	c, err := envoytest.Dial(grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	a, err := c.Do(rctx, &envoytest.Request{Path: "/v1/completions", Body: []byte(`{"model":"fake-model","prompt":"via ext_proc"}`)}, hc, nil)
	if err != nil || a.Status != 200 || a.Headers["x-served-by"] != fake.Addr() {
		t.Fatalf("ext_proc request: %v %v", a, err)
	}
	resp, err := hc.Post(proxyURL+"/v1/completions", "application/json", strings.NewReader(`{"model":"fake-model","prompt":"via the proxy"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("proxy request: %d", resp.StatusCode)
	}
	resp, err = hc.Get(metricsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`llm_d_epp_request_total{fairness_id="default-flow",model_name="fake-model",priority="0",target_model_name="fake-model"} 2`,
		`eppkit_stage_duration_seconds_count{stage="scheduling"} 2`,
		`llm_d_epp_plugin_duration_seconds_count{extension_point="Scorer",plugin_name="queue-scorer",plugin_type="queue-scorer"} 2`,
		`llm_d_epp_prefix_indexer_size{producer="approx-prefix-cache-producer"}`,
		`llm_d_epp_ready_endpoints{name="default"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(text), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestUsage(t *testing.T) {
	var out, errOut syncBuffer
	if code := run(context.Background(), nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--endpoints is required") {
		t.Errorf("no arguments: %d %s", code, errOut.String())
	}
	if code := run(context.Background(), []string{"--endpoints", "nohost"}, &out, &errOut); code != 1 {
		t.Errorf("bad endpoints: %d", code)
	}
}
