package flowcontrol_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/eppkit/eppkit/flowcontrol"
	"github.com/eppkit/eppkit/flowcontrol/flowcontroltest"
)

var prios = []int{10, 0, -5}

// randomConfig draws limits and policies small enough that every outcome
// happens.
func randomConfig(r *rand.Rand) flowcontrol.Config {
	cfg := flowcontrol.Config{
		MaxRequests: int64(20 + r.IntN(40)),
		RequestTTL:  time.Duration(1+r.IntN(20)) * time.Second,
	}
	if r.IntN(2) == 0 {
		p := &flowcontrol.PriorityHoldback{}
		p.SetDefaults()
		cfg.UsageLimit = p
	}
	for _, p := range prios {
		bc := flowcontrol.BandConfig{Priority: p, MaxRequests: int64(5 + r.IntN(20)), MaxBytes: int64(2000 + r.IntN(4000))}
		if r.IntN(2) == 0 {
			bc.Fairness = &flowcontrol.RoundRobin{}
		}
		switch r.IntN(3) {
		case 0:
			bc.Ordering = &flowcontrol.EDF{}
		case 1:
			bc.Ordering = &flowcontrol.SLODeadline{}
		}
		cfg.Bands = append(cfg.Bands, bc)
	}
	return cfg
}

// Every enqueued item ends exactly once — dispatched, rejected, expired,
// cancelled or drained — and the dispatcher never serves a band while a
// higher one holds items, over random sequences of operations.
func TestPropertyEveryItemEndsOnce(t *testing.T) {
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkSequence(t, seed) })
	}
}

