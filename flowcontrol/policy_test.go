package flowcontrol_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eppkit/eppkit/flowcontrol"
	"github.com/eppkit/eppkit/flowcontrol/flowcontroltest"
)

func band(f flowcontrol.FairnessPolicy, o flowcontrol.OrderingPolicy) flowcontrol.Config {
	return flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Fairness: f, Ordering: o}}}
}

func wantOrder(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("dispatch order %v, want %v", got, want)
	}
}

func TestConformance(t *testing.T) {
	for _, p := range []flowcontrol.OrderingPolicy{&flowcontrol.FCFS{}, &flowcontrol.EDF{}, &flowcontrol.SLODeadline{}} {
		t.Run(fmt.Sprintf("%T", p), func(t *testing.T) { flowcontroltest.TestOrdering(t, p) })
	}
	for _, p := range []flowcontrol.FairnessPolicy{&flowcontrol.GlobalStrict{}, &flowcontrol.RoundRobin{}} {
		t.Run(fmt.Sprintf("%T", p), func(t *testing.T) { flowcontroltest.TestFairness(t, p) })
	}
	holdback := &flowcontrol.PriorityHoldback{}
	holdback.SetDefaults()
	byValue := *holdback
	byValue.Domain = flowcontrol.HoldbackValue
	for _, p := range []flowcontrol.UsageLimitPolicy{&flowcontrol.StaticUsageLimit{Threshold: 0.8}, holdback, &byValue} {
		t.Run(fmt.Sprintf("%T", p), func(t *testing.T) { flowcontroltest.TestUsageLimit(t, p) })
	}
}

// FCFS with global-strict is one FIFO over the band's flows.
func TestFCFSGlobalStrict(t *testing.T) {
	h := flowcontroltest.New(t, flowcontrol.Config{})
	h.Add("a", 0, "a1")
	h.Add("b", 0, "b1")
	h.Add("a", 0, "a2")
	h.Add("c", 0, "c1")
	wantOrder(t, h.DispatchAll(), "a1", "b1", "a2", "c1")
}

// Round robin takes one item per flow in turn; a flow that becomes
// non-empty joins the rotation last, after the flow just served.
func TestRoundRobin(t *testing.T) {
	h := flowcontroltest.New(t, band(&flowcontrol.RoundRobin{}, nil))
	h.Add("a", 0, "a1")
	h.Add("a", 0, "a2")
	h.Add("a", 0, "a3")
	h.Add("b", 0, "b1")
	wantOrder(t, h.Dispatch(1), "a1")
	h.Add("c", 0, "c1") // the rotation is now b, a, c
	wantOrder(t, h.DispatchAll(), "b1", "a2", "c1", "a3")
}

// EDF dispatches by the earlier of the item's own deadline and its TTL
// deadline; ties go in arrival order.
func TestEDF(t *testing.T) {
	h := flowcontroltest.New(t, flowcontrol.Config{RequestTTL: time.Minute,
		Bands: []flowcontrol.BandConfig{{Ordering: &flowcontrol.EDF{}}}})
	h.Add("a", 0, "ttl-only") // due at +60s
	h.Add("a", 0, "in-10s", h.Deadline(10*time.Second))
	h.Add("b", 0, "in-5s", h.Deadline(5*time.Second))
	h.Add("b", 0, "in-2m", h.Deadline(2*time.Minute)) // the TTL comes first: due at +60s, after ttl-only
	h.Add("c", 0, "in-5s-later", h.Deadline(5*time.Second))
	wantOrder(t, h.DispatchAll(), "in-5s", "in-5s-later", "in-10s", "ttl-only", "in-2m")

	noTTL := flowcontroltest.New(t, flowcontrol.Config{RequestTTL: flowcontrol.NoTTL,
		Bands: []flowcontrol.BandConfig{{Ordering: &flowcontrol.EDF{}}}})
	noTTL.Add("a", 0, "none-1")
	noTTL.Add("a", 0, "in-1h", noTTL.Deadline(time.Hour))
	noTTL.Add("a", 0, "none-2")
	wantOrder(t, noTTL.DispatchAll(), "in-1h", "none-1", "none-2")
}

