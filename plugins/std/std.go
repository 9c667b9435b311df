package std

import (
	"github.com/eppkit/eppkit/parsers/openai"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/requestcontrol/producers/prefix"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/filters"
	"github.com/eppkit/eppkit/scheduling/pickers"
	"github.com/eppkit/eppkit/scheduling/profiles"
	"github.com/eppkit/eppkit/scheduling/scorers"
)

// Categories of the stock plugins, as Info.Category reports them.
const (
	CategoryScorer         = "scorer"
	CategoryFilter         = "filter"
	CategoryPicker         = "picker"
	CategoryProfileHandler = "profile-handler"
	CategoryParser         = "parser"
	CategoryProducer       = "producer"
)

// Registry returns a new registry holding every in-tree plugin type. Each
// call returns a fresh registry the caller may add to.
func Registry() *plugins.Registry {
	r := plugins.NewRegistry()
	var (
		scorer, filter, picker = plugins.Category(CategoryScorer), plugins.Category(CategoryFilter), plugins.Category(CategoryPicker)
		handler, parser        = plugins.Category(CategoryProfileHandler), plugins.Category(CategoryParser)
		stable                 = plugins.Stability("stable")
		desc                   = plugins.Description
	)

	plugins.Register[*scorers.Queue](r, "queue-scorer", scorer, stable, desc("prefers short waiting queues: (maxW − W)/(maxW − minW) over the candidates"))
	plugins.Register[*scorers.RunningRequests](r, "running-requests-size-scorer", scorer, stable, desc("prefers fewer running requests: (maxR − R)/(maxR − minR) over the candidates"))
	plugins.Register[*scorers.KVCacheUtilization](r, "kv-cache-utilization-scorer", scorer, stable, desc("prefers free KV cache: 1 − kvUsage"))
	plugins.Register[*scorers.LoRAAffinity](r, "lora-affinity-scorer", scorer, stable, desc("prefers endpoints with the LoRA adapter active (1), a free slot (0.8), the adapter loading (0.6)"))
	plugins.Register[*scorers.LoadAware](r, "load-aware-scorer", scorer, stable, desc("0.5 for an empty queue, else 0.5·(1 − min(W, threshold)/threshold)"))

	plugins.Register[*scorers.PrefixCache](r, "prefix-cache-scorer", scorer, stable, desc("prefers endpoints holding more of the prompt's prefix: (1−w)·matched/total + w·min(1, matchedTokens/scale)²"))
	plugins.Register[*scorers.NoHitLRU](r, "no-hit-lru-scorer", scorer, plugins.Stability("beta"), desc("spreads cold (no prefix hit anywhere) requests to the endpoints least recently given one"))

	plugins.Register[*filters.LabelSelector](r, "label-selector-filter", filter, stable, desc("keeps endpoints whose labels match matchLabels and matchExpressions"))
	plugins.Register[*filters.LoRAAffinity](r, "lora-affinity-filter", filter, stable, desc("keeps endpoints holding the LoRA adapter, or (rarely, or when none do) those with a free slot"))

	plugins.Register[*filters.PrefixAffinity](r, "prefix-cache-affinity-filter", filter, plugins.Stability("beta"), desc("keeps the endpoints whose prefix match is near the best when the best is high enough"))

	plugins.Register[*pickers.MaxScore](r, "max-score-picker", picker, stable, desc("highest total, ties broken at random; fallbacks by descending total"))
	plugins.Register[*pickers.Random](r, "random-picker", picker, stable, desc("uniformly random endpoints, ignoring scores"))
	plugins.Register[*pickers.WeightedRandom](r, "weighted-random-picker", picker, stable, desc("random endpoints with probability proportional to their totals"))

	plugins.Register[*profiles.SingleProfile](r, "single-profile-handler", handler, stable, desc("runs the only configured profile"))
	plugins.Register[*profiles.HeaderProfile](r, "header-profile-handler", handler, stable, desc("runs the profile named by a request header"))

	plugins.Register[*prefix.Approx](r, scheduling.DefaultPrefixProducer, plugins.Category(CategoryProducer), stable,
		plugins.DefaultFor(scheduling.PrefixMatchKey(scheduling.DefaultPrefixProducer)),
		desc("hashes the prompt into chained blocks, matches them against an index of earlier picks, credits the pick"))

	plugins.Register[*openai.Parser](r, "openai-parser", parser, stable, desc("OpenAI-compatible completions and chat/completions bodies"))
	return r
}
