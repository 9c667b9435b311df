package sim

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
)

func drain(t *testing.T, w Workload) []*Request {
	t.Helper()
	var out []*Request
	var last time.Duration
	for r, ok := w.Next(); ok; r, ok = w.Next() {
		if r.Arrival < last {
			t.Fatalf("arrival %v before %v", r.Arrival, last)
		}
		last = r.Arrival
		if need := (r.PromptTokens + 15) / 16; len(r.Units) < need {
			t.Fatalf("%d units for %d tokens", len(r.Units), r.PromptTokens)
		}
		out = append(out, r)
	}
	if err := WorkloadError(w); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTenantsWorkload(t *testing.T) {
	rs := drain(t, Tenants{Seed: 1, Arrivals: Ramp{From: 10, To: 10, Duration: 10 * time.Second}}.New())
	if len(rs) < 80 || len(rs) > 120 {
		t.Fatalf("%d arrivals at 10/s over 10s", len(rs))
	}
	r := rs[0]
	if r.PromptTokens != 7200 {
		t.Fatalf("prompt %d tokens", r.PromptTokens)
	}
	if r.OutputTokens != 300 || len(r.Units) != 375+75 {
		t.Fatalf("output %d, %d units", r.OutputTokens, len(r.Units))
	}
}

func TestChatWorkloadGrows(t *testing.T) {
	rs := drain(t, Chat{Sessions: 1, Turns: 3, Seed: 1, Arrivals: Ramp{From: 5, To: 5, Duration: 2 * time.Second}}.New())
	if len(rs) < 3 {
		t.Fatalf("%d arrivals", len(rs))
	}
	// Each turn's prompt extends the previous one; the fourth starts over.
	a, b := rs[0], rs[1]
	if b.PromptTokens <= a.PromptTokens || !prefixOf(a.Units, b.Units) {
		t.Fatalf("turn 2 does not extend turn 1")
	}
	if len(rs) > 3 && prefixOf(rs[2].Units, rs[3].Units) {
		t.Fatalf("a new session continued the old one")
	}
}

func prefixOf(a, b []uint64) bool {
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLoRAWorkload(t *testing.T) {
	rs := drain(t, LoRAMix{Seed: 1, Arrivals: Ramp{From: 50, To: 50, Duration: 2 * time.Second}}.New())
	models := map[string]int{}
	for _, r := range rs {
		models[r.Model]++
	}
	if len(models) < 3 || models["adapter-0"] < models["adapter-5"] {
		t.Fatalf("adapter mix %v", models)
	}
}

func TestMooncakeReplay(t *testing.T) {
	f, err := os.Open("testdata/mooncake.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := Mooncake{R: f}.New()
	if err != nil {
		t.Fatal(err)
	}
	rs := drain(t, w)
	if len(rs) != 300 || rs[0].Arrival != 0 {
		t.Fatalf("%d requests, first at %v", len(rs), rs[0].Arrival)
	}
	// Equal hash ids are equal content: a hash id re-blocks to the same 32
	// units wherever it appears.
	for _, r := range rs[1:] {
		if r.Units[0] == rs[0].Units[0] {
			if !prefixOf(rs[0].Units[:32], r.Units) {
				t.Fatal("a shared hash id gave different units")
			}
			break
		}
	}
	bad, _ := Mooncake{R: strings.NewReader("{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\nnot json\n")}.New()
	bad.Next()
	if _, ok := bad.Next(); ok || WorkloadError(bad) == nil {
		t.Fatalf("a malformed line is not an error")
	}
	if _, err := (Mooncake{R: f, BlockTokens: 48}).New(); err == nil {
		t.Fatal("block size 48 does not divide 512 but was accepted")
	}
}

// The trace replay, the chat and the LoRA workloads run end to end through
// the pipeline; prefix routing finds the trace's shared blocks.
func TestWorkloadsEndToEnd(t *testing.T) {
	cfgs := demo(t, "random", "approx-prefix")
	trace := func() (Workload, error) {
		f, err := os.Open("testdata/mooncake.jsonl")
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { f.Close() })
		return Mooncake{R: f}.New()
	}
	for name, wf := range map[string]WorkloadFunc{
		"mooncake": trace,
		"chat": func() (Workload, error) {
			return Chat{Seed: 2, Arrivals: Ramp{From: 20, To: 20, Duration: 5 * time.Second}}.New(), nil
		},
		"lora": func() (Workload, error) {
			return LoRAMix{Seed: 2, Arrivals: Ramp{From: 20, To: 20, Duration: 5 * time.Second}}.New(), nil
		},
	} {
		res, err := Run(context.Background(), cfgs, Options{Servers: 4, Seed: 2, Workload: wf})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("workload %s", name)
		m := byName(t, res)
		for _, c := range res.Configs {
			if c.Completed != c.Requests || c.Requests == 0 {
				t.Errorf("%s/%s: %d of %d completed", name, c.Name, c.Completed, c.Requests)
			}
		}
		if m["approx-prefix"].HitRate <= m["random"].HitRate {
			t.Errorf("%s: prefix hit rate %.3f ≤ random %.3f", name, m["approx-prefix"].HitRate, m["random"].HitRate)
		}
	}
}

// Burstiness shapes the gaps between arrivals as vLLM's benchmark does:
// gamma with shape k keeps the mean gap 1/rate and has a coefficient of
// variation 1/√k (1 for Poisson, larger for burstier traffic).
func TestRampBurstiness(t *testing.T) {
	const rate, n = 50.0, 40000
	for _, k := range []float64{0, 0.25, 1, 4} {
		r := Ramp{From: rate, To: rate, Duration: time.Hour, Burstiness: k}
		rng := rand.New(rand.NewPCG(7, uint64(k*100)))
		var sum, sq float64
		at := time.Duration(0)
		for range n {
			next, ok := r.next(rng, at)
			if !ok {
				t.Fatalf("k=%v: ended at %v", k, at)
			}
			g := (next - at).Seconds()
			sum, sq = sum+g, sq+g*g
			at = next
		}
		mean := sum / n
		cv := math.Sqrt(sq/n-mean*mean) / mean
		wantCV := 1.0
		if k > 0 {
			wantCV = 1 / math.Sqrt(k)
		}
		if math.Abs(mean*rate-1) > 0.03 || math.Abs(cv/wantCV-1) > 0.06 {
			t.Errorf("burstiness %v: mean gap %.4fs (want %.4fs), CV %.3f (want %.3f)", k, mean, 1/rate, cv, wantCV)
		}
	}
}
