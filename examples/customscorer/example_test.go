package customscorer_test

import (
	"context"
	"fmt"
	"time"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/examples/customscorer"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/pickers"
	. "github.com/eppkit/eppkit/scheduling/schedulingtest"
	"github.com/eppkit/eppkit/scheduling/scorers"
	"github.com/eppkit/eppkit/sim"
)

// A policy unit test: endpoint b has the longer queue but runs less, so the
// custom scorer prefers it; with the stock queue scorer added at weight 2,
// a wins.
func Example() {
	eps := Eps(Ep("a").Waiting(2).Running(8), Ep("b").Waiting(3))
	fmt.Println(Score(&customscorer.LeastBusy{RunningWeight: 0.25}, nil, eps...))

	policy := Profile("default").
		Scorer(&customscorer.LeastBusy{RunningWeight: 0.25}, 1).
		Scorer(&scorers.Queue{}, 2).
		Picker(&pickers.MaxScore{}).Build()
	picked, err := Schedule(policy, nil, eps...)
	fmt.Println(picked[0].Name, err)
	// Output:
	// [0.2 0.25]
	// a <nil>
}

// Register the scorer next to the stock plugins (one line) and use it from
// the same EndpointPickerConfig YAML as the built-in ones.
func Example_config() {
	reg := std.Registry()
	plugins.Register[*customscorer.LeastBusy](reg, "least-busy-scorer", plugins.Category("scorer"))

	cfg, err := config.Load([]byte(`
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: least-busy-scorer
  parameters:
    runningWeight: 0.5
- type: kv-cache-utilization-scorer
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: least-busy-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
`))
	if err != nil {
		panic(err)
	}
	rt, err := config.Build(context.Background(), cfg, reg, config.Options{Seed: 1})
	if err != nil {
		panic(err)
	}
	defer rt.Close()

	// With runningWeight 0.5, b's three running requests weigh more than a's
	// one waiting request (0.4 against 0.5); the KV-cache scores tie.
	eps := Eps(Ep("a").Waiting(1).KV(0.5), Ep("b").Running(3).KV(0.5))
	d, err := rt.Director.Schedule(context.Background(), &scheduling.Request{}, eps)
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Endpoints[0] == eps[0].HostPort())
	// Output: true
}

// Run the custom scorer in the policy simulator against stock
// configurations, on the same simulated cluster and workload: four servers,
// BENCHMARKS.md P7's shared-prefix tenants, 30 simulated seconds. Balancing
// load alone barely beats random here; the prefix cache is what matters.
func Example_simulate() {
	registry := func() *plugins.Registry {
		r := std.Registry()
		plugins.Register[*customscorer.LeastBusy](r, "least-busy-scorer", plugins.Category("scorer"))
		return r
	}
	leastBusy, err := config.Load([]byte(`
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: least-busy-scorer
`))
	if err != nil {
		panic(err)
	}
	withPrefix, err := config.Load([]byte(`
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: least-busy-scorer
- type: prefix-cache-scorer
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: least-busy-scorer
    weight: 2
  - pluginRef: prefix-cache-scorer
    weight: 3
`))
	if err != nil {
		panic(err)
	}
	stock, err := sim.DemoConfigs() // random, load, approx-prefix, precise-prefix
	if err != nil {
		panic(err)
	}
	workload := sim.DemoTenants(4, 30*time.Second, 1)
	res, err := sim.Run(context.Background(), []sim.Config{
		stock[0], stock[1],
		{Name: "least-busy", Config: leastBusy},
		{Name: "least-busy+prefix", Config: withPrefix},
	}, sim.Options{
		Servers:  4,
		Seed:     1,
		Registry: registry,
		Workload: func() (sim.Workload, error) { return workload.New(), nil },
	})
	if err != nil {
		panic(err)
	}
	for _, c := range res.Configs {
		fmt.Printf("%-17s p90 TTFT %4.1fs  hit rate %.2f\n", c.Name, c.TTFT.P90, c.HitRate)
	}
	// Output:
	// random            p90 TTFT 21.0s  hit rate 0.26
	// load              p90 TTFT 22.9s  hit rate 0.25
	// least-busy        p90 TTFT 23.5s  hit rate 0.24
	// least-busy+prefix p90 TTFT  0.9s  hit rate 0.61
}
