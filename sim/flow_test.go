package sim

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/eppkit/eppkit/config"
)

// flowYAML is the load-only configuration with the flowControl feature gate
// on: at most 8 requests in flight per server (the concurrency detector),
// a queue of at most 300 requests that wait at most 3s.
const flowYAML = `
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
featureGates: [flowControl]
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: max-score-picker
- name: sd
  type: concurrency-detector
  parameters:
    maxConcurrency: 8
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
  - pluginRef: kv-cache-utilization-scorer
  - pluginRef: max-score-picker
flowControl:
  maxRequests: 300
  defaultRequestTTL: 3s
  saturationDetector:
    pluginRef: sd
`

// Flow control runs in the loop, in virtual time: under overload the
// gateway holds requests (servers never run more than the detector allows
// plus what was in flight), rejects what waits past the TTL or overflows
// the queue, every request ends exactly once, and runs are deterministic.
func TestFlowControlInTheLoop(t *testing.T) {
	flow, err := config.Load([]byte(flowYAML))
	if err != nil {
		t.Fatal(err)
	}
	cfgs := []Config{{Name: "flow", Config: flow}, demo(t, "load")[0]}
	w := Tenants{Tenants: 20, ContextTokens: 2000, QuestionTokens: 400, OutputTokens: 100, Seed: 3}
	w.Arrivals = Ramp{From: 3 * w.Capacity(2, DefaultServerParams()), To: 3 * w.Capacity(2, DefaultServerParams()), Duration: 15 * time.Second}
	opts := Options{Servers: 2, Seed: 1, Workload: func() (Workload, error) { return w.New(), nil }}
	run := func() *Results {
		res, err := Run(context.Background(), cfgs, opts)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run()
	m := byName(t, res)
	f, l := m["flow"], m["load"]
	if f.Requests != l.Requests || f.Requests == 0 {
		t.Fatalf("arrivals: flow %d, load %d", f.Requests, l.Requests)
	}
	if f.Completed+f.Failed+f.Rejected != f.Requests {
		t.Errorf("flow: %d completed + %d failed + %d rejected != %d arrivals", f.Completed, f.Failed, f.Rejected, f.Requests)
	}
	if f.Rejected == 0 || l.Rejected != 0 {
		t.Errorf("rejections: flow %d (want some at 3× capacity), load %d (want none)", f.Rejected, l.Rejected)
	}
	// Held at the gateway, requests barely queue on the servers.
	if f.Queue.P90 >= l.Queue.P90/4 {
		t.Errorf("server queue p90: flow %.3fs, load %.3fs; want flow far below", f.Queue.P90, l.Queue.P90)
	}
	var a, b bytes.Buffer
	if err := res.WriteJSON(&a); err != nil {
		t.Fatal(err)
	}
	if err := run().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two runs with flow control differ")
	}
}
