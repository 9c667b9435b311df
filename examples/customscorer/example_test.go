package customscorer_test

import (
	"context"
	"fmt"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/examples/customscorer"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/pickers"
	. "github.com/eppkit/eppkit/scheduling/schedulingtest"
	"github.com/eppkit/eppkit/scheduling/scorers"
)

// A policy unit test with the custom scorer: the H200 wins unless its queue
// is much longer.
func Example() {
	eps := Eps(Ep("a100").Label("gpu", "a100").Waiting(1), Ep("h200").Label("gpu", "h200").Waiting(3))
	policy := Profile("default").
		Scorer(&customscorer.PreferLabel{Key: "gpu", Value: "h200"}, 1).
		Scorer(&scorers.Queue{}, 0.5).
		Picker(&pickers.MaxScore{}).Build()
	picked, _ := Schedule(policy, nil, eps...)
	fmt.Println(picked[0].Name)
	// Output: h200
}

// Register the scorer next to the stock plugins and use it from the same
// EndpointPickerConfig YAML as the built-in ones.
func Example_config() {
	reg := std.Registry()
	plugins.Register[*customscorer.PreferLabel](reg, "prefer-label-scorer", plugins.Category("scorer"))

	cfg, err := config.Load([]byte(`apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: prefer-label-scorer
  parameters: {key: gpu, value: h200}
- type: queue-scorer
schedulingProfiles:
- name: default
  plugins:
  - {pluginRef: prefer-label-scorer, weight: 1}
  - {pluginRef: queue-scorer, weight: 0.5}
`))
	if err != nil {
		panic(err)
	}
	rt, err := config.Build(context.Background(), cfg, reg, config.Options{Seed: 1})
	if err != nil {
		panic(err)
	}
	defer rt.Close()

	eps := Eps(Ep("a100").Label("gpu", "a100").Waiting(1), Ep("h200").Label("gpu", "h200").Waiting(3))
	d, err := rt.Director.Schedule(context.Background(), &scheduling.Request{}, eps)
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Endpoints[0] == eps[1].HostPort())
	// Output: true
}

func ExamplePreferLabel_conformance() {
	// In a _test.go file: schedulingtest.TestScorer(t, func() scheduling.Scorer {
	//	return &customscorer.PreferLabel{Key: "gpu", Value: "h200"} })
	fmt.Println(Score(&customscorer.PreferLabel{Key: "gpu", Value: "h200"}, nil,
		Eps(Ep("a").Label("gpu", "a100"), Ep("b").Label("gpu", "h200"))...))
	// Output: [0 1]
}
