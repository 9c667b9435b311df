package extproc_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eppkit/eppkit/examples/extproc/envoytest"
	"github.com/eppkit/eppkit/examples/fakeserver"
	"github.com/eppkit/eppkit/requestcontrol"
)

func three(cfg fakeserver.Config) []fakeserver.Config { return []fakeserver.Config{cfg, cfg, cfg} }

func chatReq(body []byte, headers ...string) *envoytest.Request {
	return &envoytest.Request{Path: "/v1/chat/completions", Body: body, Chunks: 2,
		Headers: envoytest.H(append([]string{"content-type", "application/json"}, headers...)...)}
}

// TestE2ESpreadByLoad: concurrent unrelated requests spread over the
// servers.
func TestE2ESpreadByLoad(t *testing.T) {
	e := newEnv(t, envConfig{fake: three(fakeserver.Config{DecodePerToken: 10 * time.Millisecond})})
	var (
		mu  sync.Mutex
		got = map[string]int{}
		wg  sync.WaitGroup
	)
	for i := range 30 {
		wg.Go(func() {
			a := e.do(chatReq(chatBody("fake-model", fmt.Sprintf("question %d about something else", i), `"max_tokens":10`)), nil)
			mu.Lock()
			defer mu.Unlock()
			got[a.Headers["x-served-by"]]++
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

// TestE2EPrefixSticks: requests sharing a long prefix go where the first
// went, and the engine finds the prefix cached.
func TestE2EPrefixSticks(t *testing.T) {
	e := newEnv(t, envConfig{fake: three(fakeserver.Config{})})
	system := strings.Repeat("You are a helpful assistant that answers in great detail. ", 80)
	first := ""
	for i := range 6 {
		a := e.do(chatReq(chatBody("fake-model", system+fmt.Sprintf(" Question %d?", i))), nil)
		served := a.Headers["x-served-by"]
		if a.Status != 200 || served == "" {
			t.Fatalf("request %d: %d %v", i, a.Status, a.Headers)
		}
		if i == 0 {
			first = served
		} else if served != first {
			t.Fatalf("request %d went to %s, the prefix is on %s", i, served, first)
		}
	}
	e.settled()
}

// TestE2ELoRA: an adapter's requests go to the server with it loaded.
func TestE2ELoRA(t *testing.T) {
	e := newEnv(t, envConfig{fake: []fakeserver.Config{{}, {LoRAs: []string{"sql-lora"}}, {}}})
	for i := range 5 {
		a := e.do(&envoytest.Request{Path: "/v1/completions", Body: fmt.Appendf(nil, `{"model":"sql-lora","prompt":"select %d"}`, i)}, nil)
		if got := a.Headers["x-served-by"]; got != e.fakes[1].Addr() {
			t.Fatalf("LoRA request %d went to %s, the adapter is on %s", i, got, e.fakes[1].Addr())
		}
	}
}

// TestE2EStreamChunkByChunk sends the upstream's events one at a time and
// gets each back, model name restored, before sending the next: nothing is
// held back. Then it runs a real streamed completion through Do.
func TestE2EStreamChunkByChunk(t *testing.T) {
	e := newEnv(t, envConfig{fake: three(fakeserver.Config{DecodePerToken: 20 * time.Millisecond})})
	st := start(t, e, chatReq(chatBody("my-alias", "stream please", `"stream":true`), requestcontrol.HeaderModelRewrite, "fake-model"))
	if _, err := st.ResponseHeaders(&envoytest.Response{Status: 200, Chunks: [][]byte{nil},
		Headers: envoytest.H("content-type", "text/event-stream")}); err != nil {
		t.Fatal(err)
	}
	event := func(i int) string {
		return fmt.Sprintf(`data: {"id":"c","model":"fake-model","choices":[{"delta":{"content":"tok%d"}}]}`+"\n\n", i)
	}
	for i := range 5 {
		ev := event(i)
		// Split an event (and the model name) across two chunks: the
		// processor holds the partial line and sends it whole.
		cut := strings.Index(ev, "fake-") + 3
		if err := st.SendResponseChunk([]byte(ev[:cut]), false); err != nil {
			t.Fatal(err)
		}
		if err := st.SendResponseChunk([]byte(ev[cut:]), false); err != nil {
			t.Fatal(err)
		}
		var got []byte
		for !bytes.HasSuffix(got, []byte("\n\n")) {
			c, end, _, err := st.NextResponseChunk()
			if err != nil || end {
				t.Fatalf("event %d: %q end %v: %v", i, c, end, err)
			}
			got = append(got, c...)
		}
		if want := strings.Replace(ev, "fake-model", "my-alias", 1); string(got) != want {
			t.Fatalf("event %d came back as %q, want %q", i, got, want)
		}
	}
	if err := st.SendResponseChunk([]byte("data: [DONE]\n\n"), true); err != nil {
		t.Fatal(err)
	}
	if c, end, _, err := st.NextResponseChunk(); err != nil || !end || string(c) != "data: [DONE]\n\n" {
		t.Fatalf("last chunk %q end %v: %v", c, end, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// A real streamed completion: events reach the client spread out.
	var arrivals []time.Time
	a := e.do(chatReq(chatBody("my-alias", "tell me more", `"stream":true`, `"max_tokens":6`, `"stream_options":{"include_usage":true}`),
		requestcontrol.HeaderModelRewrite, "fake-model"), func([]byte) { arrivals = append(arrivals, time.Now()) })
	if a.Status != 200 || strings.Contains(string(a.Body), "fake-model") || strings.Count(string(a.Body), `"model":"my-alias"`) != 8 {
		t.Errorf("stream %d:\n%s", a.Status, a.Body)
	}
	if len(arrivals) < 6 || arrivals[len(arrivals)-1].Sub(arrivals[0]) < 60*time.Millisecond {
		t.Errorf("%d chunks arrived within %v: buffered", len(arrivals), arrivals[len(arrivals)-1].Sub(arrivals[0]))
	}
	if m := e.rec.wait(t, 2); m.Usage.CompletionTokens != 6 || m.Model != "my-alias" || !m.Streaming {
		t.Errorf("metrics %+v", m)
	}
	e.settled()
}

// TestE2EKilledServerFallsBack kills the server holding a prefix: the
// gateway's connection fails and the next pick in the destination list
// serves.
func TestE2EKilledServerFallsBack(t *testing.T) {
	e := newEnv(t, envConfig{fake: three(fakeserver.Config{})})
	system := strings.Repeat("Shared context for the fallback test. ", 100)
	a := e.do(chatReq(chatBody("fake-model", system+"first")), nil)
	home := a.Headers["x-served-by"]
	for _, f := range e.fakes {
		if f.Addr() == home {
			_ = f.Close()
		}
	}
	for i := range 5 {
		a := e.do(chatReq(chatBody("fake-model", system+fmt.Sprintf("again %d", i))), nil)
		if got := a.Headers["x-served-by"]; a.Status != 200 || got == home || got == "" {
			t.Fatalf("request %d: %d from %q", i, a.Status, got)
		}
	}
	e.settled()
}

// TestE2ESheddableAtSaturation: with every queue full, a sheddable request
// is refused with 429 and the reason header, as an immediate response.
func TestE2ESheddableAtSaturation(t *testing.T) {
	e := newEnv(t, envConfig{fake: three(fakeserver.Config{MaxRunning: 1, DecodePerToken: 20 * time.Millisecond})})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, f := range e.fakes {
		for range 7 {
			wg.Go(func() {
				req, _ := http.NewRequestWithContext(ctx, "POST", f.URL()+"/v1/completions",
					strings.NewReader(`{"model":"fake-model","prompt":"x","max_tokens":1000}`))
				if resp, err := e.http.Do(req); err == nil {
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
	a := e.do(&envoytest.Request{Path: "/v1/completions", Body: []byte(`{"model":"fake-model","prompt":"later"}`),
		Headers: envoytest.H(requestcontrol.HeaderObjective, "batch")}, nil)
	if a.Status != 429 || a.Headers[requestcontrol.HeaderDroppedReason] != requestcontrol.ReasonSaturated {
		t.Errorf("sheddable request: %d %v %s", a.Status, a.Headers, a.Body)
	}
	if m := e.rec.wait(t, 1); m.Status != 429 || m.Reason != requestcontrol.ReasonSaturated {
		t.Errorf("metrics %+v", m)
	}
}