// SLO deadline: arrival plus x-llm-d-slo-ttft-ms; requests without a valid
// header go last, in arrival order.
func TestSLODeadline(t *testing.T) {
	h := flowcontroltest.New(t, band(nil, &flowcontrol.SLODeadline{}))
	slo := func(v string) func(*flowcontrol.Item) { return flowcontroltest.Header(flowcontrol.HeaderSLOTTFT, v) }
	h.Add("a", 0, "none")
	h.Add("a", 0, "500ms", slo("500"))
	h.Add("b", 0, "bad", slo("soon"))
	h.Add("b", 0, "negative", slo("-1"))
	h.Add("c", 0, "alias-100ms", flowcontroltest.Header(flowcontrol.HeaderSLOTTFTAlias, "100"))
	h.Clock.Advance(300 * time.Millisecond)
	h.Add("c", 0, "300ms-later-250ms", slo(" 250 ")) // due at +550ms: after the 500ms one
	h.Add("d", 0, "received-early-600ms", slo("600"), func(it *flowcontrol.Item) {
		it.Received = flowcontroltest.Epoch.Add(-200 * time.Millisecond) // due at +400ms
	})
	wantOrder(t, h.DispatchAll(), "alias-100ms", "received-early-600ms", "500ms", "300ms-later-250ms", "none", "bad", "negative")
}

// Bands are served from the highest priority; a band's ordering and
// fairness apply within it.
func TestBandsHighestPriorityFirst(t *testing.T) {
	h := flowcontroltest.New(t, flowcontrol.Config{Bands: []flowcontrol.BandConfig{
		{Priority: 0}, {Priority: 10, Fairness: &flowcontrol.RoundRobin{}},
	}})
	h.Add("a", 0, "p0-a")
	h.Add("a", -1, "p-1-a") // provisioned on demand
	h.Add("a", 10, "p10-a1")
	h.Add("a", 10, "p10-a2")
	h.Add("b", 10, "p10-b1")
	h.Add("a", 5, "p5-a") // provisioned on demand
	wantOrder(t, h.DispatchAll(), "p10-a1", "p10-b1", "p10-a2", "p5-a", "p0-a", "p-1-a")
	var prios []int
	for _, b := range h.Stats().Bands {
		prios = append(prios, b.Priority)
	}
	if !slices.Equal(prios, []int{10, 5, 0, -1}) {
		t.Errorf("bands %v, want [10 5 0 -1]", prios)
	}
}

func TestStaticUsageLimit(t *testing.T) {
	h := flowcontroltest.New(t, flowcontrol.Config{UsageLimit: &flowcontrol.StaticUsageLimit{Threshold: 0.8}})
	h.Add("a", 0, "a1")
	h.Add("a", 0, "a2")
	h.Sat.Set(0.8) // at the ceiling: held
	wantOrder(t, h.DispatchAll())
	h.Sat.Set(0.79)
	wantOrder(t, h.DispatchAll(), "a1", "a2")
	for _, bad := range []float64{0, -0.1, 1.01} {
		if err := (&flowcontrol.StaticUsageLimit{Threshold: bad}).Validate(); err == nil {
			t.Errorf("threshold %v accepted", bad)
		}
	}
}

