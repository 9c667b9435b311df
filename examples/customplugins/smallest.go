package customplugins

import "github.com/eppkit/eppkit/flowcontrol"

// SmallestFirst is a flow-control ordering policy: within a flow the
// smallest waiting request (in body bytes) is dispatched first, a cheap
// stand-in for shortest-job-first; equal sizes go first come, first served
// (the controller breaks ties by enqueue order). It has no parameters.
type SmallestFirst struct{}

var (
	_ flowcontrol.OrderingPolicy = (*SmallestFirst)(nil)
	_ flowcontrol.Keyer          = (*SmallestFirst)(nil)
)

// Less reports whether a is dispatched before b. It is called with the
// controller's lock held: it must be fast and must not keep the items.
func (*SmallestFirst) Less(a, b *flowcontrol.Item) bool { return a.Size < b.Size }

// Key returns the size, so the controller evaluates the order once per
// item (flowcontrol.Keyer) instead of once per comparison.
func (*SmallestFirst) Key(it *flowcontrol.Item) int64 { return it.Size }
