package config_test

import (
	"context"
	"fmt"
	"time"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/scheduling"
)

func Example() {
	cfg, err := config.Load([]byte(`
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	rt, err := config.Build(context.Background(), cfg, std.Registry(), config.Options{Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()

	for _, p := range rt.Director.Scheduler.Profiles() {
		fmt.Printf("profile %s:", p.Name)
		for _, s := range p.Scorers {
			fmt.Printf(" %s×%g", s.Name, s.Weight)
		}
		fmt.Printf(" picker %s\n", p.PickerName)
	}

	m := datalayer.Metrics{UpdateTime: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	m.Waiting = 4
	a := datalayer.New("a", "10.0.0.1", 8000, nil).WithMetrics(m)
	m.Waiting = 0
	b := datalayer.New("b", "10.0.0.2", 8000, nil).WithMetrics(m)
	d, err := rt.Director.Schedule(context.Background(), &scheduling.Request{}, []*datalayer.Endpoint{a, b})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("x-gateway-destination-endpoint:", d.Header())
	// Output:
	// profile default: queue-scorer×2 kv-cache-utilization-scorer×1 picker max-score-picker
	// x-gateway-destination-endpoint: 10.0.0.2:8000
}

func ExampleError() {
	_, err := config.Load([]byte(`
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
    weight: 0
  - pluginRef: nope
`))
	for _, e := range config.Errors(err) {
		fmt.Printf("line %d: %s: %v\n", e.Line, e.Path, e.Err)
	}
	// Output:
	// line 9: schedulingProfiles[0].plugins[0].weight: must be > 0 (got 0)
	// line 11: schedulingProfiles[0].plugins[1].pluginRef: undefined plugin "nope"
}