func TestPriorityHoldbackCeilings(t *testing.T) {
	p := &flowcontrol.PriorityHoldback{}
	p.SetDefaults()
	p.MinCeiling, p.MaxCeiling = 0.4, 0.9
	ceil := func(prios ...int) []float64 {
		out := make([]float64, len(prios))
		p.Ceilings(0.5, prios, out)
		for i := range out {
			out[i] = float64(int(out[i]*1000+0.5)) / 1000
		}
		return out
	}
	if got := ceil(100, 10, 0, -10); !slices.Equal(got, []float64{0.9, 0.733, 0.567, 0.4}) {
		t.Errorf("rank: %v", got)
	}
	if got := ceil(7); !slices.Equal(got, []float64{0.9}) {
		t.Errorf("one band: %v", got)
	}
	p.Domain = flowcontrol.HoldbackValue
	if got := ceil(100, 10, 0, -10); !slices.Equal(got, []float64{0.9, 0.491, 0.445, 0.4}) {
		t.Errorf("value: %v", got)
	}
	for _, bad := range []flowcontrol.PriorityHoldback{
		{Shape: "cubic", Domain: "rank", MinCeiling: 0.5, MaxCeiling: 1},
		{Shape: "linear", Domain: "order", MinCeiling: 0.5, MaxCeiling: 1},
		{Shape: "linear", Domain: "rank", MinCeiling: 1, MaxCeiling: 1},
		{Shape: "linear", Domain: "rank", MinCeiling: 0.5, MaxCeiling: 0},
		{Shape: "linear", Domain: "rank", MinCeiling: 0.7, MaxCeiling: 0.6},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// With holdback, a lower band is held at a saturation the higher band still
// serves at.
func TestPriorityHoldbackHoldsLowerBands(t *testing.T) {
	p := &flowcontrol.PriorityHoldback{}
	p.SetDefaults() // ceilings 1 (high) … 0.5 (low)
	h := flowcontroltest.New(t, flowcontrol.Config{UsageLimit: p, Bands: []flowcontrol.BandConfig{{Priority: 10}, {Priority: 0}}})
	h.Add("batch", 0, "low")
	h.Add("live", 10, "high")
	h.Sat.Set(0.7)
	wantOrder(t, h.DispatchAll(), "high")
	if s, _ := h.Stats().Band(0); s.Ceiling != 0.5 || s.Queued != 1 {
		t.Errorf("band 0: %+v", s)
	}
	if s := h.Stats(); s.Saturation != 0.7 {
		t.Errorf("saturation %v", s.Saturation)
	}
	h.Sat.Set(0.4)
	wantOrder(t, h.DispatchAll(), "low")
}

// A band over its ceiling stops the dispatcher even when a lower band's
// ceiling would admit: lower bands never overtake a held higher band.
func TestStopsAtFirstBandOverCeiling(t *testing.T) {
	inverted := flowcontrol.UsageLimitFunc(func(_ float64, prios []int, ceilings []float64) {
		for i, p := range prios {
			ceilings[i] = map[int]float64{10: 0.5, 0: 0.9}[p]
		}
	})
	h := flowcontroltest.New(t, flowcontrol.Config{UsageLimit: inverted, Bands: []flowcontrol.BandConfig{{Priority: 10}, {Priority: 0}}})
	h.Add("a", 0, "low")
	h.Sat.Set(0.6)
	wantOrder(t, h.DispatchAll()) // band 10 is empty but over its ceiling
	h.Sat.Set(0.4)
	wantOrder(t, h.DispatchAll(), "low")
}

// A custom fairness policy is one function: here, the flow with the most
// queued items.
func TestCustomFairnessPolicy(t *testing.T) {
	longest := flowcontrol.FairnessFunc(func(b *flowcontrol.Band) *flowcontrol.Flow {
		var best *flowcontrol.Flow
		for f := range b.Flows() {
			if best == nil || f.Len() > best.Len() {
				best = f
			}
		}
		return best
	})
	h := flowcontroltest.New(t, band(longest, nil))
	h.Add("a", 0, "a1")
	h.Add("b", 0, "b1")
	h.Add("b", 0, "b2")
	wantOrder(t, h.DispatchAll(), "b1", "a1", "b2")

	pause := flowcontrol.FairnessFunc(func(*flowcontrol.Band) *flowcontrol.Flow { return nil })
	p := flowcontroltest.New(t, band(pause, nil))
	p.Add("a", 0, "a1")
	wantOrder(t, p.DispatchAll())
	wantOrder(t, p.Pending(), "a1")
}

// A custom ordering policy without Key: smallest request first.
func TestCustomOrderingPolicy(t *testing.T) {
	smallest := flowcontrol.OrderingFunc(func(a, b *flowcontrol.Item) bool { return a.Size < b.Size })
	h := flowcontroltest.New(t, band(nil, smallest))
	h.Add("a", 0, "300", flowcontroltest.Size(300))
	h.Add("b", 0, "100", flowcontroltest.Size(100))
	h.Add("a", 0, "200", flowcontroltest.Size(200))
	h.Add("c", 0, "100-later", flowcontroltest.Size(100))
	wantOrder(t, h.DispatchAll(), "100", "100-later", "200", "300")
}
