package benchmarks

import (
	"testing"
	"time"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/sim"
)

// BenchmarkP8Simulate simulates 16 servers serving the tenants workload
// (ramping from 20% to 120% of capacity over 60 simulated seconds) routed
// by the approximate prefix configuration C1 through the real Director, and
// reports simulated requests per wall-clock second.
func BenchmarkP8Simulate(b *testing.B) {
	y, _ := sim.DemoConfigYAML("approx-prefix")
	cfg, err := config.Load([]byte(y))
	if err != nil {
		b.Fatal(err)
	}
	w := sim.DemoTenants(16, 60*time.Second, 1)
	opts := sim.Options{Servers: 16, Seed: 1, Workload: func() (sim.Workload, error) { return w.New(), nil }}
	cfgs := []sim.Config{{Name: "approx-prefix", Config: cfg}}
	b.ReportAllocs()
	reqs := 0
	start := time.Now()
	for b.Loop() {
		res, err := sim.Run(b.Context(), cfgs, opts)
		if err != nil {
			b.Fatal(err)
		}
		reqs += res.Configs[0].Requests
	}
	b.ReportMetric(float64(reqs)/time.Since(start).Seconds(), "sim-req/s")
}
