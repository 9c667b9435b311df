package httpproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eppkit/eppkit/examples/fakeserver"
	"github.com/eppkit/eppkit/requestcontrol"
)

func chat(model, text string, extra ...string) string {
	b, _ := json.Marshal(map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": text}}})
	s := string(b)
	for _, e := range extra {
		s = s[:len(s)-1] + "," + e + "}"
	}
	return s
}

func three(cfg fakeserver.Config) []fakeserver.Config {
	return []fakeserver.Config{cfg, cfg, cfg}
}

// TestSpreadByLoad sends concurrent requests with unrelated prompts: the
// picker's load view (in-flight and scraped) spreads them.
func TestSpreadByLoad(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, envConfig{fake: three(fakeserver.Config{DecodePerToken: 10 * time.Millisecond})})
	var (
		mu  sync.Mutex
		got = map[string]int{}
		wg  sync.WaitGroup
	)
	for i := range 30 {
		wg.Go(func() {
			resp, _ := e.post("/v1/chat/completions", chat("fake-model", fmt.Sprintf("question %d about something else entirely", i), `"max_tokens":10`))
			mu.Lock()
			defer mu.Unlock()
			got[resp.Header.Get(fakeserver.HeaderServedBy)]++
		})
	}
	wg.Wait()
	// How evenly depends on how stale the scraped queue metrics are when the
	// burst arrives (under -race on 2 busy cores, very): require a real
	// spread, not an even one — more than one server, none with nearly all.
	used := 0
	for _, f := range e.fakes {
		if got[f.Addr()] > 0 {
			used++
		}
		if got[f.Addr()] > 24 {
			t.Errorf("%s served %d of 30 (spread %v)", f.Addr(), got[f.Addr()], got)
		}
	}
	if used < 2 {
		t.Errorf("one server took every request (spread %v)", got)
	}
	e.settled()
}

// TestPrefixSticks sends requests sharing a long prefix one after the other:
// they all go where the first went.
func TestPrefixSticks(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, envConfig{fake: three(fakeserver.Config{})})
	system := strings.Repeat("You are a helpful assistant that answers in great detail. ", 80)
	first := ""
	for i := range 8 {
		resp, body := e.post("/v1/chat/completions", chat("fake-model", system+fmt.Sprintf(" Question %d?", i)))
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		served := resp.Header.Get(fakeserver.HeaderServedBy)
		if i == 0 {
			first = served
		} else if served != first {
			t.Fatalf("request %d went to %s, the prefix is on %s", i, served, first)
		}
	}
	// The engine's own prefix cache agrees: the later requests hit it.
	for _, f := range e.fakes {
		if f.Addr() == first && f.Stats().CachedTokens == 0 {
			t.Errorf("%s served the shared prefix but never found it cached", first)
		}
	}
}

// TestLoRAAffinity sends an adapter's request: it goes to the server with
// the adapter loaded.
func TestLoRAAffinity(t *testing.T) {
	leakCheck(t)
	withLoRA := fakeserver.Config{LoRAs: []string{"sql-lora"}}
	e := newEnv(t, envConfig{fake: []fakeserver.Config{{}, withLoRA, {}}})
	for i := range 5 {
		resp, body := e.post("/v1/completions", fmt.Sprintf(`{"model":"sql-lora","prompt":"select %d"}`, i))
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		if got := resp.Header.Get(fakeserver.HeaderServedBy); got != e.fakes[1].Addr() {
			t.Fatalf("LoRA request %d went to %s, the adapter is on %s", i, got, e.fakes[1].Addr())
		}
		if !strings.Contains(body, `"model":"sql-lora"`) {
			t.Errorf("body %s", body)
		}
	}
}

// TestStreamChunkByChunk checks that events reach the client as the engine
// produces them, with the client's model name restored in every chunk, and
// that the engine saw the rewritten name and X-Gateway-Model-Name.
func TestStreamChunkByChunk(t *testing.T) {
	leakCheck(t)
	const perToken = 60 * time.Millisecond
	e := newEnv(t, envConfig{fake: three(fakeserver.Config{DecodePerToken: perToken})})
	req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions",
		strings.NewReader(chat("my-alias", "tell me a story", `"max_tokens":5`, `"stream":true`, `"stream_options":{"include_usage":true}`)))
	req.Header.Set(requestcontrol.HeaderModelRewrite, "fake-model")
	start := time.Now()
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	var arrivals []time.Duration
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			arrivals = append(arrivals, time.Since(start))
			events = append(events, d)
		}
	}
	if len(events) != 8 || events[7] != "[DONE]" { // role, 5 tokens, usage, [DONE]
		t.Fatalf("events %q", events)
	}
	for _, ev := range events[:7] {
		if !strings.Contains(ev, `"model":"my-alias"`) || strings.Contains(ev, "fake-model") {
			t.Errorf("event not rewritten back: %s", ev)
		}
	}
	// The first token came long before the last: nothing was buffered.
	if spread := arrivals[5] - arrivals[1]; spread < 3*perToken {
		t.Errorf("tokens arrived within %v of each other (arrivals %v): the stream was buffered", spread, arrivals)
	}
	m := e.rec.last(t, 1)
	if m.Model != "my-alias" || m.TargetModel != "fake-model" || m.Status != 200 || !m.Streaming || m.Usage.CompletionTokens != 5 {
		t.Errorf("metrics %+v", m)
	}
	e.settled()
}

