package flowcontrol_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/flowcontrol"
	"github.com/eppkit/eppkit/flowcontrol/flowcontroltest"
)

func TestCapacityLimits(t *testing.T) {
	h := flowcontroltest.New(t, flowcontrol.Config{
		MaxBytes: 1000,
		Bands: []flowcontrol.BandConfig{
			{Priority: 1, MaxRequests: 2},
			{Priority: 0, MaxBytes: 500},
		},
	})
	a := h.Add("a", 1, "a")
	h.Add("b", 1, "b")
	full := h.Add("c", 1, "band 1 full")
	if !errors.Is(full.Err(), flowcontrol.ErrAtCapacity) || full.Outcome() != flowcontrol.Rejected {
		t.Errorf("third item in a band of 2: %v, %v", full.Outcome(), full.Err())
	}
	h.Add("a", 0, "400", flowcontroltest.Size(400))
	if it := h.Add("b", 0, "200", flowcontroltest.Size(200)); it.Outcome() != flowcontrol.Rejected {
		t.Errorf("600 bytes in a band of 500: %v", it.Outcome())
	}
	if it := h.Add("b", 0, "100", flowcontroltest.Size(100)); it.Outcome() != flowcontrol.Pending {
		t.Errorf("500 bytes in a band of 500: %v", it.Outcome())
	}
	if it := h.Add("c", 5, "600", flowcontroltest.Size(600)); it.Outcome() != flowcontrol.Rejected {
		t.Errorf("1100 bytes under a global limit of 1000: %v", it.Outcome())
	}
	wantOrder(t, h.Dispatch(1), "a")
	if a.Outcome() != flowcontrol.Dispatched || a.Err() != nil {
		t.Errorf("dispatched item: %v %v", a.Outcome(), a.Err())
	}
	if it := h.Add("c", 1, "room again"); it.Outcome() != flowcontrol.Pending {
		t.Errorf("after a dispatch the band has room: %v", it.Outcome())
	}
	s := h.Stats()
	if b1, _ := s.Band(1); b1.Rejected != 1 || b1.Dispatched != 1 || b1.Queued != 2 {
		t.Errorf("band 1 stats: %+v", b1)
	}
	if b0, _ := s.Band(0); b0.Rejected != 1 || b0.Bytes != 500 || b0.Queued != 2 {
		t.Errorf("band 0 stats: %+v", b0)
	}
	if s.Queued != 4 || s.Bytes != 500 {
		t.Errorf("totals: %+v", s)
	}
}

// A flood far beyond capacity is refused at enqueue: memory stays bounded.
func TestFloodIsBounded(t *testing.T) {
	h := flowcontroltest.New(t, flowcontrol.Config{MaxRequests: 100})
	rejected := 0
	for i := range 10_000 {
		it := &flowcontrol.Item{Flow: flowcontrol.FlowKey{ID: fmt.Sprint("tenant-", i), Priority: i % 3}}
		if err := h.Enqueue(it); errors.Is(err, flowcontrol.ErrAtCapacity) {
			rejected++
		}
	}
	if s := h.Stats(); s.Queued != 100 || rejected != 9900 || s.Flows != 100 {
		t.Errorf("queued %d, flows %d, rejected %d", s.Queued, s.Flows, rejected)
	}
}

