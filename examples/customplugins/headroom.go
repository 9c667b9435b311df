package customplugins

import (
	"context"
	"errors"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/scheduling"
)

// PromptTokensKey names the request's prompt length in tokens, the value
// PromptTokens produces and KVHeadroom consumes.
var PromptTokensKey = plugins.NewKey[int]("prompt-tokens")

var (
	_ requestcontrol.DataProducer = (*PromptTokens)(nil)
	_ scheduling.Scorer           = (*KVHeadroom)(nil)
	_ plugins.Consumer            = (*KVHeadroom)(nil)
)

// PromptTokens is a data producer: before scheduling it writes the
// request's prompt length in tokens (its token ids, or the prompt bytes / 4)
// under PromptTokensKey. It has no parameters and no state.
type PromptTokens struct{}

// Produces declares the keys Produce writes, for the dependency graph.
func (*PromptTokens) Produces() []plugins.AnyKey { return []plugins.AnyKey{PromptTokensKey} }

// Produce implements requestcontrol.DataProducer. An error means "no data":
// the Director removes the key, and consumers see none.
func (*PromptTokens) Produce(_ context.Context, req *scheduling.Request, _ []*scheduling.Endpoint) error {
	if req.Body == nil {
		return errors.New("no parsed body")
	}
	plugins.Set(&req.Data, PromptTokensKey, req.Body.TokenEstimate())
	return nil
}

// KVHeadroom is a scorer that prefers endpoints whose free KV cache can hold
// the whole prompt: min(1, free tokens / prompt tokens), with free tokens =
// (1 − kvUsage) × GPU blocks × block size. Endpoints that do not report
// their cache size, and every endpoint when the prompt length is unknown,
// score 0.
type KVHeadroom struct{}

// Consumes declares the keys Score reads: the graph then runs their
// producer first, and auto-creates PromptTokens when nobody configured it.
func (*KVHeadroom) Consumes() []plugins.AnyKey { return []plugins.AnyKey{PromptTokensKey} }

// Score implements scheduling.Scorer.
func (*KVHeadroom) Score(_ context.Context, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	need, ok := plugins.Get(&req.Data, PromptTokensKey)
	if !ok || need <= 0 {
		return
	}
	for i, e := range eps {
		m := &e.Metrics
		if !m.Usable() || m.GPUBlocks == 0 || m.BlockSize == 0 {
			continue
		}
		free := (1 - m.KVUsage) * float64(m.GPUBlocks*m.BlockSize)
		scores[i] = min(1, free/float64(need))
	}
}
