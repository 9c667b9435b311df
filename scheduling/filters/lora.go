package filters

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync/atomic"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// DefaultLoRAAffinityThreshold is the default probability of keeping only the
// endpoints that already hold the adapter (llm-d's value).
const DefaultLoRAAffinityThreshold = 0.999

// LoRAAffinity is the lora-affinity-filter. It splits the candidates with
// usable metrics into two groups for the requested adapter (the request's
// TargetModel, or IncomingModel when no target is set):
//
//   - affinity: the adapter is active or waiting to load on the endpoint;
//   - available: otherwise, the endpoint has a free adapter slot (distinct
//     active and waiting adapters < max).
//
// When both groups are non-empty it keeps the affinity group with probability
// Threshold and the available group otherwise (one draw from the injected
// random source, so a seeded run is reproducible); when only one is non-empty
// it keeps that one. This is the behaviour of the lora-affinity filter of
// gateway-api-inference-extension / llm-d, which spreads a small share of an
// adapter's traffic onto endpoints that can load it.
//
// One deliberate difference: when neither group has an endpoint (the adapter
// is nowhere and every endpoint is full, or no endpoint reports LoRA state)
// the anchor returns nothing, which its decision tree treats as "fall through"
// but a plain filter chain would turn into a 429. This filter keeps every
// candidate instead, so it never rejects a request on its own.
type LoRAAffinity struct {
	Threshold float64 `json:"threshold" doc:"probability (0..1) of keeping only the endpoints that hold the adapter when endpoints with a free slot also exist"`

	rand atomic.Pointer[rand.Rand]
}

var (
	_ scheduling.Filter   = (*LoRAAffinity)(nil)
	_ plugins.Initializer = (*LoRAAffinity)(nil)
)

// SetDefaults sets Threshold to DefaultLoRAAffinityThreshold.
func (f *LoRAAffinity) SetDefaults() { f.Threshold = DefaultLoRAAffinityThreshold }

// Validate rejects a threshold outside [0,1].
func (f *LoRAAffinity) Validate() error {
	if math.IsNaN(f.Threshold) || f.Threshold < 0 || f.Threshold > 1 {
		return errors.New("lora-affinity-filter: threshold: must be between 0 and 1")
	}
	return nil
}

// Init takes the random source from deps.
func (f *LoRAAffinity) Init(_ context.Context, deps plugins.Deps) error {
	if deps.Rand != nil {
		f.rand.Store(deps.Rand)
	}
	return nil
}

// random returns the source set by Init, or one seeded with 1 when Init was
// never called.
func (f *LoRAAffinity) random() *rand.Rand {
	if r := f.rand.Load(); r != nil {
		return r
	}
	f.rand.CompareAndSwap(nil, plugins.NewRand(1))
	return f.rand.Load()
}

// Filter implements scheduling.Filter.
func (f *LoRAAffinity) Filter(_ context.Context, req *scheduling.Request, eps []*scheduling.Endpoint) []*scheduling.Endpoint {
	adapter := req.TargetModel
	if adapter == "" {
		adapter = req.IncomingModel
	}
	var nAffinity, nAvailable int
	for _, e := range eps {
		switch loraGroup(e, adapter) {
		case affinity:
			nAffinity++
		case available:
			nAvailable++
		}
	}
	var want group
	switch {
	case nAffinity > 0 && nAvailable > 0:
		want = available
		if f.random().Float64() < f.Threshold {
			want = affinity
		}
	case nAffinity > 0:
		want = affinity
	case nAvailable > 0:
		want = available
	default:
		return eps
	}
	return keep(eps, func(e *scheduling.Endpoint) bool { return loraGroup(e, adapter) == want })
}

type group uint8

const (
	neither group = iota
	affinity
	available
)

func loraGroup(e *scheduling.Endpoint, adapter string) group {
	if !e.Metrics.Usable() {
		return neither
	}
	l := &e.Metrics.LoRA
	if active, waiting := l.Has(adapter); active || waiting {
		return affinity
	}
	if loadedAdapters(l) < l.Max {
		return available
	}
	return neither
}

// loadedAdapters counts the distinct adapters in l.Active and l.Waiting.
func loadedAdapters(l *datalayer.LoRA) int {
	n := len(l.Active)
	for j, w := range l.Waiting {
		if !contains(l.Active, w) && !contains(l.Waiting[:j], w) {
			n++
		}
	}
	return n
}
