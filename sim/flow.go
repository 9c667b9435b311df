package sim

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/eppkit/eppkit/flowcontrol"
	"github.com/eppkit/eppkit/requestcontrol"
)

// flowDriver runs flow control in virtual time. With the flowControl
// feature gate on, the Director's admission (a FlowAdmitter) queues each
// request and blocks until the controller dispatches it, as in production.
// The simulator runs each request's Director.Handle on its own goroutine,
// leaves the controller's background dispatcher stopped and dispatches
// itself, one item at a time, after every event that may free capacity
// (arrival, step, scrape). It waits for the goroutine of every item that
// left the queue before it goes on, so exactly one request touches the
// plugins at a time and the run stays deterministic.
type flowDriver struct {
	ctl     *flowcontrol.Controller
	queued  chan *flowcontrol.Item
	pending []pendingFlow // in queue order
	wg      sync.WaitGroup
}

type pendingFlow struct {
	it  *flowcontrol.Item
	res chan handled
	a   arrival
	at  time.Duration // arrival time
}

type handled struct {
	x   *requestcontrol.Exchange
	err error
}

func newFlowDriver(rt *requestcontrol.Director, ctl *flowcontrol.Controller) (*flowDriver, error) {
	fa, ok := rt.Admission.(*requestcontrol.FlowAdmitter)
	if !ok {
		return nil, errors.New("flow control is on but the Director's admission is not a FlowAdmitter")
	}
	f := &flowDriver{ctl: ctl, queued: make(chan *flowcontrol.Item, 1)}
	fa.Queued = func(it *flowcontrol.Item) { f.queued <- it }
	return f, nil
}

// handle starts the Director's second stage for a; it returns the outcome
// when the request did not wait (rejected at once), or queued true when it
// waits in the controller.
func (f *flowDriver) handle(ctx context.Context, d *requestcontrol.Director, a *arrival, now time.Duration) (h handled, queued bool) {
	res := make(chan handled, 1)
	p := a.parsed
	f.wg.Go(func() {
		x, err := d.Handle(ctx, p)
		res <- handled{x, err}
	})
	select {
	case it := <-f.queued:
		f.pending = append(f.pending, pendingFlow{it: it, res: res, a: *a, at: now})
		// The queued request keeps its body (Body.Raw); the feeder gives
		// the slot a new buffer.
		a.body = nil
		return handled{}, true
	case h := <-res:
		return h, false
	}
}

// dispatch dispatches while the controller can, and hands each request
// that left the queue (dispatched, expired) to route, in queue order.
func (f *flowDriver) dispatch(ctx context.Context, route func(h handled, a *arrival, at time.Duration)) {
	for len(f.pending) > 0 {
		n := f.ctl.Dispatch(ctx, 1)
		keep := f.pending[:0]
		for _, p := range f.pending {
			if p.it.Outcome() == flowcontrol.Pending {
				keep = append(keep, p)
				continue
			}
			route(<-p.res, &p.a, p.at)
		}
		clear(f.pending[len(keep):])
		f.pending = keep
		if n == 0 {
			return
		}
	}
}
