package flowcontrol_test

import (
	"context"
	"fmt"

	"github.com/eppkit/eppkit/flowcontrol"
	"github.com/eppkit/eppkit/flowcontrol/flowcontroltest"
)

// Two bands: interactive traffic (priority 10) shared round robin between
// tenants, batch traffic (priority 0) first come, first served. The caller
// drives the dispatcher by hand here; a server calls Start instead and has
// each request wait with EnqueueAndWait.
func Example() {
	var sat flowcontroltest.Saturation
	c, _ := flowcontrol.New(flowcontrol.Config{
		Saturation: &sat,
		Bands: []flowcontrol.BandConfig{
			{Priority: 10, Fairness: &flowcontrol.RoundRobin{}},
			{Priority: 0, MaxRequests: 2},
		},
	})
	defer c.Close()

	var items []*flowcontrol.Item
	add := func(tenant string, prio int) {
		it := &flowcontrol.Item{Flow: flowcontrol.FlowKey{ID: tenant, Priority: prio}}
		if err := c.Enqueue(it); err != nil {
			fmt.Println(tenant, "refused:", err)
		}
		items = append(items, it)
	}
	add("batch", 0)
	add("batch", 0)
	add("batch", 0) // the band holds 2
	add("alice", 10)
	add("alice", 10)
	add("bob", 10)

	sat.Set(1.0) // saturated: nothing leaves
	fmt.Println("dispatched while saturated:", c.Dispatch(context.Background(), 0))
	sat.Set(0.5)
	fmt.Println("dispatched:", c.Dispatch(context.Background(), 4))
	for _, it := range items {
		fmt.Println(it.Flow, it.Outcome())
	}
	// Output:
	// batch refused: flowcontrol: queue at capacity
	// dispatched while saturated: 0
	// dispatched: 4
	// batch@0 dispatched
	// batch@0 pending
	// batch@0 rejected
	// alice@10 dispatched
	// alice@10 dispatched
	// bob@10 dispatched
}

// A fairness policy is one function over a band: here, serve the flow with
// the most queued bytes.
func ExampleFairnessFunc() {
	heaviest := flowcontrol.FairnessFunc(func(b *flowcontrol.Band) *flowcontrol.Flow {
		var best *flowcontrol.Flow
		for f := range b.Flows() {
			if best == nil || f.Bytes() > best.Bytes() {
				best = f
			}
		}
		return best
	})
	c, _ := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Fairness: heaviest}}})
	defer c.Close()
	for _, x := range []struct {
		tenant string
		size   int64
	}{{"small", 10}, {"large", 5000}, {"small", 20}} {
		_ = c.Enqueue(&flowcontrol.Item{Flow: flowcontrol.FlowKey{ID: x.tenant}, Size: x.size})
	}
	for c.Dispatch(context.Background(), 1) == 1 {
		s := c.Stats()
		fmt.Println("left:", s.Queued, "items,", s.Bytes, "bytes")
	}
	// Output:
	// left: 2 items, 30 bytes
	// left: 1 items, 20 bytes
	// left: 0 items, 0 bytes
}