// TestModelHeaderForwarded checks what the engine receives: the rewritten
// body with a correct Content-Length, X-Gateway-Model-Name, and never a
// destination header the client tried to set.
func TestModelHeaderForwarded(t *testing.T) {
	leakCheck(t)
	got := make(chan *http.Request, 1)
	gotBody := make(chan string, 1)
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		gotBody <- string(b)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"model":"fake-model","choices":[],"usage":{"prompt_tokens":1}}`)
	})
	e := newEnv(t, envConfig{extra: []string{up}, yaml: header + "plugins:\n- type: random-picker\n"})
	resp, body := e.post("/v1/chat/completions", chat("my-alias", "hi"),
		requestcontrol.HeaderModelRewrite, "fake-model", requestcontrol.HeaderDestination, "10.9.9.9:80")
	if resp.StatusCode != 200 || body != `{"model":"my-alias","choices":[],"usage":{"prompt_tokens":1}}` {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	r, b := <-got, <-gotBody
	if r.Header.Get(HeaderModelName) != "fake-model" || r.Header.Get(requestcontrol.HeaderDestination) != up ||
		r.ContentLength != int64(len(b)) || !strings.Contains(b, `"model":"fake-model"`) {
		t.Errorf("upstream got headers %v, body %s", r.Header, b)
	}
}

// TestKilledServerFallsBack kills the server holding a prefix: requests for
// that prefix fall back to the next pick.
func TestKilledServerFallsBack(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, envConfig{fake: three(fakeserver.Config{})})
	system := strings.Repeat("Shared context for the fallback test. ", 100)
	resp, _ := e.post("/v1/chat/completions", chat("fake-model", system+"first"))
	home := resp.Header.Get(fakeserver.HeaderServedBy)
	for _, f := range e.fakes {
		if f.Addr() == home {
			_ = f.Close()
		}
	}
	for i := range 5 {
		resp, body := e.post("/v1/chat/completions", chat("fake-model", system+fmt.Sprintf("again %d", i)))
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d: %s", i, resp.StatusCode, body)
		}
		if got := resp.Header.Get(fakeserver.HeaderServedBy); got == home || got == "" {
			t.Fatalf("request %d served by %q", i, got)
		}
	}
	if e.inFlight() != 0 {
		t.Errorf("%d requests still counted in flight", e.inFlight())
	}
}

// TestSheddableAtSaturation fills every server's queue, then sends a
// sheddable request (429 with the reason) and a normal one (admitted).
func TestSheddableAtSaturation(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, envConfig{fake: three(fakeserver.Config{MaxRunning: 1, DecodePerToken: 20 * time.Millisecond})})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait(); e.settled() }()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for _, f := range e.fakes {
		for range 7 { // 1 running, 6 waiting: 6/5 over the queue threshold
			wg.Go(func() {
				req, _ := http.NewRequestWithContext(ctx, "POST", f.URL()+"/v1/completions",
					strings.NewReader(`{"model":"fake-model","prompt":"x","max_tokens":1000}`))
				if resp, err := client.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
	}
	e.waitFor("every queue to be seen full", func() bool {
		for _, ep := range e.rt.DataLayer.Endpoints() {
			if ep.Metrics.Waiting < 6 {
				return false
			}
		}
		return true
	})
	resp, body := e.post("/v1/completions", `{"model":"fake-model","prompt":"later"}`, requestcontrol.HeaderObjective, "batch")
	if resp.StatusCode != 429 || resp.Header.Get(requestcontrol.HeaderDroppedReason) != requestcontrol.ReasonSaturated {
		t.Fatalf("sheddable request: status %d, reason %q: %s", resp.StatusCode, resp.Header.Get(requestcontrol.HeaderDroppedReason), body)
	}
	if !strings.Contains(body, `"code":429`) {
		t.Errorf("error body %s", body)
	}
	if m := e.rec.last(t, 1); m.Status != 429 || m.Reason != requestcontrol.ReasonSaturated {
		t.Errorf("metrics %+v", m)
	}
	// A request that is not sheddable is admitted (and waits in a queue):
	// cut it short, it only has to get past the picker.
	short, stop := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer stop()
	req, _ := http.NewRequestWithContext(short, "POST", e.url+"/v1/completions", strings.NewReader(`{"model":"fake-model","prompt":"now"}`))
	req.Header.Set(requestcontrol.HeaderObjective, "interactive")
	if resp, err := e.client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("interactive request answered %d while every server is busy", resp.StatusCode)
	}
	if m := e.rec.last(t, 2); m.Status == 429 || m.Priority != 10 {
		t.Errorf("interactive request: %+v", m)
	}
}

// TestRejections maps pipeline errors to statuses and reason headers.
func TestRejections(t *testing.T) {
	leakCheck(t)
	e := newEnv(t, envConfig{fake: []fakeserver.Config{{}}})
	for _, c := range []struct {
		path, body string
		status     int
		msg        string
	}{
		{"/v1/chat/completions", `{"model":`, 400, "invalid JSON"},
		{"/v1/models", `{}`, 400, "no parser"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, 400, "model"},
	} {
		resp, body := e.post(c.path, c.body)
		if resp.StatusCode != c.status || !strings.Contains(body, c.msg) {
			t.Errorf("%s %s: %d %s, want %d mentioning %q", c.path, c.body, resp.StatusCode, body, c.status, c.msg)
		}
	}
}
