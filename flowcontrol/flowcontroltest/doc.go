// Package flowcontroltest drives a flowcontrol.Controller by hand for tests:
// a manual clock, a settable saturation, dispatch order as labels, and
// conformance checks for custom policies. A policy test is a few lines:
//
//	h := flowcontroltest.New(t, flowcontrol.Config{
//		Bands: []flowcontrol.BandConfig{{Fairness: &flowcontrol.RoundRobin{}}},
//	})
//	h.Add("a", 0, "a1")
//	h.Add("a", 0, "a2")
//	h.Add("b", 0, "b1")
//	got := h.DispatchAll() // [a1 b1 a2]
package flowcontroltest
