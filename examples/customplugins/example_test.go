package customplugins_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/examples/customplugins"
	"github.com/eppkit/eppkit/flowcontrol"
	"github.com/eppkit/eppkit/flowcontrol/flowcontroltest"
	. "github.com/eppkit/eppkit/scheduling/schedulingtest"
)

// Configure only the consumer: the data graph auto-creates its producer
// (registered with plugins.DefaultFor) and runs it before scheduling.
func ExampleKVHeadroom() {
	cfg, err := config.Load([]byte(`
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: kv-headroom-scorer
`))
	if err != nil {
		panic(err)
	}
	rt, err := config.Build(context.Background(), cfg, registry(), config.Options{})
	if err != nil {
		panic(err)
	}
	defer rt.Close()
	fmt.Println(rt.AutoCreated[0])

	eps := Eps(Ep("tight").Blocks(16, 1000).KV(0.95), Ep("roomy").Blocks(16, 1000).KV(0.5))
	req := Req("m").Prompt(strings.Repeat("abcd", 2000)).Build()
	d, err := rt.Director.Schedule(context.Background(), req, eps)
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Endpoints[0] == eps[1].HostPort())
	// Output:
	// prompt-tokens-producer (type prompt-tokens-producer) produces prompt-tokens for kv-headroom-scorer
	// true
}

// Test an ordering policy with the flow-control harness: a manual clock,
// a settable saturation, dispatch order as labels.
func ExampleSmallestFirst() {
	h := flowcontroltest.New(&testing.T{}, flowcontrol.Config{ // in a test, the test's t
		Bands: []flowcontrol.BandConfig{{Ordering: &customplugins.SmallestFirst{}}},
	})
	h.Add("tenant", 0, "big", flowcontroltest.Size(9000))
	h.Add("tenant", 0, "small", flowcontroltest.Size(100))
	h.Add("tenant", 0, "medium", flowcontroltest.Size(2000))
	fmt.Println(h.DispatchAll())
	// Output: [small medium big]
}

// Use the policy from YAML: flow control on, and the band of priority 0
// ordered smallest first.
func ExampleSmallestFirst_config() {
	cfg, err := config.Load([]byte(`
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
featureGates: [flowControl]
plugins:
- type: queue-scorer
- type: smallest-first-ordering-policy
flowControl:
  priorityBands:
  - priority: 0
    orderingPolicyRef: smallest-first-ordering-policy
`))
	if err != nil {
		panic(err)
	}
	rt, err := config.Build(context.Background(), cfg, registry(), config.Options{})
	if err != nil {
		panic(err)
	}
	defer rt.Close()
	fmt.Println(rt.FlowControl != nil, rt.Warnings)
	// Output: true []
}
