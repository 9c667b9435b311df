package scorers

import (
	"context"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/scheduling"
)

// LoRA affinity scores, from best to worst.
const (
	LoRAActive   = 1.0 // the adapter is loaded and running on the endpoint
	LoRAFreeSlot = 0.8 // the endpoint can load one more adapter
	LoRAWaiting  = 0.6 // the adapter is queued to load on the endpoint
	LoRAFull     = 0.0 // no slot, adapter absent
)

// LoRAAffinity is the lora-affinity-scorer: it prefers endpoints that already
// serve the requested LoRA adapter (the request's TargetModel, or its
// IncomingModel when no target is set). In order of precedence an endpoint
// scores LoRAActive when the adapter is active there, LoRAFreeSlot when
// active + waiting < max, LoRAWaiting when the adapter is waiting to load
// there, and LoRAFull otherwise.
//
// Like llm-d-router, active + waiting counts distinct adapters: engines report
// an adapter that is both running and waiting in both lists, and it occupies
// one slot. An endpoint that reports no maximum (0, e.g. LoRA disabled) has no
// free slot. It has no parameters.
type LoRAAffinity struct{}

var _ scheduling.Scorer = (*LoRAAffinity)(nil)

// Score implements scheduling.Scorer.
func (*LoRAAffinity) Score(_ context.Context, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	adapter := req.TargetModel
	if adapter == "" {
		adapter = req.IncomingModel
	}
	for i, e := range eps {
		if !e.Metrics.Usable() {
			continue
		}
		l := &e.Metrics.LoRA
		active, waiting := l.Has(adapter)
		switch {
		case active:
			scores[i] = LoRAActive
		case loadedAdapters(l) < l.Max:
			scores[i] = LoRAFreeSlot
		case waiting:
			scores[i] = LoRAWaiting
		default:
			scores[i] = LoRAFull
		}
	}
}

// loadedAdapters counts the distinct adapters in l.Active and l.Waiting. The
// lists hold a handful of names, so the quadratic scan beats a set.
func loadedAdapters(l *datalayer.LoRA) int {
	n := len(l.Active)
	for j, w := range l.Waiting {
		if !contains(l.Active, w) && !contains(l.Waiting[:j], w) {
			n++
		}
	}
	return n
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
