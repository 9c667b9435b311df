package benchmarks

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins/std"
)

// textGen is the BENCHMARKS.md text generator: pseudo-random lowercase words
// of 2–10 letters separated by spaces, from a PRNG seeded with 1.
type textGen struct{ r *rand.Rand }

func newTextGen() *textGen { return &textGen{rand.New(rand.NewPCG(1, 1))} }

// text returns exactly n characters.
func (g *textGen) text(n int) string {
	var b strings.Builder
	b.Grow(n + 11)
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		for range 2 + g.r.IntN(9) {
			b.WriteByte(byte('a' + g.r.IntN(26)))
		}
	}
	return b.String()[:n]
}

// endpoints returns the common pool of N endpoints.
func endpoints(n int) []*datalayer.Endpoint {
	now := time.Now()
	eps := make([]*datalayer.Endpoint, n)
	for i := range eps {
		e := datalayer.New(fmt.Sprintf("ep-%d", i), fmt.Sprintf("10.0.%d.%d", i/256, i%256), 8000, nil)
		eps[i] = e.WithMetrics(datalayer.Metrics{
			Waiting: (i * 7) % 33, Running: (i * 13) % 65, KVUsage: float64((i*37)%96) / 100, UpdateTime: now,
		})
	}
	return eps
}

// workload holds distinct requests of one workload, parsed and raw.
type workload struct {
	bodies []*parsers.Body
	raw    [][]byte
}

// poolSize distinct requests rotate in the timed loops: enough that a body's
// unique tail has been evicted from the warm endpoint (capacity 31,250 blocks,
// 4–5 unique blocks a request) before the body comes round again, so every
// timed request is new to the index, as in the scenario.
const poolSize = 8192

// makeWorkload builds n chat requests: shared(k) as the system prompt and a
// unique user message of 1,000 characters. The parsed bodies share the
// system prompt's string, as a just-parsed body sits in cache in a real
// picker; keepRaw also keeps the JSON for the parse benchmark.
func makeWorkload(n int, shared func(k int) string, g *textGen, keepRaw bool) *workload {
	w := &workload{}
	for k := range n {
		system, user := shared(k), g.text(1000)
		w.bodies = append(w.bodies, &parsers.Body{API: "chat/completions", Model: "m", Messages: []parsers.Message{
			{Role: "system", Content: system}, {Role: "user", Content: user},
		}})
		if !keepRaw {
			continue
		}
		raw, err := json.Marshal(map[string]any{"model": "m", "messages": []map[string]string{
			{"role": "system", "content": system}, {"role": "user", "content": user},
		}})
		if err != nil {
			panic(err)
		}
		if p, err := chatParser().Parse("/v1/chat/completions", raw); err != nil || p.Messages[1].Content != user {
			panic(fmt.Sprintf("the parser does not read the workload back: %v", err))
		}
		w.raw = append(w.raw, raw)
	}
	return w
}

var genW1, genW2, genW3 *workload

// chatParser is the stock openai-parser.
func chatParser() *parsers.Selector {
	p, err := std.Registry().Build("openai-parser", "openai-parser", nil)
	if err != nil {
		panic(err)
	}
	return parsers.NewSelector(p.(parsers.Parser))
}

// w1 is W1: 64 system prompts of 6,000 characters.
func w1() *workload {
	if genW1 == nil {
		g := newTextGen()
		systems := make([]string, 64)
		for i := range systems {
			systems[i] = g.text(6000)
		}
		genW1 = makeWorkload(poolSize, func(k int) string { return systems[k%64] }, g, true)
	}
	return genW1
}

// w2 is W2: one 32,000-character prompt.
func w2() *workload {
	if genW2 == nil {
		g := newTextGen()
		shared := g.text(32000)
		genW2 = makeWorkload(poolSize, func(int) string { return shared }, g, false)
	}
	return genW2
}

// w3 is W3: one 128,000-character prompt.
func w3() *workload {
	if genW3 == nil {
		g := newTextGen()
		shared := g.text(128000)
		genW3 = makeWorkload(poolSize, func(int) string { return shared }, g, false)
	}
	return genW3
}

// configC1 is C1: queue ×2, kv-cache ×2, prefix ×3 (approximate producer
// with its defaults), max-score-picker.
const configC1 = `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: prefix-cache-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
    weight: 2
  - pluginRef: prefix-cache-scorer
    weight: 3
  - pluginRef: max-score-picker
`

func buildRuntime(tb testing.TB, yaml string) *config.Runtime {
	tb.Helper()
	cfg, err := config.Load([]byte(yaml))
	if err != nil {
		tb.Fatal(err)
	}
	rt, err := config.Build(context.Background(), cfg, std.Registry(), config.Options{Seed: 1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rt.Close() })
	return rt
}
