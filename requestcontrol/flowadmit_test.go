package requestcontrol_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/flowcontrol"
	"github.com/eppkit/eppkit/flowcontrol/flowcontroltest"
	"github.com/eppkit/eppkit/requestcontrol"
	rt "github.com/eppkit/eppkit/requestcontrol/requestcontroltest"
)

func flowController(t *testing.T, cfg flowcontrol.Config) *flowcontrol.Controller {
	t.Helper()
	c, err := flowcontrol.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Each way flow control refuses a request has its status and reason.
func TestFlowAdmitterRejections(t *testing.T) {
	saturated := flowcontrol.SaturationFunc(func(context.Context, []*datalayer.Endpoint) float64 { return 1 })
	director := func(c *flowcontrol.Controller) *requestcontrol.Director {
		return rt.NewDirector(t, rt.Config{Admission: &requestcontrol.FlowAdmitter{Controller: c, Logger: rt.TestLogger(t)}})
	}
	t.Run("at capacity", func(t *testing.T) {
		c := flowController(t, flowcontrol.Config{MaxRequests: 1})
		_ = c.Enqueue(&flowcontrol.Item{Flow: flowcontrol.FlowKey{ID: "other"}}) // fills the queue; nothing dispatches it
		wantRejection(t, rt.Do(ctx, director(c), rt.Chat("m", "x"), rt.Response{}), 429, requestcontrol.ReasonSaturated, "queue at capacity")
	})
	t.Run("deadline", func(t *testing.T) {
		c := flowController(t, flowcontrol.Config{})
		past, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
		defer cancel()
		wantRejection(t, rt.Do(past, director(c), rt.Chat("m", "x"), rt.Response{}), 429, requestcontrol.ReasonTTLExpired, "expired")
	})
	t.Run("client gone", func(t *testing.T) {
		c := flowController(t, flowcontrol.Config{})
		gone, cancel := context.WithCancel(ctx)
		cancel()
		wantRejection(t, rt.Do(gone, director(c), rt.Chat("m", "x"), rt.Response{}), 503, requestcontrol.ReasonCancelled, "cancelled")
		if s := c.Stats(); s.Queued != 0 {
			t.Errorf("the cancelled request is still queued: %+v", s)
		}
	})
	t.Run("shutting down", func(t *testing.T) {
		c := flowController(t, flowcontrol.Config{})
		_ = c.Close()
		wantRejection(t, rt.Do(ctx, director(c), rt.Chat("m", "x"), rt.Response{}), 503, requestcontrol.ReasonShutdown, "shutting down")
	})
	t.Run("ttl", func(t *testing.T) {
		clock := &flowcontroltest.Clock{}
		c := flowController(t, flowcontrol.Config{Clock: clock, RequestTTL: time.Second, Saturation: saturated})
		res := make(chan rt.Result)
		go func() { res <- rt.Do(ctx, director(c), rt.Chat("m", "x"), rt.Response{}) }()
		for c.Stats().Queued == 0 {
			runtime.Gosched()
		}
		clock.Advance(time.Second)
		c.Dispatch(ctx, 0)
		wantRejection(t, <-res, 429, requestcontrol.ReasonTTLExpired, "expired")
	})
	t.Run("ttl without endpoints", func(t *testing.T) {
		clock := &flowcontroltest.Clock{}
		c := flowController(t, flowcontrol.Config{Clock: clock, NoEndpointTTL: time.Second, Saturation: saturated,
			Endpoints: func() []*datalayer.Endpoint { return nil }})
		res := make(chan rt.Result)
		go func() { res <- rt.Do(ctx, director(c), rt.Chat("m", "x"), rt.Response{}) }()
		for c.Stats().Queued == 0 {
			runtime.Gosched()
		}
		c.Dispatch(ctx, 0) // the pool is empty from now
		clock.Advance(time.Second)
		c.Dispatch(ctx, 0)
		wantRejection(t, <-res, 503, requestcontrol.ReasonNoEndpoints, "no endpoints")
	})
}

// With flow control the request waits while the pool is saturated and goes
// on when a completing request frees capacity: the completion wakes the
// dispatcher (its recheck here is an hour).
func TestFlowAdmitterReleasesOnCompletion(t *testing.T) {
	rec := &rt.Recorder{}
	c := flowController(t, flowcontrol.Config{
		Recheck: time.Hour,
		// Capacity is one request at a time.
		Saturation: flowcontrol.SaturationFunc(func(context.Context, []*datalayer.Endpoint) float64 { return float64(rec.Open()) }),
	})
	c.Start()
	fa := &requestcontrol.FlowAdmitter{Controller: c}
	d := rt.NewDirector(t, rt.Config{Admission: fa, Plugins: []any{rec}})
	d.ResponseCompletes = append(d.ResponseCompletes, requestcontrol.Named[requestcontrol.ResponseComplete]{Name: "flow-control", Plugin: fa})

	first, err := d.HandleRequest(ctx, rt.Chat("m", "first", requestcontrol.HeaderFairnessID, "tenant-a"))
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan error)
	go func() {
		x, err := d.HandleRequest(ctx, rt.Chat("m", "second", requestcontrol.HeaderFairnessID, "tenant-b"))
		if err == nil {
			x.Close(nil)
		}
		second <- err
	}()
	for c.Stats().Queued == 0 {
		runtime.Gosched()
	}
	select {
	case err := <-second:
		t.Fatalf("second request admitted while the first runs: %v", err)
	default:
	}
	first.Close(nil) // completes: capacity frees
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if s, _ := c.Stats().Band(0); s.Dispatched != 2 || s.Queued != 0 {
		t.Errorf("stats %+v", s)
	}
}

// A caller that drives the controller itself (no Start) learns through
// Queued what waits, and the request goes on when it dispatches.
func TestFlowAdmitterQueuedHookAndManualDispatch(t *testing.T) {
	c := flowController(t, flowcontrol.Config{})
	queued := make(chan *flowcontrol.Item, 1)
	fa := &requestcontrol.FlowAdmitter{Controller: c, Queued: func(it *flowcontrol.Item) { queued <- it }}
	d := rt.NewDirector(t, rt.Config{Admission: fa})
	done := make(chan error, 1)
	go func() {
		x, err := d.HandleRequest(ctx, rt.Chat("m", "hi", requestcontrol.HeaderFairnessID, "tenant-a"))
		if err == nil {
			x.Close(nil)
		}
		done <- err
	}()
	it := <-queued
	if it.Flow.ID != "tenant-a" || it.Outcome() != flowcontrol.Pending {
		t.Fatalf("queued item %+v, outcome %v", it.Flow, it.Outcome())
	}
	select {
	case err := <-done:
		t.Fatalf("admitted before any dispatch: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	if n := c.Dispatch(ctx, 0); n != 1 {
		t.Fatalf("dispatched %d, want 1", n)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
