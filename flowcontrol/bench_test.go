package flowcontrol_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/eppkit/eppkit/flowcontrol"
)

// BenchmarkEnqueueDispatch measures the queue itself: one enqueue and one
// dispatch per operation, on a steady backlog of two items per flow, the
// flows spread over 3 bands, items reused (no allocation). Per-operation
// cost grows with log(flows), not with flows.
func BenchmarkEnqueueDispatch(b *testing.B) {
	policies := []struct {
		name     string
		fairness func() flowcontrol.FairnessPolicy
		ordering func() flowcontrol.OrderingPolicy
	}{
		{"fcfs+global-strict", func() flowcontrol.FairnessPolicy { return &flowcontrol.GlobalStrict{} }, func() flowcontrol.OrderingPolicy { return &flowcontrol.FCFS{} }},
		{"fcfs+round-robin", func() flowcontrol.FairnessPolicy { return &flowcontrol.RoundRobin{} }, func() flowcontrol.OrderingPolicy { return &flowcontrol.FCFS{} }},
		{"edf+global-strict", func() flowcontrol.FairnessPolicy { return &flowcontrol.GlobalStrict{} }, func() flowcontrol.OrderingPolicy { return &flowcontrol.EDF{} }},
	}
	for _, p := range policies {
		for _, flows := range []int{1, 100, 10_000} {
			b.Run(fmt.Sprintf("%s/flows=%d", p.name, flows), func(b *testing.B) {
				cfg := flowcontrol.Config{}
				for prio := range 3 {
					cfg.Bands = append(cfg.Bands, flowcontrol.BandConfig{
						Priority: prio, MaxRequests: flowcontrol.Unlimited, Fairness: p.fairness(), Ordering: p.ordering(),
					})
				}
				c, err := flowcontrol.New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				keys := make([]flowcontrol.FlowKey, flows)
				for i := range keys {
					keys[i] = flowcontrol.FlowKey{ID: fmt.Sprint("flow-", i), Priority: i % 3}
				}
				backlog := max(2*flows, 64)
				pool := make([]flowcontrol.Item, 2*backlog)
				next, op := 0, 0
				enqueue := func() {
					for pool[next].Outcome() == flowcontrol.Pending && pool[next].Seq() != 0 {
						next = (next + 1) % len(pool)
					}
					it := &pool[next]
					next = (next + 1) % len(pool)
					it.Flow = keys[op%flows]
					op++
					if err := c.Enqueue(it); err != nil {
						b.Fatal(err)
					}
				}
				for range backlog {
					enqueue()
				}
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					enqueue()
					if c.Dispatch(ctx, 1) != 1 {
						b.Fatal("nothing dispatched")
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
			})
		}
	}
}

// BenchmarkEnqueueAndWait measures the whole blocking path with the
// background dispatcher: callers enqueue and wait in parallel, nothing is
// saturated.
func BenchmarkEnqueueAndWait(b *testing.B) {
	c, err := flowcontrol.New(flowcontrol.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.Start()
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		it := &flowcontrol.Item{Flow: flowcontrol.FlowKey{ID: "tenant"}}
		for pb.Next() {
			if err := c.EnqueueAndWait(ctx, it); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
}
