package requestcontrol_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/parsers/openai"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/requestcontrol/producers/prefix"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/pickers"
	"github.com/eppkit/eppkit/scheduling/scorers"
)

// benchEndpoints are the pinned scenario's endpoints (BENCHMARKS.md): i at
// 10.0.<i/256>.<i%256>:8000, waiting (i*7)%33, running (i*13)%65, KV usage
// ((i*37)%96)/100.
func benchEndpoints(n int) []*scheduling.Endpoint {
	eps := make([]*scheduling.Endpoint, n)
	now := time.Now()
	for i := range eps {
		eps[i] = datalayer.New(fmt.Sprintf("ep-%d", i), fmt.Sprintf("10.0.%d.%d", i/256, i%256), 8000, nil).
			WithMetrics(datalayer.Metrics{Waiting: (i * 7) % 33, Running: (i * 13) % 65,
				KVUsage: float64((i*37)%96) / 100, UpdateTime: now})
	}
	return eps
}

// w1Bodies returns n chat bodies of the W1 workload: system prompt k%64 of
// 6,000 characters and a unique 1,000-character user message.
func w1Bodies(n int) [][]byte {
	r := rand.New(rand.NewPCG(1, 1))
	text := func(chars int) string {
		var sb strings.Builder
		for sb.Len() < chars {
			if sb.Len() > 0 {
				sb.WriteByte(' ')
			}
			for range 2 + r.IntN(9) {
				sb.WriteByte(byte('a' + r.IntN(26)))
			}
		}
		return sb.String()[:chars]
	}
	systems := make([]string, 64)
	for i := range systems {
		systems[i] = text(6000)
	}
	bodies := make([][]byte, n)
	for k := range bodies {
		bodies[k], _ = json.Marshal(map[string]any{"model": "m", "messages": []map[string]string{
			{"role": "system", "content": systems[k%64]}, {"role": "user", "content": text(1000)}}})
	}
	return bodies
}

// benchDirector is config C1: queue ×2, KV cache ×2, prefix ×3 (the
// approximate producer with its defaults), max-score picker, the openai
// parser and the default saturation admission.
func benchDirector(b *testing.B, eps []*scheduling.Endpoint) *requestcontrol.Director {
	prof := &scheduling.Profile{Name: "default", PickerName: "max-score-picker", Picker: &pickers.MaxScore{},
		Scorers: []scheduling.WeightedScorer{
			{Name: "queue-scorer", Scorer: &scorers.Queue{}, Weight: 2},
			{Name: "kv-cache-utilization-scorer", Scorer: &scorers.KVCacheUtilization{}, Weight: 2},
			{Name: "prefix-cache-scorer", Scorer: &scorers.PrefixCache{}, Weight: 3},
		}}
	sched, err := scheduling.New(scheduling.ProfileHandlerFunc(
		func(ctx context.Context, _ *scheduling.Request, names []string, run scheduling.RunProfileFunc) (string, error) {
			_, err := run(ctx, names[0])
			return names[0], err
		}), prof)
	if err != nil {
		b.Fatal(err)
	}
	d := &requestcontrol.Director{
		Scheduler: sched,
		Parsers:   parsers.NewSelector(&openai.Parser{}),
		Pool:      requestcontrol.StaticPool(eps),
		Admission: &requestcontrol.SaturationAdmitter{Detector: zeroDetector{}},
		Rand:      plugins.NewRand(1),
	}
	d.Use("approx-prefix-cache-producer", &prefix.Approx{})
	return d
}

type zeroDetector struct{}

func (zeroDetector) Saturation(context.Context, []*datalayer.Endpoint) float64 { return 0 }

// BenchmarkHandleRequest is the whole request side of the Director: raw 7 KB
// W1 chat body and path → parse → objective → admission → candidates →
// prefix producer → scheduling (C1) → pre-request (index update), then the
// exchange is closed.
func BenchmarkHandleRequest(b *testing.B) {
	bodies := w1Bodies(1024)
	for _, n := range []int{8, 64, 256} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			d := benchDirector(b, benchEndpoints(n))
			ctx := context.Background()
			in := &requestcontrol.Inbound{ID: "bench", Path: "/v1/chat/completions", Headers: map[string]string{}}
			for i := range 2048 { // warm the index
				in.Body = bodies[i%len(bodies)]
				x, err := d.HandleRequest(ctx, in)
				if err != nil {
					b.Fatal(err)
				}
				x.Close(nil)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				in.Body = bodies[i%len(bodies)]
				i++
				x, err := d.HandleRequest(ctx, in)
				if err != nil {
					b.Fatal(err)
				}
				x.Close(nil)
			}
		})
	}
}

// BenchmarkResponseStream is a small request (parse to pick) and its
// response: a 64-event SSE stream with usage in the last event, fed in
// 100-byte chunks, with and without the model name rewritten back.
func BenchmarkResponseStream(b *testing.B) {
	var events []string
	for i := range 63 {
		events = append(events, fmt.Sprintf(`{"id":"c","object":"chat.completion.chunk","model":"target","choices":[{"index":0,"delta":{"content":"tok%d "}}]}`, i))
	}
	events = append(events, `{"id":"c","model":"target","choices":[],"usage":{"prompt_tokens":1750,"completion_tokens":63}}`)
	var chunks [][]byte
	sse := []byte(strings.Join(events, "\n\n"))
	for len(sse) > 100 {
		chunks, sse = append(chunks, sse[:100]), sse[100:]
	}
	chunks = append(chunks, sse)
	for _, rewrite := range []bool{false, true} {
		b.Run(fmt.Sprintf("rewrite=%v", rewrite), func(b *testing.B) {
			d := benchDirector(b, benchEndpoints(8))
			body := []byte(`{"model":"target","messages":[{"role":"user","content":"hi"}],"stream":true}`)
			if rewrite {
				body = []byte(`{"model":"incoming","messages":[{"role":"user","content":"hi"}],"stream":true}`)
				d.Pool = requestcontrol.StaticPool(benchEndpoints(8))
			}
			in := &requestcontrol.Inbound{Path: "/v1/chat/completions", Headers: map[string]string{requestcontrol.HeaderModelRewrite: "target"}, Body: body}
			ctx := context.Background()
			h := http.Header{"Content-Type": {"text/event-stream"}}
			b.ReportAllocs()
			for b.Loop() {
				x, err := d.HandleRequest(ctx, in)
				if err != nil {
					b.Fatal(err)
				}
				x.ResponseHeaders("", 200, h)
				for i, c := range chunks {
					x.ResponseBody(c, i == len(chunks)-1)
				}
				if u := x.Usage(); u.PromptTokens != 1750 {
					b.Fatalf("usage %+v", u)
				}
			}
		})
	}
}
