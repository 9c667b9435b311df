package sim

import (
	"embed"
	"strings"
	"time"

	"github.com/eppkit/eppkit/config"
)

//go:embed configs/*.yaml
var demoFS embed.FS

// DemoConfigNames are the built-in configurations, in the demo's order.
var DemoConfigNames = []string{"random", "load", "approx-prefix", "precise-prefix"}

// DemoConfigs returns the built-in configurations: random (the baseline a
// plain load balancer gives), load-only (queue + KV-cache scorers), the
// approximate prefix-cache configuration C1, and precise prefix-cache
// routing (the same scorers over the precise producer, fed by the simulated
// servers' KV events, with speculative indexing).
func DemoConfigs() ([]Config, error) {
	var out []Config
	for _, n := range DemoConfigNames {
		data, err := demoFS.ReadFile("configs/" + n + ".yaml")
		if err != nil {
			return nil, err
		}
		c, err := config.Load(data)
		if err != nil {
			return nil, err
		}
		out = append(out, Config{Name: n, Config: c})
	}
	return out, nil
}

// DemoConfigYAML returns the YAML of a built-in configuration.
func DemoConfigYAML(name string) (string, bool) {
	data, err := demoFS.ReadFile("configs/" + strings.TrimSuffix(name, ".yaml") + ".yaml")
	return string(data), err == nil
}

// DemoTenants returns the demo's workload: BENCHMARKS.md P7's tenants
// (150 tenants × 6,000-token shared context + 1,200-token question, 300
// output tokens) on servers servers, with Poisson arrivals ramping from 20%
// to 120% of the cluster's estimated capacity over d.
func DemoTenants(servers int, d time.Duration, seed uint64) Tenants {
	w := Tenants{Seed: seed}
	capacity := w.Capacity(servers, DefaultServerParams())
	w.Arrivals = Ramp{From: 0.2 * capacity, To: 1.2 * capacity, Duration: d}
	return w
}
