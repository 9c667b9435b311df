package sim_test

import (
	"context"
	"fmt"
	"time"

	"github.com/eppkit/eppkit/sim"
)

// Compare random routing with approximate prefix-cache routing on a
// shared-prefix workload: the prefix-aware configuration finds far more of
// the prompts in the servers' caches.
func Example() {
	cfgs, err := sim.DemoConfigs()
	if err != nil {
		panic(err)
	}
	w := sim.DemoTenants(4, 30*time.Second, 1)
	res, err := sim.Run(context.Background(), []sim.Config{cfgs[0], cfgs[2]}, sim.Options{
		Servers:  4,
		Seed:     1,
		Workload: func() (sim.Workload, error) { return w.New(), nil },
	})
	if err != nil {
		panic(err)
	}
	for _, c := range res.Configs {
		fmt.Printf("%s: %d requests, hit rate %.2f\n", c.Name, c.Requests, c.HitRate)
	}
	// Output:
	// random: 552 requests, hit rate 0.26
	// approx-prefix: 552 requests, hit rate 0.61
}
