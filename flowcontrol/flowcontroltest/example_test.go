package flowcontroltest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/eppkit/eppkit/flowcontrol"
	"github.com/eppkit/eppkit/flowcontrol/flowcontroltest"
)

// A harness drives a controller with a manual clock and saturation: a
// policy test in a few lines.
func ExampleHarness() {
	t := &testing.T{} // in a test, the test's t
	h := flowcontroltest.New(t, flowcontrol.Config{
		RequestTTL: 30 * time.Second,
		Bands:      []flowcontrol.BandConfig{{Fairness: &flowcontrol.RoundRobin{}}},
	})
	h.Add("a", 0, "a1")
	h.Add("a", 0, "a2")
	h.Add("b", 0, "b1")
	h.Add("c", 0, "c1")
	fmt.Println(h.Dispatch(2))

	h.Sat.Set(1) // saturated: the rest waits, then expires
	h.Clock.Advance(30 * time.Second)
	fmt.Println(h.DispatchAll(), h.Pending())
	fmt.Println(h.Items[3].Err())
	// Output:
	// [a1 b1]
	// [] []
	// flowcontrol: request expired in the queue
}

func TestConformanceOfStockPolicies(t *testing.T) {
	flowcontroltest.TestOrdering(t, &flowcontrol.EDF{})
	flowcontroltest.TestFairness(t, &flowcontrol.RoundRobin{})
	flowcontroltest.TestUsageLimit(t, &flowcontrol.StaticUsageLimit{Threshold: 1})
}
