package prefix_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/requestcontrol/producers/prefix"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/schedulingtest"
)

var ctx = context.Background()

func newProducer(t *testing.T, params string) *prefix.Approx {
	t.Helper()
	return pluginstest.Build[*prefix.Approx](t, std.Registry(), "approx-prefix-cache-producer", params)
}

func chat(model, system, user string) *scheduling.Request {
	return schedulingtest.Req(model).Body(&parsers.Body{Model: model, Messages: []parsers.Message{
		{Role: "system", Content: system}, {Role: "user", Content: user},
	}}).Build()
}

func match(t *testing.T, p *prefix.Approx, req *scheduling.Request, eps []*scheduling.Endpoint) *scheduling.PrefixMatch {
	t.Helper()
	if err := p.Produce(ctx, req, eps); err != nil {
		t.Fatal(err)
	}
	m, ok := plugins.Get(&req.Data, scheduling.PrefixMatchKey(scheduling.DefaultPrefixProducer))
	if !ok {
		t.Fatal("no prefix match produced")
	}
	return m
}

// pick runs the producer's PreRequest as if primary (and prefill, if given)
// had been chosen.
func pick(p *prefix.Approx, req *scheduling.Request, primary *scheduling.Endpoint, prefill *scheduling.Endpoint) {
	res := &scheduling.Result{Primary: "decode", Profiles: []scheduling.ProfileResult{{Profile: "decode", Endpoints: []*scheduling.Endpoint{primary}}}}
	if prefill != nil {
		res.Profiles = append(res.Profiles, scheduling.ProfileResult{Profile: "prefill", Endpoints: []*scheduling.Endpoint{prefill}})
	}
	p.PreRequest(ctx, req, res)
}

func TestByteStreamMatchesSpec(t *testing.T) {
	tools := json.RawMessage(`[{"type":"function","function":{"name":"f"}}]`)
	body := &parsers.Body{Model: "m", Tools: tools, System: "sys", CacheSalt: "salt",
		Messages: []parsers.Message{{Role: "system", Content: strings.Repeat("a", 300)}, {Role: "user", Content: "héllo\xff"}}}
	req := schedulingtest.Req("m").Target("m-rewritten").Body(body).Build()
	var h kvindex.ChainHasher
	got := prefix.HashRequest(&h, nil, req, 64, 2048)
	stream := string(tools) + "sys" + "system" + strings.Repeat("a", 300) + "user" + "héllo\xff"
	want := kvindex.HashPrompt(nil, "m-rewritten", "salt", stream, 64, 2048)
	if !slices.Equal(got, want) || len(want) != 2 {
		t.Fatalf("hashes %x, want %x", got, want)
	}
	// Token ids take precedence over text.
	req.Body.TokenIDs = []uint32{1, 2, 3}
	h2 := prefix.HashRequest(&h, nil, req, 64, 2048)
	h.Reset("m-rewritten", "salt", 64, 2048)
	h.WriteTokens([]uint32{1, 2, 3})
	if want := h.AppendSum(nil); !slices.Equal(h2, want) {
		t.Fatalf("token hashes %x, want %x", h2, want)
	}
}

func TestMediaChangesTheHash(t *testing.T) {
	img := func(ref string) *scheduling.Request {
		return schedulingtest.Req("m").Body(&parsers.Body{Model: "m", Messages: []parsers.Message{
			{Role: "user", Content: "what is in this picture?", Media: []parsers.Media{{Type: "image_url", Ref: ref}}},
		}}).Build()
	}
	var h kvindex.ChainHasher
	a := prefix.HashRequest(&h, nil, img("https://x/cat.png"), 64, 2048)
	b := prefix.HashRequest(&h, nil, img("https://x/dog.png"), 64, 2048)
	if slices.Equal(a, b) {
		t.Fatal("the same text with different images hashed the same")
	}
}

