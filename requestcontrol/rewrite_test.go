package requestcontrol_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/parsers/passthrough"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/requestcontrol"
	rt "github.com/eppkit/eppkit/requestcontrol/requestcontroltest"
)

// seedRewrite is the seed's canary split: llama3 → 90% stable, 10% canary.
var seedRewrite = requestcontrol.ModelRewrite{Name: "llama3-canary", Rules: []requestcontrol.RewriteRule{{
	Models:  []string{"llama3"},
	Targets: []requestcontrol.RewriteTarget{{Model: "llama3-stable", Weight: 90}, {Model: "llama3-canary", Weight: 10}},
}}}

func TestRewriteTargetsByWeight(t *testing.T) {
	rw, err := requestcontrol.NewModelRewrites(seedRewrite,
		requestcontrol.ModelRewrite{Name: "catch-all", Rules: []requestcontrol.RewriteRule{{
			Targets: []requestcontrol.RewriteTarget{{Model: "a"}, {Model: "b"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	rnd := plugins.NewRand(7)
	counts := map[string]int{}
	for range 10000 {
		target, resource, ok := rw.Target("llama3", rnd)
		if !ok || resource != "llama3-canary" {
			t.Fatalf("exact match lost to the catch-all: %q %q", target, resource)
		}
		counts[target]++
	}
	if c := counts["llama3-canary"]; c < 850 || c > 1150 {
		t.Errorf("canary share %d/10000, want ≈1000", c)
	}
	// Unset weights: uniform.
	counts = map[string]int{}
	for range 10000 {
		target, _, _ := rw.Target("other", rnd)
		counts[target]++
	}
	if counts["a"] < 4700 || counts["b"] < 4700 {
		t.Errorf("uniform draw %v", counts)
	}
	// Deterministic for a seed.
	a, b := plugins.NewRand(3), plugins.NewRand(3)
	for range 100 {
		x, _, _ := rw.Target("llama3", a)
		y, _, _ := rw.Target("llama3", b)
		if x != y {
			t.Fatal("same seed, different draws")
		}
	}
	var none *requestcontrol.ModelRewrites
	if _, _, ok := none.Target("x", rnd); ok {
		t.Error("nil rules matched")
	}
}

func TestRewriteValidation(t *testing.T) {
	_, err := requestcontrol.NewModelRewrites(requestcontrol.ModelRewrite{Name: "bad", Rules: []requestcontrol.RewriteRule{
		{Models: []string{"x"}},
		{Targets: []requestcontrol.RewriteTarget{{Model: "", Weight: 1}, {Model: "y", Weight: -2}}},
	}})
	for _, want := range []string{`"bad" rules[0]: no targets`, "rules[1].targets[0]: missing modelRewrite", "rules[1].targets[1].weight: must be ≥ 0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// TestRewriteRoundTrip: the body is forwarded with the target model and a
// correct length; the client gets the incoming model back, streaming or
// not, whatever the chunk boundaries.
func TestRewriteRoundTrip(t *testing.T) {
	rec := &rt.Recorder{}
	d := rt.NewDirector(t, rt.Config{Rewrites: []requestcontrol.ModelRewrite{{Rules: []requestcontrol.RewriteRule{{
		Models: []string{"llama3"}, Targets: []requestcontrol.RewriteTarget{{Model: "llama3-canary-2025"}}}}}},
		Plugins: []any{rec}})
	in := rt.Chat("llama3", "hello")
	stream := rt.SSE(
		`{"id":"1","model":"llama3-canary-2025","choices":[{"delta":{"content":"the model llama3-canary-2025 says"}}]}`,
		`{"id":"1","model":"llama3-canary-2025","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}`)
	wantStream := strings.ReplaceAll(stream, `"model":"llama3-canary-2025"`, `"model":"llama3"`)
	body := `{"id":"1","object":"chat.completion","model":"llama3-canary-2025","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}`
	wantBody := strings.ReplaceAll(body, "llama3-canary-2025", "llama3")
	for size := 1; size <= len(stream); size++ {
		res := rt.Do(ctx, d, rt.Chat("llama3", "hello"), rt.Response{Stream: true, Chunks: rt.Split(stream, size)})
		if res.Rejection != nil {
			t.Fatal(res.Rejection)
		}
		if string(res.Body) != wantStream {
			t.Fatalf("chunks of %d:\n got %s\nwant %s", size, res.Body, wantStream)
		}
		if size > 40 {
			size += 13 // every size is slow under -race; sample the large ones
		}
	}
	for _, size := range []int{1, 7, 30, len(body)} {
		res := rt.Do(ctx, d, rt.Chat("llama3", "hello"), rt.Response{Chunks: rt.Split(body, size)})
		if string(res.Body) != wantBody {
			t.Fatalf("body in chunks of %d: %s", size, res.Body)
		}
		if res.Header.Get("Content-Length") != "" {
			t.Error("Content-Length kept although the body changes size")
		}
	}
	if _, u, _ := rec.Last(); u.PromptTokens != 5 {
		t.Errorf("usage through the rewrite: %+v", u)
	}
	res := rt.Do(ctx, d, in, rt.Response{})
	x := res.Exchange
	if x.Request.IncomingModel != "llama3" || x.Request.TargetModel != "llama3-canary-2025" {
		t.Errorf("models %q → %q", x.Request.IncomingModel, x.Request.TargetModel)
	}
	var fwd struct {
		Model    string `json:"model"`
		Messages []struct{ Content string }
	}
	if err := json.Unmarshal(x.Body, &fwd); err != nil || fwd.Model != "llama3-canary-2025" || fwd.Messages[0].Content != "hello" {
		t.Errorf("forwarded body %s (%v)", x.Body, err)
	}
	if x.Headers["content-length"] != strconv.Itoa(len(x.Body)) {
		t.Errorf("content-length %q for %d bytes", x.Headers["content-length"], len(x.Body))
	}
	if string(in.Body) != `{"model":"llama3","messages":[{"role":"user","content":"hello"}]}` {
		t.Errorf("the client's body was modified: %s", in.Body)
	}
}

// TestRewriteHeader: x-llm-d-model-name-rewrite sets the target when no rule
// matches; a matching rule overrides it.
func TestRewriteHeader(t *testing.T) {
	d := rt.NewDirector(t, rt.Config{Rewrites: []requestcontrol.ModelRewrite{seedRewrite}})
	res := rt.Do(ctx, d, rt.Chat("client-facing", "x", requestcontrol.HeaderModelRewrite, "served-name"), rt.Response{
		Chunks: [][]byte{[]byte(`{"model":"served-name"}`)}})
	if res.Exchange.Request.TargetModel != "served-name" || string(res.Body) != `{"model":"client-facing"}` {
		t.Errorf("header rewrite: target %q, client got %s", res.Exchange.Request.TargetModel, res.Body)
	}
	res = rt.Do(ctx, d, rt.Chat("x", "x", requestcontrol.HeaderRewriteAlias, "y"), rt.Response{})
	if res.Exchange.Request.TargetModel != "y" {
		t.Errorf("alias header: %q", res.Exchange.Request.TargetModel)
	}
	res = rt.Do(ctx, d, rt.Chat("llama3", "x", requestcontrol.HeaderModelRewrite, "ignored"), rt.Response{})
	if tm := res.Exchange.Request.TargetModel; tm != "llama3-stable" && tm != "llama3-canary" {
		t.Errorf("a matching rule wins over the header: %q", tm)
	}
}

// TestRewriteNonJSONBody: a passthrough body that is not JSON cannot be
// rewritten; it is forwarded unchanged with the incoming model.
func TestRewriteNonJSONBody(t *testing.T) {
	d := rt.NewDirector(t, rt.Config{Parsers: []parsers.Parser{&passthrough.Parser{}},
		Rewrites: []requestcontrol.ModelRewrite{{Rules: []requestcontrol.RewriteRule{{Targets: []requestcontrol.RewriteTarget{{Model: "t"}}}}}}})
	res := rt.Do(ctx, d, rt.Request("/custom", "not json", requestcontrol.HeaderModelRewrite, "t"), rt.Response{})
	if res.Rejection != nil || string(res.Exchange.Body) != "not json" || res.Exchange.Request.TargetModel != "" {
		t.Errorf("%+v", res)
	}
}

func TestNoRewriteForwardsChunksAsTheyArrive(t *testing.T) {
	d := rt.NewDirector(t, rt.Config{})
	chunks := rt.Split(rt.SSE(`{"model":"m","choices":[]}`, `{"model":"m","choices":[]}`), 11)
	res := rt.Do(ctx, d, rt.Chat("m", "x"), rt.Response{Stream: true, Chunks: chunks})
	for i, w := range res.Writes {
		if string(w) != string(chunks[i]) {
			t.Fatalf("write %d held or changed: %q vs %q", i, w, chunks[i])
		}
	}
	res = rt.Do(ctx, d, rt.Chat("m", "x"), rt.Response{Header: http.Header{"Content-Type": {"application/json"}, "Content-Length": {"9"}}})
	if res.Header.Get("Content-Length") != "9" {
		t.Error("Content-Length removed without a rewrite")
	}
}
