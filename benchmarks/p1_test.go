package benchmarks

import (
	"context"
	"fmt"
	"testing"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// cycle is one timed scheduling cycle of P1 over a warm runtime.
type cycle struct {
	rt  *config.Runtime
	eps []*datalayer.Endpoint
	req scheduling.Request
}

func newCycle(b *testing.B, n int) *cycle {
	c := &cycle{rt: buildRuntime(b, configC1), eps: endpoints(n)}
	// Warm-up: 10,000 W1 requests through the full cycle, index update included.
	w := w1()
	for k := range 10_000 {
		c.run(b, w.bodies[k%len(w.bodies)])
	}
	return c
}

// run schedules one parsed request: producers (prefix hashing and index
// lookup), scorers, picker, and the post-pick index update, which the
// Director runs synchronously before it returns.
func (c *cycle) run(b *testing.B, body *parsers.Body) string {
	c.req.Data.Reset()
	c.req.Body = body
	c.req.IncomingModel, c.req.TargetModel = body.Model, body.Model
	d, err := c.rt.Director.Schedule(context.Background(), &c.req, c.eps)
	if err != nil {
		b.Fatal(err)
	}
	return d.Endpoints[0]
}

// runRaw parses the raw body (path-selected parser) and schedules it.
func (c *cycle) runRaw(b *testing.B, raw []byte) string {
	body, err := c.rt.Selector.Parse("/v1/chat/completions", raw)
	if err != nil {
		b.Fatal(err)
	}
	return c.run(b, body)
}

// check reports the last request's prefix match and fails unless endpoint 0
// (queue 0, KV 0) won, the scenario's sanity check.
func (c *cycle) check(b *testing.B, picked string) {
	if want := c.eps[0].HostPort(); picked != want {
		b.Fatalf("picked %s, want %s (endpoint 0 wins every request)", picked, want)
	}
	m, ok := plugins.Get(&c.req.Data, scheduling.PrefixMatchKey(scheduling.DefaultPrefixProducer))
	if !ok {
		b.Fatal("no prefix match")
	}
	b.ReportMetric(m.MatchedFor(c.eps[0], 0), "matched-blocks")
	b.ReportMetric(float64(m.TotalBlocks), "total-blocks")
}

func BenchmarkP1Cycle(b *testing.B) {
	for _, n := range []int{8, 64, 256} {
		benchCycle(b, n, "W1", w1)
	}
	benchCycle(b, 64, "W2", w2)
	benchCycle(b, 64, "W3", w3)
}

func benchCycle(b *testing.B, n int, name string, wl func() *workload) {
	b.Run(fmt.Sprintf("N=%d/%s", n, name), func(b *testing.B) {
		c := newCycle(b, n)
		w := wl()
		var picked string
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			picked = c.run(b, w.bodies[i%len(w.bodies)])
		}
		b.StopTimer()
		c.check(b, picked)
	})
}

func BenchmarkP1CycleParse(b *testing.B) {
	b.Run("N=64/W1", func(b *testing.B) {
		c := newCycle(b, 64)
		w := w1()
		var picked string
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			picked = c.runRaw(b, w.raw[i%len(w.raw)])
		}
		b.StopTimer()
		c.check(b, picked)
	})
}