func TestPickCreditsAndConsecutiveMatch(t *testing.T) {
	p := newProducer(t, "")
	eps := schedulingtest.Eps(schedulingtest.Ep("a"), schedulingtest.Ep("b"), schedulingtest.Ep("c"))
	system := strings.Repeat("shared system prompt ", 100) // 2,100 bytes
	r1 := chat("m", system, "first question")
	m := match(t, p, r1, eps)
	if m.TotalBlocks != (len("system")+len(system)+len("user")+len("first question")+255)/256 || !m.Cold() {
		t.Fatalf("cold request: %+v", m)
	}
	pick(p, r1, eps[1], eps[2])

	r2 := chat("m", system, "second question, different")
	m = match(t, p, r2, eps)
	if m.Matched[0] != 0 || m.Matched[1] == 0 || m.Matched[1] != m.Matched[2] {
		t.Fatalf("matched %v: b (primary) and c (prefill) hold the shared prefix", m.Matched)
	}
	if m.Matched[1] >= float64(m.TotalBlocks) || m.Matched[1] < float64(len(system)/256) {
		t.Fatalf("matched %v of %d: want the shared blocks only", m.Matched, m.TotalBlocks)
	}
	// Another model never matches: the model roots the chain.
	if m := match(t, p, chat("other", system, "first question"), eps); !m.Cold() {
		t.Fatalf("other model matched %v", m.Matched)
	}
	// A salted request does not share cache with unsalted ones.
	salted := chat("m", system, "first question")
	salted.Body.CacheSalt = "tenant-a"
	if m := match(t, p, salted, eps); !m.Cold() {
		t.Fatalf("salted request matched %v", m.Matched)
	}
}

func TestEndpointRemovedForgetsBlocks(t *testing.T) {
	p := newProducer(t, "")
	eps := schedulingtest.Eps(schedulingtest.Ep("a"), schedulingtest.Ep("b"))
	r := chat("m", strings.Repeat("x", 1000), "q")
	match(t, p, r, eps)
	pick(p, r, eps[0], nil)
	p.EndpointRemoved(eps[0])
	if m := match(t, p, chat("m", strings.Repeat("x", 1000), "q"), eps); !m.Cold() {
		t.Fatalf("removed endpoint still matches: %v", m.Matched)
	}
	if n := p.Index().Len(); n != 0 {
		t.Fatalf("index holds %d entries after removal", n)
	}
	// A request that was in flight when the endpoint left does not bring it back.
	pick(p, r, eps[0], nil)
	if n := p.Index().Len(); n != 0 {
		t.Fatalf("a late pick re-credited a removed endpoint: %d entries", n)
	}
	// Once the endpoint rejoins, picks credit it again.
	p.EndpointAdded(eps[0])
	pick(p, r, eps[0], nil)
	if n := p.Index().Len(); n == 0 {
		t.Fatal("a rejoined endpoint is not credited")
	}
}

func TestAutoTuneBlockSizeAndCapacity(t *testing.T) {
	p := newProducer(t, "")
	if got := p.BlockTokens(); got != 64 {
		t.Fatalf("default block tokens %d, want the floor 64", got)
	}
	small := schedulingtest.Eps(schedulingtest.Ep("a").Blocks(16, 100))
	match(t, p, chat("m", "s", "q"), small)
	if got := p.BlockTokens(); got != 64 {
		t.Fatalf("engine block 16 → %d, want 64", got)
	}
	// An engine with 128-token blocks and 4 GPU blocks holds 512 tokens =
	// 4 index blocks of 128 tokens.
	eps := schedulingtest.Eps(schedulingtest.Ep("a").Blocks(128, 4), schedulingtest.Ep("b").Blocks(128, 4))
	long := strings.Repeat("y", 128*4*10) // 10 blocks of 512 bytes
	r := chat("m", long, "q")
	m := match(t, p, r, eps)
	if p.BlockTokens() != 128 || m.BlockTokens != 128 {
		t.Fatalf("block tokens %d", p.BlockTokens())
	}
	pick(p, r, eps[0], nil)
	if got := p.Index().Len(); got != 4 {
		t.Fatalf("index holds %d blocks for a 4-block engine", got)
	}
	m = match(t, p, chat("m", long, "q"), eps)
	if m.Matched[0] != 4 {
		t.Fatalf("matched %v, want the first 4 blocks (capacity)", m.Matched)
	}
	// autoTune off: blockSizeTokens and lruCapacityPerServer rule.
	q := newProducer(t, `{"autoTune": false, "blockSizeTokens": 100, "lruCapacityPerServer": 2}`)
	m = match(t, q, r, eps)
	if m.BlockTokens != 100 {
		t.Fatalf("block tokens %d, want 100", m.BlockTokens)
	}
	pick(q, r, eps[0], nil)
	if got := q.Index().Len(); got != 2 {
		t.Fatalf("index holds %d, want capacity 2", got)
	}
}

