package fakeserver

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/datalayer/metrics"
)

func start(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := Start(cfg, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestCompletion(t *testing.T) {
	s := start(t, Config{})
	resp := post(t, s.URL()+"/v1/completions", `{"model":"fake-model","prompt":"hello world","max_tokens":3}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := resp.Header.Get(HeaderServedBy); got != s.Addr() {
		t.Errorf("x-served-by = %q, want %q", got, s.Addr())
	}
	var out struct {
		Object  string
		Model   string
		Choices []struct{ Text string }
		Usage   struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Object != "text_completion" || out.Model != "fake-model" || out.Choices[0].Text != "the quick brown " ||
		out.Usage.PromptTokens != 3 || out.Usage.CompletionTokens != 3 {
		t.Errorf("unexpected response %+v", out)
	}
}

func TestChatStreamWithUsage(t *testing.T) {
	s := start(t, Config{})
	resp := post(t, s.URL()+"/v1/chat/completions",
		`{"model":"m2","messages":[{"role":"user","content":[{"type":"text","text":"hi there"}]}],"max_tokens":2,"stream":true,"stream_options":{"include_usage":true}}`)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, d)
		}
	}
	// role chunk, 2 tokens, usage, [DONE]
	if len(events) != 5 || events[4] != "[DONE]" {
		t.Fatalf("events: %q", events)
	}
	if !strings.Contains(events[0], `"role":"assistant"`) || !strings.Contains(events[1], `"content":"the "`) ||
		!strings.Contains(events[2], `"finish_reason":"length"`) || !strings.Contains(events[3], `"usage":{"prompt_tokens":6,"completion_tokens":2`) ||
		!strings.Contains(events[3], `"choices":[]`) || !strings.Contains(events[1], `"model":"m2"`) {
		t.Errorf("events: %q", events)
	}
}

func TestRenderMatchesPrefill(t *testing.T) {
	s := start(t, Config{})
	resp := post(t, s.URL()+"/v1/chat/completions/render", `{"model":"fake-model","messages":[{"role":"system","content":"a b"},{"role":"user","content":"c"}]}`)
	var out struct {
		TokenIDs []uint32 `json:"token_ids"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	want := RenderChat(nil, []Message{{"system", "a b"}, {"user", "c"}})
	if len(out.TokenIDs) != 9 || len(want) != 9 {
		t.Fatalf("token ids %v, want %v", out.TokenIDs, want)
	}
	for i := range want {
		if out.TokenIDs[i] != want[i] {
			t.Fatalf("token ids %v, want %v", out.TokenIDs, want)
		}
	}
}

func TestBadRequests(t *testing.T) {
	s := start(t, Config{})
	for _, body := range []string{`{`, `{"prompt":"x"}`, `{"model":"m","prompt":{}}`, `{"model":"m","prompt":"x","max_tokens":"a"}`} {
		if resp := post(t, s.URL()+"/v1/completions", body); resp.StatusCode != 400 {
			t.Errorf("%s: status %d, want 400", body, resp.StatusCode)
		}
	}
	if resp := post(t, s.URL()+"/v1/chat/completions", `{"model":"m","messages":[]}`); resp.StatusCode != 400 {
		t.Errorf("empty messages: status %d", resp.StatusCode)
	}
}

// TestPrefixCacheSkipsPrefill checks the latency model: a repeated prompt
// finds its blocks cached and skips their prefill.
func TestPrefixCacheSkipsPrefill(t *testing.T) {
	s := start(t, Config{PrefillPerToken: 500 * time.Microsecond})
	prompt := strings.Repeat("word ", 400) // 401 tokens: 25 full blocks
	body := `{"model":"fake-model","prompt":"` + prompt + `","max_tokens":1}`
	t0 := time.Now()
	post(t, s.URL()+"/v1/completions", body)
	cold := time.Since(t0)
	t0 = time.Now()
	resp := post(t, s.URL()+"/v1/completions", body)
	warm := time.Since(t0)
	var out struct {
		Usage struct {
			Details struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if out.Usage.Details.CachedTokens != 400 {
		t.Errorf("cached tokens = %d, want 400", out.Usage.Details.CachedTokens)
	}
	if cold < 200*time.Millisecond || warm > cold/2 {
		t.Errorf("cold %v, warm %v: cached blocks should skip prefill", cold, warm)
	}
}

// TestMetricsExtracted reads the server's /metrics with the picker's own
// extractor while requests are queued and running.
func TestMetricsExtracted(t *testing.T) {
	s := start(t, Config{MaxRunning: 1, DecodePerToken: 50 * time.Millisecond, LoRAs: []string{"sql-lora"}, KVBlocks: 100})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", s.URL()+"/v1/completions",
				strings.NewReader(`{"model":"fake-model","prompt":"x","max_tokens":100}`))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	defer func() { cancel(); wg.Wait() }()
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Waiting != 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	resp, err := http.Get(s.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	x := &metrics.CoreExtractor{}
	x.SetDefaults()
	if err := x.Validate(); err != nil {
		t.Fatal(err)
	}
	fams, err := metrics.Parse(text, metrics.NewFilter(x.MetricFamilies()...))
	if err != nil {
		t.Fatal(err)
	}
	e := datalayer.New("fake", "127.0.0.1", 0, nil)
	if err := x.Extract(fams, e); err != nil {
		t.Fatalf("extract: %v\n%s", err, text)
	}
	m := e.Metrics
	// One running request pins ceil((2+100)/16) = 7 of 100 blocks.
	if m.Waiting != 2 || m.Running != 1 || m.KVUsage != 0.07 || m.BlockSize != 16 || m.GPUBlocks != 100 ||
		m.LoRA.Max != 4 || len(m.LoRA.Active) != 1 || m.LoRA.Active[0] != "sql-lora" {
		t.Errorf("extracted %+v from\n%s", m, text)
	}
}

// TestKVEvents subscribes to a bound publisher and decodes the batches.
func TestKVEvents(t *testing.T) {
	s := start(t, Config{KVEvents: &KVEvents{Endpoint: "tcp://127.0.0.1:0", Bind: true}, KVBlocks: 4})
	ep := "tcp://" + s.pub.sock.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sub := zmq4.NewSub(ctx)
	defer sub.Close()
	if err := sub.Dial(ep); err != nil {
		t.Fatal(err)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, "kv@"); err != nil {
		t.Fatal(err)
	}
	// The subscription reaches the publisher asynchronously: send until
	// the first batch arrives.
	prompt := strings.Repeat("w ", 47) // BOS + 47 = 48 tokens: 3 blocks
	msgs := make(chan zmq4.Msg, 16)
	go func() {
		for {
			m, err := sub.Recv()
			if err != nil {
				close(msgs)
				return
			}
			msgs <- m
		}
	}()
	var first zmq4.Msg
	for first.Frames == nil {
		s.ClearCache()
		post(t, s.URL()+"/v1/completions", `{"model":"fake-model","prompt":"`+prompt+`","max_tokens":1}`)
		select {
		case m := <-msgs:
			first = m
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("no KV events")
		}
	}
	if len(first.Frames) != 3 || string(first.Frames[0]) != "kv@"+s.Addr()+"@fake-model" || len(first.Frames[1]) != 8 {
		t.Fatalf("frames %q", first.Frames)
	}
	// Find a batch with the BlockStored of 3 blocks.
	for {
		var batch []any
		if err := msgpack.Unmarshal(first.Frames[2], &batch); err != nil {
			t.Fatal(err)
		}
		if len(batch) != 3 {
			t.Fatalf("batch %v", batch)
		}
		for _, ev := range batch[1].([]any) {
			arr := ev.([]any)
			if arr[0] == "BlockStored" && len(arr[1].([]any)) == 3 {
				if len(arr[3].([]any)) != 48 || arr[6] != "GPU" || arr[2] != nil {
					t.Errorf("BlockStored %v", arr)
				}
				_ = binary.BigEndian.Uint64(first.Frames[1])
				return
			}
		}
		select {
		case first = <-msgs:
		case <-ctx.Done():
			t.Fatal("no BlockStored of 3 blocks")
		}
	}
}

func TestCluster(t *testing.T) {
	c, err := StartCluster(Config{}, "127.0.0.1", 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seen := map[string]bool{}
	for _, a := range c.Addrs() {
		resp := post(t, "http://"+a+"/v1/completions", `{"model":"fake-model","prompt":"x"}`)
		seen[resp.Header.Get(HeaderServedBy)] = true
	}
	if len(seen) != 3 {
		t.Errorf("servers answering: %v", seen)
	}
}