func TestTTL(t *testing.T) {
	h := flowcontroltest.New(t, flowcontrol.Config{RequestTTL: 10 * time.Second})
	h.Sat.Set(1) // nothing dispatches
	old := h.Add("a", 0, "old")
	h.Clock.Advance(4 * time.Second)
	young := h.Add("b", 0, "young")
	h.Clock.Advance(6*time.Second - time.Nanosecond)
	h.DispatchAll()
	if old.Outcome() != flowcontrol.Pending {
		t.Fatalf("expired before its TTL: %v", old.Outcome())
	}
	h.Clock.Advance(time.Nanosecond)
	h.DispatchAll()
	if old.Outcome() != flowcontrol.Expired || !errors.Is(old.Err(), flowcontrol.ErrExpired) || errors.Is(old.Err(), flowcontrol.ErrNoEndpoints) {
		t.Errorf("old: %v, %v", old.Outcome(), old.Err())
	}
	if young.Outcome() != flowcontrol.Pending {
		t.Errorf("young: %v", young.Outcome())
	}
	if d, ok := young.Due(); !ok || !d.Equal(flowcontroltest.Epoch.Add(14*time.Second)) {
		t.Errorf("young due %v %v", d, ok)
	}
	if s, _ := h.Stats().Band(0); s.Expired != 1 || s.Queued != 1 {
		t.Errorf("stats: %+v", s)
	}
	if old.Wait() != 10*time.Second {
		t.Errorf("old waited %v", old.Wait())
	}
}

func TestTTLDisabled(t *testing.T) {
	h := flowcontroltest.New(t, flowcontrol.Config{RequestTTL: flowcontrol.NoTTL})
	h.Sat.Set(2)
	it := h.Add("a", 0, "patient")
	h.Clock.Advance(24 * time.Hour)
	h.DispatchAll()
	if it.Outcome() != flowcontrol.Pending {
		t.Errorf("expired with TTL disabled: %v", it.Outcome())
	}
	if _, ok := it.Due(); ok {
		t.Error("an item without TTL or deadline has a due time")
	}
}

// While the pool has no endpoints the no-endpoint TTL applies, charged from
// the moment the pool emptied; an item that expires then says so.
func TestNoEndpointTTL(t *testing.T) {
	var eps atomic.Pointer[[]*datalayer.Endpoint]
	one := []*datalayer.Endpoint{datalayer.New("a", "10.0.0.1", 8000, nil)}
	eps.Store(&one)
	h := flowcontroltest.New(t, flowcontrol.Config{
		RequestTTL: 10 * time.Second, NoEndpointTTL: time.Minute,
		Endpoints: func() []*datalayer.Endpoint { return *eps.Load() },
	})
	h.Sat.Set(1)
	it := h.Add("a", 0, "waiting")
	h.Clock.Advance(8 * time.Second)
	none := []*datalayer.Endpoint{}
	eps.Store(&none)
	h.DispatchAll() // the pool empties at +8s: a minute from now
	h.Clock.Advance(59 * time.Second)
	h.DispatchAll()
	if it.Outcome() != flowcontrol.Pending {
		t.Fatalf("expired before the no-endpoint TTL: %v", it.Outcome())
	}
	h.Clock.Advance(time.Second)
	h.DispatchAll()
	if !errors.Is(it.Err(), flowcontrol.ErrExpired) || !errors.Is(it.Err(), flowcontrol.ErrNoEndpoints) {
		t.Errorf("got %v, want expired with no endpoints", it.Err())
	}

	// Endpoints come back: the regular TTL counts from then.
	it2 := h.Add("b", 0, "second")
	h.Clock.Advance(30 * time.Second)
	eps.Store(&one)
	h.DispatchAll()
	h.Clock.Advance(10*time.Second - time.Nanosecond)
	h.DispatchAll()
	if it2.Outcome() != flowcontrol.Pending {
		t.Fatalf("expired before the TTL counted from the regime change: %v", it2.Err())
	}
	h.Clock.Advance(time.Nanosecond)
	h.DispatchAll()
	if !errors.Is(it2.Err(), flowcontrol.ErrExpired) || errors.Is(it2.Err(), flowcontrol.ErrNoEndpoints) {
		t.Errorf("got %v", it2.Err())
	}
}