func TestLimits(t *testing.T) {
	p := newProducer(t, `{"maxPrefixTokensToMatch": 640}`)
	eps := schedulingtest.Eps(schedulingtest.Ep("a"))
	huge := strings.Repeat("z", 200_000)
	if m := match(t, p, chat("m", huge, "q"), eps); m.TotalBlocks != 10 {
		t.Fatalf("blocks %d, want 640/64 = 10", m.TotalBlocks)
	}
	p = newProducer(t, "")
	if m := match(t, p, chat("m", strings.Repeat("z", 1_000_000), "q"), eps); m.TotalBlocks != 2048 {
		t.Fatalf("blocks %d, want the 2048 cap", m.TotalBlocks)
	}
	// Empty prompt: no blocks, nothing credited.
	empty := schedulingtest.Req("m").Body(&parsers.Body{Model: "m"}).Build()
	if m := match(t, p, empty, eps); m.TotalBlocks != 0 {
		t.Fatalf("empty prompt: %+v", m)
	}
	pick(p, empty, eps[0], nil)
	if p.Index().Len() != 0 {
		t.Fatal("empty prompt credited blocks")
	}
	// No body at all (e.g. a GET without a body).
	match(t, p, schedulingtest.Req("m").Build(), eps)
}

func TestValidate(t *testing.T) {
	for _, params := range []string{
		`{"lruCapacityPerServer": 0}`, `{"lruCapacityPerServer": -5}`, `{"blockSizeTokens": 0}`,
		`{"maxPrefixBlocksToMatch": -1}`, `{"maxPrefixTokensToMatch": -1}`,
	} {
		if _, err := std.Registry().Build("approx-prefix-cache-producer", "p", []byte(params)); err == nil {
			t.Errorf("%s accepted", params)
		}
	}
}

func TestGoValueWithoutInit(t *testing.T) {
	p := &prefix.Approx{}
	eps := schedulingtest.Eps(schedulingtest.Ep("a"))
	r := chat("m", strings.Repeat("x", 600), "q")
	if m := match(t, p, r, eps); m.TotalBlocks != 3 {
		t.Fatalf("blocks %d", m.TotalBlocks)
	}
}

func TestConcurrentUse(t *testing.T) {
	p := newProducer(t, "")
	eps := schedulingtest.Eps(schedulingtest.Ep("a"), schedulingtest.Ep("b"), schedulingtest.Ep("c"))
	done := make(chan bool)
	for g := range 4 {
		go func() {
			defer func() { done <- true }()
			for i := range 200 {
				r := chat("m", strings.Repeat(string(rune('a'+i%5)), 700), "q")
				if err := p.Produce(ctx, r, eps); err != nil {
					t.Error(err)
					return
				}
				pick(p, r, eps[(g+i)%3], nil)
				if i%50 == 0 {
					p.EndpointRemoved(eps[g%3])
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}

func FuzzHashRequestSplit(f *testing.F) {
	f.Add("tools", "system", "user text", "more", uint8(3))
	f.Fuzz(func(t *testing.T, tools, sys, a, b string, split uint8) {
		cut := int(split) % (len(a) + 1)
		one := &parsers.Body{Model: "m", Tools: json.RawMessage(tools), Messages: []parsers.Message{{Role: sys, Content: a + b}}}
		two := &parsers.Body{Model: "m", Tools: json.RawMessage(tools + sys + a[:cut]), Messages: []parsers.Message{{Role: a[cut:], Content: b}}}
		var h kvindex.ChainHasher
		x := prefix.HashRequest(&h, nil, &scheduling.Request{Body: one}, 64, 2048)
		y := prefix.HashRequest(&h, nil, &scheduling.Request{Body: two}, 64, 2048)
		if !slices.Equal(x, y) {
			t.Fatalf("the same byte stream hashed differently: %x vs %x", x, y)
		}
	})
}

// Hashes prepared in the parse stage are the ones Produce would compute,
// and Produce hashes again when the target model changed since.
func TestPrepareMatchesProduce(t *testing.T) {
	p := newProducer(t, "")
	eps := schedulingtest.Eps(schedulingtest.Ep("a"), schedulingtest.Ep("b"))
	long := strings.Repeat("a shared system prompt ", 100)
	pick(p, chat("m", long, "first"), eps[0], nil)

	plain := match(t, p, chat("m", long, "second"), eps)
	prepared := chat("m", long, "second")
	p.Prepare(ctx, prepared)
	if got := match(t, p, prepared, eps); !slices.Equal(got.Blocks, plain.Blocks) || !slices.Equal(got.Matched, plain.Matched) {
		t.Fatalf("prepared: blocks %v matched %v; produced: blocks %v matched %v", got.Blocks, got.Matched, plain.Blocks, plain.Matched)
	}

	rewritten := chat("m", long, "second")
	p.Prepare(ctx, rewritten)
	rewritten.TargetModel = "m-lora"
	fresh := chat("m", long, "second")
	fresh.TargetModel = "m-lora"
	if got, want := match(t, p, rewritten, eps), match(t, p, fresh, eps); !slices.Equal(got.Blocks, want.Blocks) || slices.Equal(got.Blocks, plain.Blocks) {
		t.Fatal("Produce used hashes prepared for another target model")
	}
}
