package flowcontroltest

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/flowcontrol"
)

// Epoch is the time a Harness's clock starts at.
var Epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Saturation is a settable SaturationDetector; it is safe for concurrent
// use. The zero value reports 0.
type Saturation struct{ bits atomic.Uint64 }

var _ flowcontrol.SaturationDetector = (*Saturation)(nil)

// Set sets the value Saturation reports.
func (s *Saturation) Set(v float64) { s.bits.Store(math.Float64bits(v)) }

// Saturation returns the value last set.
func (s *Saturation) Saturation(context.Context, []*datalayer.Endpoint) float64 {
	return math.Float64frombits(s.bits.Load())
}

// Clock is a manual clock, safe for concurrent use. The zero value stands
// at Epoch.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now.IsZero() {
		c.now = Epoch
	}
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	if c.now.IsZero() {
		c.now = Epoch
	}
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Harness is a Controller with a manual clock and a settable saturation,
// driven by its Dispatch methods (no background dispatcher, no sleeps). It
// remembers the items added through it, in order.
type Harness struct {
	*flowcontrol.Controller
	Clock *Clock      // the controller's clock, at Epoch to start with
	Sat   *Saturation // the controller's saturation, 0 to start with
	Items []*flowcontrol.Item

	t testing.TB
}

// New returns a Harness over a controller built from cfg; cfg's Clock and
// Saturation are replaced by the harness's. The controller is closed when
// the test ends.
func New(t testing.TB, cfg flowcontrol.Config) *Harness {
	t.Helper()
	h := &Harness{Clock: &Clock{}, Sat: &Saturation{}, t: t}
	cfg.Clock, cfg.Saturation = h.Clock, h.Sat
	c, err := flowcontrol.New(cfg)
	if err != nil {
		t.Fatalf("flowcontrol.New: %v", err)
	}
	h.Controller = c
	t.Cleanup(func() { _ = c.Close() })
	return h
}

// Add enqueues an item of flow id at priority prio, labelled label (its
// Request), after applying opts, and returns it. A refusal does not fail the
// test: the item's Outcome and Err tell it.
func (h *Harness) Add(id string, prio int, label string, opts ...func(*flowcontrol.Item)) *flowcontrol.Item {
	h.t.Helper()
	it := &flowcontrol.Item{Flow: flowcontrol.FlowKey{ID: id, Priority: prio}, Request: label}
	for _, o := range opts {
		o(it)
	}
	if err := h.Enqueue(it); err != nil && it.Outcome() == flowcontrol.Pending {
		h.t.Fatalf("enqueue %s: %v", label, err)
	}
	h.Items = append(h.Items, it)
	return it
}

// Size sets an item's Size.
func Size(n int64) func(*flowcontrol.Item) { return func(it *flowcontrol.Item) { it.Size = n } }

// Header sets one of an item's Headers.
func Header(name, value string) func(*flowcontrol.Item) {
	return func(it *flowcontrol.Item) {
		if it.Headers == nil {
			it.Headers = map[string]string{}
		}
		it.Headers[name] = value
	}
}

// Deadline sets an item's Deadline to the harness clock's time plus d.
func (h *Harness) Deadline(d time.Duration) func(*flowcontrol.Item) {
	return func(it *flowcontrol.Item) { it.Deadline = h.Clock.Now().Add(d) }
}

// Dispatch dispatches at most max items (max ≤ 0: as many as the
// saturation allows) one at a time and returns their labels in dispatch
// order.
func (h *Harness) Dispatch(max int) []string {
	h.t.Helper()
	var got []string
	for max <= 0 || len(got) < max {
		pending := h.pending()
		if h.Controller.Dispatch(context.Background(), 1) == 0 {
			break
		}
		for _, it := range pending {
			if it.Outcome() == flowcontrol.Dispatched {
				got = append(got, Label(it))
			}
		}
	}
	return got
}

// DispatchAll dispatches everything the saturation allows and returns the
// labels in dispatch order.
func (h *Harness) DispatchAll() []string { return h.Dispatch(0) }

// Cancel ends an item's wait as its caller going away would.
func (h *Harness) Cancel(it *flowcontrol.Item) error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return h.Wait(ctx, it)
}

// Pending returns the labels of the items still waiting, in the order they
// were added.
func (h *Harness) Pending() []string {
	var out []string
	for _, it := range h.pending() {
		out = append(out, Label(it))
	}
	return out
}

func (h *Harness) pending() []*flowcontrol.Item {
	var out []*flowcontrol.Item
	for _, it := range h.Items {
		if it.Outcome() == flowcontrol.Pending {
			out = append(out, it)
		}
	}
	return out
}

// Label returns the label of an item added by a Harness.
func Label(it *flowcontrol.Item) string {
	s, _ := it.Request.(string)
	return s
}