// Cancellation removes the item at once; it is never dispatched later.
func TestCancellation(t *testing.T) {
	h := flowcontroltest.New(t, flowcontrol.Config{})
	h.Sat.Set(1)
	a := h.Add("a", 0, "a")
	h.Add("a", 0, "b")
	err := h.Cancel(a)
	if !errors.Is(err, flowcontrol.ErrCancelled) || !errors.Is(err, context.Canceled) || a.Outcome() != flowcontrol.Cancelled {
		t.Errorf("cancel: %v, %v", err, a.Outcome())
	}
	if s := h.Stats(); s.Queued != 1 {
		t.Errorf("queued after cancel: %d", s.Queued)
	}
	h.Sat.Set(0)
	wantOrder(t, h.DispatchAll(), "b")
	if err := h.Cancel(a); !errors.Is(err, flowcontrol.ErrCancelled) {
		t.Errorf("cancelling a done item again: %v", err)
	}
	if s, _ := h.Stats().Band(0); s.Cancelled != 1 || s.Dispatched != 1 {
		t.Errorf("stats %+v", s)
	}
}

// The caller's deadline ends the wait as an expiry.
func TestContextDeadline(t *testing.T) {
	h := flowcontroltest.New(t, flowcontrol.Config{})
	h.Sat.Set(1)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	it := &flowcontrol.Item{Flow: flowcontrol.FlowKey{ID: "a"}}
	err := h.EnqueueAndWait(ctx, it)
	if !errors.Is(err, flowcontrol.ErrExpired) || !errors.Is(err, context.DeadlineExceeded) || it.Outcome() != flowcontrol.Expired {
		t.Errorf("got %v (%v)", err, it.Outcome())
	}
	if it.Deadline.IsZero() {
		t.Error("the context's deadline was not taken as the item's")
	}
	if s := h.Stats(); s.Queued != 0 {
		t.Errorf("still queued: %d", s.Queued)
	}
}

