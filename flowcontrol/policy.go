package flowcontrol

import (
	"context"

	"github.com/eppkit/eppkit/datalayer"
)

// The policies are called by the controller with its lock held: never
// concurrently for one controller (one policy instance may serve several
// bands and several controllers, so a policy keeps no per-band state of its
// own; the Band carries what the stock policies need). They must be fast,
// must not block, must not panic, must not call back into the controller
// and must not keep the items, flows or bands they are given beyond the
// call.

// FairnessPolicy chooses which flow of a band is served next.
//
// Pick is called once per dispatched item, for a band that has queued
// items. It returns one of the band's flows holding items (Band.Best,
// Band.Next, or one found with Band.Flows), or nil to dispatch nothing from
// this band now (the dispatcher goes on to the next band). A flow that is
// not the band's, or empty, counts as nil.
type FairnessPolicy interface {
	Pick(b *Band) *Flow
}

// FairnessFunc adapts a function to FairnessPolicy.
type FairnessFunc func(b *Band) *Flow

// Pick calls f.
func (f FairnessFunc) Pick(b *Band) *Flow { return f(b) }

// OrderingPolicy orders the items of a band: within each flow, the item
// dispatched next is the least by Less; global-strict fairness compares the
// flows' heads with it too. Less must be a strict weak order that does not
// change while items wait (it may read the items' fields, EnqueueTime,
// ReceivedTime, Due and Headers); the controller breaks ties by enqueue
// order.
type OrderingPolicy interface {
	// Less reports whether a should be dispatched before b.
	Less(a, b *Item) bool
}

// OrderingFunc adapts a function to OrderingPolicy.
type OrderingFunc func(a, b *Item) bool

// Less calls f.
func (f OrderingFunc) Less(a, b *Item) bool { return f(a, b) }

// Keyer is an optional interface of an OrderingPolicy whose order is by a
// number: Key is called once per item, at enqueue, and the controller then
// orders items by (Key, enqueue order) without calling Less. Key(a) <
// Key(b) must imply Less(a, b). The stock ordering policies implement it.
type Keyer interface {
	Key(it *Item) int64
}

// UsageLimitPolicy sets each band's saturation ceiling: the dispatcher
// serves a band only while the pool's saturation is below the band's
// ceiling, and stops at the first band (highest priority first) whose
// ceiling the saturation reaches, so lower bands never overtake it.
//
// Ceilings is called before every dispatched item with the current
// saturation, the priorities of all bands from highest to lowest, and
// ceilings, a buffer of the same length to fill (owned by the controller).
type UsageLimitPolicy interface {
	Ceilings(saturation float64, priorities []int, ceilings []float64)
}

// UsageLimitFunc adapts a function to UsageLimitPolicy.
type UsageLimitFunc func(saturation float64, priorities []int, ceilings []float64)

// Ceilings calls f.
func (f UsageLimitFunc) Ceilings(saturation float64, priorities []int, ceilings []float64) {
	f(saturation, priorities, ceilings)
}

// SaturationDetector reports how loaded the pool's endpoints are: 0 idle, 1
// saturated, above 1 overloaded. It has the method of the request-control
// detectors (requestcontrol.SaturationDetector), so one plugin serves both.
// The dispatcher calls it before every dispatched item, without the
// controller's lock; it must be cheap and must not block.
type SaturationDetector interface {
	Saturation(ctx context.Context, endpoints []*datalayer.Endpoint) float64
}

// SaturationFunc adapts a function to SaturationDetector.
type SaturationFunc func(ctx context.Context, endpoints []*datalayer.Endpoint) float64

// Saturation calls f.
func (f SaturationFunc) Saturation(ctx context.Context, eps []*datalayer.Endpoint) float64 {
	return f(ctx, eps)
}
