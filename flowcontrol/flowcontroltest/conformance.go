package flowcontroltest

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/eppkit/eppkit/flowcontrol"
)

// TestOrdering checks an ordering policy on a varied set of queued items
// (arrival times, deadlines, SLO headers, sizes, missing headers): Less is
// a strict weak order (irreflexive, asymmetric, transitive, with transitive
// incomparability), a Keyer's keys agree with Less, and a band using the
// policy dispatches every item exactly once, in an order Less agrees with.
func TestOrdering(t *testing.T, p flowcontrol.OrderingPolicy) {
	t.Helper()
	h := New(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Ordering: p}}})
	var items []*flowcontrol.Item
	for i := range 12 {
		opts := []func(*flowcontrol.Item){Size(int64(i * 100))}
		if i%3 != 0 {
			opts = append(opts, Header(flowcontrol.HeaderSLOTTFT, strconv.Itoa((i*37)%500)))
		}
		if i%4 == 1 {
			opts = append(opts, h.Deadline(time.Duration(12-i)*time.Second))
		}
		if i == 5 {
			opts = append(opts, Header(flowcontrol.HeaderSLOTTFT, "not-a-number"))
		}
		if i%5 == 2 {
			opts = append(opts, func(it *flowcontrol.Item) { it.Received = Epoch.Add(-time.Duration(i) * time.Millisecond) })
		}
		items = append(items, h.Add(fmt.Sprint("f", i%3), 0, fmt.Sprint("i", i), opts...))
		h.Clock.Advance(time.Duration(i%2) * time.Millisecond)
	}
	less := p.Less
	for _, a := range items {
		if less(a, a) {
			t.Errorf("Less(%s, %s) is true: not irreflexive", Label(a), Label(a))
		}
		for _, b := range items {
			if less(a, b) && less(b, a) {
				t.Errorf("Less(%s, %s) and Less(%s, %s) are both true", Label(a), Label(b), Label(b), Label(a))
			}
			for _, c := range items {
				if less(a, b) && less(b, c) && !less(a, c) {
					t.Errorf("not transitive: %s < %s < %s but not %s < %s", Label(a), Label(b), Label(c), Label(a), Label(c))
				}
				eq := func(x, y *flowcontrol.Item) bool { return !less(x, y) && !less(y, x) }
				if eq(a, b) && eq(b, c) && !eq(a, c) {
					t.Errorf("incomparability not transitive: %s ~ %s ~ %s but not %s ~ %s", Label(a), Label(b), Label(c), Label(a), Label(c))
				}
			}
		}
	}
	if k, ok := p.(flowcontrol.Keyer); ok {
		for _, a := range items {
			for _, b := range items {
				if k.Key(a) < k.Key(b) && !less(a, b) {
					t.Errorf("Key(%s) < Key(%s) but not Less(%s, %s)", Label(a), Label(b), Label(a), Label(b))
				}
			}
			if k.Key(a) != k.Key(a) {
				t.Errorf("Key(%s) is not deterministic", Label(a))
			}
		}
	}
	got := h.DispatchAll()
	if len(got) != len(items) {
		t.Fatalf("dispatched %d of %d items: %v", len(got), len(items), got)
	}
	byLabel := map[string]*flowcontrol.Item{}
	for _, it := range items {
		byLabel[Label(it)] = it
	}
	for i := 1; i < len(got); i++ {
		// Global-strict over one band's flows dispatches in the band's order.
		if less(byLabel[got[i]], byLabel[got[i-1]]) {
			t.Errorf("dispatched %s before %s, but Less(%s, %s)", got[i-1], got[i], got[i], got[i-1])
		}
	}
}

// TestFairness checks a fairness policy: over bands of one to five flows
// with uneven backlogs it returns only flows of the band that hold items (or
// nil), and a band using it drains every item exactly once, the same way on
// every run.
func TestFairness(t *testing.T, p flowcontrol.FairnessPolicy) {
	t.Helper()
	run := func() []string {
		checked := flowcontrol.FairnessFunc(func(b *flowcontrol.Band) *flowcontrol.Flow {
			f := p.Pick(b)
			if f != nil && (f.Len() == 0 || f.Key().Priority != b.Priority()) {
				t.Errorf("Pick returned flow %v (%d items) from band %d", f.Key(), f.Len(), b.Priority())
			}
			return f
		})
		h := New(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{
			{Priority: 1, Fairness: checked}, {Priority: 0, Fairness: checked},
		}})
		n := 0
		for f := range 5 {
			for i := range 1 + (f*7)%4 {
				h.Add(fmt.Sprint("f", f), f%2, fmt.Sprintf("f%d.%d", f, i))
				n++
			}
		}
		got := h.DispatchAll()
		if len(got) != n || len(h.Pending()) != 0 {
			t.Errorf("dispatched %d of %d items; still pending: %v", len(got), n, h.Pending())
		}
		seen := map[string]bool{}
		for _, l := range got {
			if seen[l] {
				t.Errorf("%s dispatched twice", l)
			}
			seen[l] = true
		}
		return got
	}
	if a, b := run(), run(); !slices.Equal(a, b) {
		t.Errorf("dispatch order differs between identical runs:\n%v\n%v", a, b)
	}
}

// TestUsageLimit checks a usage-limit policy: for one to five bands and
// saturations from idle to overloaded it fills every ceiling with a number
// (not NaN), leaves the priorities alone, and answers the same way twice.
func TestUsageLimit(t *testing.T, p flowcontrol.UsageLimitPolicy) {
	t.Helper()
	for n := 1; n <= 5; n++ {
		prios := make([]int, n)
		for i := range prios {
			prios[i] = 10 - 7*i
		}
		for _, sat := range []float64{0, 0.3, 0.8, 1, 1.7} {
			orig := slices.Clone(prios)
			a := slices.Repeat([]float64{math.NaN()}, n)
			b := slices.Repeat([]float64{-1}, n)
			p.Ceilings(sat, prios, a)
			p.Ceilings(sat, prios, b)
			if !slices.Equal(prios, orig) {
				t.Errorf("Ceilings modified the priorities: %v, was %v", prios, orig)
			}
			for i := range a {
				if math.IsNaN(a[i]) || a[i] != b[i] {
					t.Errorf("saturation %v, priorities %v: ceiling %d is %v, then %v", sat, prios, i, a[i], b[i])
				}
			}
		}
	}
}