func TestShutdownDrains(t *testing.T) {
	h := flowcontroltest.New(t, flowcontrol.Config{})
	h.Sat.Set(1)
	var waiters sync.WaitGroup
	errs := make([]error, 3)
	items := make([]*flowcontrol.Item, 3)
	for i := range items {
		items[i] = h.Add(fmt.Sprint("f", i), i, fmt.Sprint(i))
		waiters.Add(1)
		go func() {
			defer waiters.Done()
			errs[i] = h.Wait(context.Background(), items[i])
		}()
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	waiters.Wait()
	for i, err := range errs {
		if !errors.Is(err, flowcontrol.ErrShuttingDown) || items[i].Outcome() != flowcontrol.Drained {
			t.Errorf("item %d: %v, %v", i, err, items[i].Outcome())
		}
	}
	late := &flowcontrol.Item{Flow: flowcontrol.FlowKey{ID: "late"}}
	if err := h.EnqueueAndWait(context.Background(), late); !errors.Is(err, flowcontrol.ErrShuttingDown) {
		t.Errorf("enqueue after close: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	h.Start() // after Close: does nothing
}

// Empty flows are collected after the idle timeout; a band provisioned on
// demand goes with its last flow, an explicit band stays.
func TestFlowAndBandCollection(t *testing.T) {
	h := flowcontroltest.New(t, flowcontrol.Config{FlowIdleTimeout: time.Minute, Bands: []flowcontrol.BandConfig{{Priority: 0}}})
	h.Add("a", 0, "a")
	h.Add("b", 7, "b")
	h.DispatchAll()
	if s := h.Stats(); s.Flows != 2 || len(s.Bands) != 2 {
		t.Fatalf("after dispatch: %+v", s)
	}
	h.Clock.Advance(30 * time.Second)
	h.Add("a", 0, "a again") // flow a is reused and no longer idle
	h.DispatchAll()
	h.Clock.Advance(30 * time.Second)
	h.DispatchAll()
	if s := h.Stats(); s.Flows != 1 || len(s.Bands) != 1 || s.Bands[0].Priority != 0 {
		t.Errorf("b and its band should be collected: %+v", s)
	}
	h.Clock.Advance(time.Minute)
	h.DispatchAll()
	if s := h.Stats(); s.Flows != 0 || len(s.Bands) != 1 {
		t.Errorf("a should be collected, band 0 kept: %+v", s)
	}
}

// Many one-off fairness ids do not pile up as idle flows.
func TestIdleFlowsBounded(t *testing.T) {
	h := flowcontroltest.New(t, flowcontrol.Config{})
	for i := range 40_000 {
		it := &flowcontrol.Item{Flow: flowcontrol.FlowKey{ID: fmt.Sprint("one-off-", i)}}
		if err := h.Enqueue(it); err != nil {
			t.Fatal(err)
		}
		h.Controller.Dispatch(context.Background(), 1)
	}
	if s := h.Stats(); s.Flows > 1<<14 {
		t.Errorf("%d idle flows kept", s.Flows)
	}
}

func TestConfigErrors(t *testing.T) {
	_, err := flowcontrol.New(flowcontrol.Config{
		MaxRequests:  -1,
		Bands:        []flowcontrol.BandConfig{{Priority: 1}, {Priority: 1, MaxBytes: -5}},
		NegativeBand: &flowcontrol.BandConfig{MaxRequests: -2},
	})
	for _, want := range []string{
		"MaxRequests: must not be negative (got -1)",
		"Bands[1].Priority: duplicate priority 1 (also Bands[0])",
		"Bands[1].MaxBytes: must not be negative (got -5)",
		"NegativeBand.MaxRequests: must not be negative (got -2)",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	h := flowcontroltest.New(t, flowcontrol.Config{})
	if err := h.Enqueue(&flowcontrol.Item{Size: -1}); err == nil {
		t.Error("negative size accepted")
	}
	it := &flowcontrol.Item{}
	h.Sat.Set(1)
	_ = h.Enqueue(it)
	if err := h.Enqueue(it); err == nil || !strings.Contains(err.Error(), "already queued") {
		t.Errorf("enqueueing a queued item: %v", err)
	}
}

// Negative priorities use the negative template, others the default one.
func TestBandTemplates(t *testing.T) {
	h := flowcontroltest.New(t, flowcontrol.Config{
		DefaultBand:  &flowcontrol.BandConfig{MaxRequests: 2},
		NegativeBand: &flowcontrol.BandConfig{MaxRequests: 1, Fairness: &flowcontrol.RoundRobin{}},
	})
	h.Sat.Set(1)
	for _, p := range []int{3, 3, 3, -2, -2} {
		h.Add("a", p, fmt.Sprint(p))
	}
	s := h.Stats()
	if b, _ := s.Band(3); b.Queued != 2 || b.Rejected != 1 {
		t.Errorf("band 3: %+v", b)
	}
	if b, _ := s.Band(-2); b.Queued != 1 || b.Rejected != 1 {
		t.Errorf("band -2: %+v", b)
	}
}

// Fairness measured: two flows offering 10:1 load against a capacity below
// either's offer, so both stay backlogged. Round robin gives each half of
// the dispatches (within 5%); global-strict serves them in arrival order,
// about 10:1.
func TestFairnessShares(t *testing.T) {
	share := func(f flowcontrol.FairnessPolicy) float64 {
		c, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Fairness: f, MaxRequests: flowcontrol.Unlimited}}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		queues := map[string][]*flowcontrol.Item{} // each flow's pending items, oldest first
		add := func(id string) {
			it := &flowcontrol.Item{Flow: flowcontrol.FlowKey{ID: id}}
			if err := c.Enqueue(it); err != nil {
				t.Fatal(err)
			}
			queues[id] = append(queues[id], it)
		}
		served := map[string]int{}
		for tick := range 1000 {
			for range 10 {
				add("heavy")
			}
			add("light")
			for range 1 + tick%2 { // capacity 1.5 per tick: the light flow's fair share is below its offer
				if c.Dispatch(context.Background(), 1) != 1 {
					t.Fatal("nothing dispatched")
				}
				for id, q := range queues {
					if len(q) > 0 && q[0].Outcome() == flowcontrol.Dispatched {
						queues[id] = q[1:]
						if tick >= 100 { // after warm-up
							served[id]++
						}
					}
				}
			}
			if len(queues["light"]) == 0 || len(queues["heavy"]) == 0 {
				t.Fatalf("tick %d: a flow is not backlogged", tick)
			}
		}
		return float64(served["light"]) / float64(served["light"]+served["heavy"])
	}
	if s := share(&flowcontrol.RoundRobin{}); s < 0.45 || s > 0.55 {
		t.Errorf("round robin: light flow got %.3f of the dispatches, want 0.5 ± 0.05", s)
	} else {
		t.Logf("round robin: light flow share %.3f", s)
	}
	if s := share(&flowcontrol.GlobalStrict{}); s < 0.07 || s > 0.11 {
		t.Errorf("global strict: light flow got %.3f, want about its offered 1/11", s)
	}
}

// The background dispatcher sleeps until notified: with a recheck of an
// hour, only Notify can release a held item.
func TestDispatcherWakesOnNotify(t *testing.T) {
	var sat flowcontroltest.Saturation
	sat.Set(1)
	c, err := flowcontrol.New(flowcontrol.Config{Saturation: &sat, Recheck: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Start()
	c.Start()
	done := make(chan error)
	go func() {
		done <- c.EnqueueAndWait(context.Background(), &flowcontrol.Item{Flow: flowcontrol.FlowKey{ID: "a"}})
	}()
	for c.Stats().Queued == 0 {
		runtime.Gosched()
	}
	select {
	case err := <-done:
		t.Fatalf("dispatched while saturated: %v", err)
	default:
	}
	sat.Set(0.2)
	c.Notify()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s, _ := c.Stats().Band(0); s.Dispatched != 1 {
		t.Errorf("stats %+v", s)
	}
}

// An enqueue wakes the dispatcher: with nothing saturated, requests pass
// straight through.
func TestDispatcherServesEnqueues(t *testing.T) {
	c, err := flowcontrol.New(flowcontrol.Config{Recheck: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Start()
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.EnqueueAndWait(context.Background(), &flowcontrol.Item{Flow: flowcontrol.FlowKey{ID: fmt.Sprint(i % 7), Priority: i % 3}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

// Steady-state enqueue and dispatch allocate nothing.
func TestEnqueueDispatchAllocs(t *testing.T) {
	c, err := flowcontrol.New(flowcontrol.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	items := make([]*flowcontrol.Item, 64)
	for i := range items {
		items[i] = &flowcontrol.Item{Flow: flowcontrol.FlowKey{ID: fmt.Sprint("f", i%8), Priority: i % 3}}
		_ = c.Enqueue(items[i])
	}
	ctx := context.Background()
	c.Dispatch(ctx, 32)
	n := 0
	allocs := testing.AllocsPerRun(1000, func() {
		for range 2 {
			it := items[n%len(items)]
			n++
			if it.Outcome() != flowcontrol.Pending {
				if err := c.Enqueue(it); err != nil {
					t.Fatal(err)
				}
			}
		}
		c.Dispatch(ctx, 1)
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per enqueue+dispatch", allocs)
	}
}

// A dispatcher that was held, then emptied by cancellations, still wakes
// for the next request (it has no timer set while the queue is empty).
func TestDispatcherWakesAfterHeldQueueEmptied(t *testing.T) {
	var sat flowcontroltest.Saturation
	sat.Set(1)
	c, err := flowcontrol.New(flowcontrol.Config{Saturation: &sat, Recheck: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Start()
	ctx, cancel := context.WithCancel(context.Background())
	held := make(chan error)
	go func() { held <- c.EnqueueAndWait(ctx, &flowcontrol.Item{Flow: flowcontrol.FlowKey{ID: "a"}}) }()
	for s, _ := c.Stats().Band(0); s.Ceiling == 0; s, _ = c.Stats().Band(0) {
		runtime.Gosched() // until a pass has seen the item and held it
	}
	cancel()
	if err := <-held; !errors.Is(err, flowcontrol.ErrCancelled) {
		t.Fatal(err)
	}
	sat.Set(0)
	if err := c.EnqueueAndWait(context.Background(), &flowcontrol.Item{Flow: flowcontrol.FlowKey{ID: "b"}}); err != nil {
		t.Fatal(err)
	}
}