func checkSequence(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	h := flowcontroltest.New(t, randomConfig(r))
	seen := map[*flowcontrol.Item]flowcontrol.Outcome{}
	observe := func(step string) {
		t.Helper()
		pending := map[int]int{}
		for _, it := range h.Items {
			o := it.Outcome()
			if was, ok := seen[it]; ok && was != flowcontrol.Pending && was != o {
				t.Fatalf("%s: %s ended twice: %v, then %v", step, flowcontroltest.Label(it), was, o)
			}
			seen[it] = o
			if o == flowcontrol.Pending {
				pending[it.Flow.Priority]++
			}
		}
		for _, b := range h.Stats().Bands {
			if b.Queued != pending[b.Priority] {
				t.Fatalf("%s: band %d reports %d queued, %d items wait", step, b.Priority, b.Queued, pending[b.Priority])
			}
		}
	}
	for step := range 400 {
		switch op := r.IntN(10); {
		case op < 5:
			opts := []func(*flowcontrol.Item){flowcontroltest.Size(int64(r.IntN(400)))}
			if r.IntN(2) == 0 {
				opts = append(opts, flowcontroltest.Header(flowcontrol.HeaderSLOTTFT, strconv.Itoa(r.IntN(3000))))
			}
			if r.IntN(4) == 0 {
				opts = append(opts, h.Deadline(time.Duration(r.IntN(10_000))*time.Millisecond))
			}
			h.Add(fmt.Sprint("f", r.IntN(6)), prios[r.IntN(len(prios))], fmt.Sprint("#", step), opts...)
		case op < 7:
			h.Sat.Set(r.Float64() * 1.2)
			before := map[*flowcontrol.Item]bool{}
			for _, it := range h.Items {
				before[it] = it.Outcome() == flowcontrol.Pending
			}
			for _, l := range h.Dispatch(1 + r.IntN(4)) {
				var got *flowcontrol.Item
				for _, it := range h.Items {
					if flowcontroltest.Label(it) == l {
						got = it
					}
				}
				for _, it := range h.Items {
					if before[it] && it.Outcome() == flowcontrol.Pending && it.Flow.Priority > got.Flow.Priority {
						t.Fatalf("step %d: dispatched %s (priority %d) while %s (priority %d) waits",
							step, l, got.Flow.Priority, flowcontroltest.Label(it), it.Flow.Priority)
					}
				}
			}
		case op < 8:
			h.Clock.Advance(time.Duration(r.IntN(3000)) * time.Millisecond)
		default:
			if len(h.Items) > 0 {
				_ = h.Cancel(h.Items[r.IntN(len(h.Items))])
			}
		}
		observe(fmt.Sprint("step ", step))
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	observe("close")
	var ended uint64
	for _, b := range h.Stats().Bands {
		ended += b.Dispatched + b.Rejected + b.Expired + b.Cancelled + b.Drained
	}
	for _, it := range h.Items {
		if it.Outcome() == flowcontrol.Pending {
			t.Errorf("%s never ended", flowcontroltest.Label(it))
		}
	}
	if ended != uint64(len(h.Items)) {
		t.Errorf("%d outcomes counted for %d items", ended, len(h.Items))
	}
}

// The same property with real concurrency: callers enqueue and wait, some
// give up at random, saturation flips, the background dispatcher runs, and
// the controller shuts down mid-stream. Run it with -race.
func TestPropertyConcurrent(t *testing.T) {
	var sat flowcontroltest.Saturation
	cfg := randomConfig(rand.New(rand.NewPCG(1, 2)))
	cfg.Saturation = &sat
	cfg.Recheck = 50 * time.Microsecond
	c, err := flowcontrol.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Start()

	const callers, perCaller = 16, 150
	type result struct {
		it  *flowcontrol.Item
		err error
	}
	results := make(chan result, callers*perCaller)
	stop := make(chan struct{})
	var flipper sync.WaitGroup
	flipper.Add(1)
	go func() {
		defer flipper.Done()
		r := rand.New(rand.NewPCG(3, 4))
		for {
			select {
			case <-stop:
				return
			default:
			}
			sat.Set(r.Float64() * 1.1)
			c.Notify()
			time.Sleep(20 * time.Microsecond)
		}
	}()
	var wg sync.WaitGroup
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for i := range perCaller {
				it := &flowcontrol.Item{Flow: flowcontrol.FlowKey{ID: fmt.Sprint("f", r.IntN(8)), Priority: prios[r.IntN(3)]}, Size: int64(r.IntN(300))}
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				switch r.IntN(4) {
				case 0:
					ctx, cancel = context.WithCancel(context.Background())
					delay := time.Duration(r.IntN(50)) * time.Microsecond
					go func() {
						time.Sleep(delay)
						cancel()
					}()
				case 1:
					ctx, cancel = context.WithTimeout(context.Background(), time.Duration(r.IntN(200))*time.Microsecond)
				}
				results <- result{it, c.EnqueueAndWait(ctx, it)}
				cancel()
				if g == 0 && i == perCaller/2 {
					_ = c.Close() // shut down while the others are mid-stream
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	flipper.Wait()
	close(results)

	var ended uint64
	for _, b := range c.Stats().Bands {
		ended += b.Dispatched + b.Rejected + b.Expired + b.Cancelled + b.Drained
	}
	n := 0
	outcomes := map[flowcontrol.Outcome]int{}
	for res := range results {
		n++
		o := res.it.Outcome()
		outcomes[o]++
		want := map[flowcontrol.Outcome]error{
			flowcontrol.Dispatched: nil, flowcontrol.Rejected: flowcontrol.ErrAtCapacity, flowcontrol.Expired: flowcontrol.ErrExpired,
			flowcontrol.Cancelled: flowcontrol.ErrCancelled, flowcontrol.Drained: flowcontrol.ErrShuttingDown,
		}
		w, ok := want[o]
		if !ok || (w == nil) != (res.err == nil) || (w != nil && !errors.Is(res.err, w)) {
			t.Errorf("outcome %v returned %v", o, res.err)
		}
	}
	t.Logf("outcomes: %v", outcomes)
	if n != callers*perCaller {
		t.Errorf("%d results for %d calls", n, callers*perCaller)
	}
	if s := c.Stats(); s.Queued != 0 {
		t.Errorf("%d items still queued after Close", s.Queued)
	}
	if ended != uint64(n) {
		t.Errorf("%d outcomes counted for %d items", ended, n)
	}
}
