package benchmarks

import (
	"context"
	"fmt"
	"testing"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/scheduling"
)

// configLoad is the foundation issue's cycle: queue ×2 + kv-cache ×2 and the
// max-score picker, no producers.
const configLoad = `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
    weight: 2
  - pluginRef: max-score-picker
`

// BenchmarkCycleLoad is one whole scheduling cycle through the Director with
// load scorers only: the cost of the framework itself (the reference spends
// 3.5–150 µs just building its endpoint snapshot at 8–256 endpoints).
func BenchmarkCycleLoad(b *testing.B) {
	for _, n := range []int{8, 64, 256} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			rt := buildRuntime(b, configLoad)
			eps := endpoints(n)
			body := &parsers.Body{Model: "m", Messages: []parsers.Message{{Role: "user", Content: "hi"}}}
			req := scheduling.Request{Body: body, IncomingModel: "m", TargetModel: "m"}
			b.ReportAllocs()
			for b.Loop() {
				req.Data.Reset()
				d, err := rt.Director.Schedule(context.Background(), &req, eps)
				if err != nil || d.Endpoints[0] != eps[0].HostPort() {
					b.Fatalf("picked %v, %v", d, err)
				}
			}
		})
	}
}
