package std

import (
	"github.com/eppkit/eppkit/datalayer/discovery"
	"github.com/eppkit/eppkit/datalayer/metrics"
	"github.com/eppkit/eppkit/datalayer/models"
	"github.com/eppkit/eppkit/flowcontrol"
	"github.com/eppkit/eppkit/parsers/anthropic"
	"github.com/eppkit/eppkit/parsers/openai"
	"github.com/eppkit/eppkit/parsers/passthrough"
	"github.com/eppkit/eppkit/parsers/sglang"
	"github.com/eppkit/eppkit/parsers/vllmhttp"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/requestcontrol/producers/inflight"
	"github.com/eppkit/eppkit/requestcontrol/producers/precise"
	"github.com/eppkit/eppkit/requestcontrol/producers/prefix"
	"github.com/eppkit/eppkit/requestcontrol/saturation"
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
	// CategorySaturationDetector is a flow-control saturation detector (also
	// usable as a scheduling filter).
	CategorySaturationDetector = "saturation-detector"
	// CategoryDataSource, CategoryExtractor and CategoryDiscovery are the
	// data layer's: datalayer.DataSource, datalayer.Extractor and
	// datalayer.Source (endpoint discovery).
	CategoryDataSource = "data-source"
	CategoryExtractor  = "extractor"
	CategoryDiscovery  = "discovery"
	// CategoryFairnessPolicy, CategoryOrderingPolicy and
	// CategoryUsageLimitPolicy are flow control's: flowcontrol.FairnessPolicy,
	// flowcontrol.OrderingPolicy and flowcontrol.UsageLimitPolicy.
	CategoryFairnessPolicy   = "fairness-policy"
	CategoryOrderingPolicy   = "ordering-policy"
	CategoryUsageLimitPolicy = "usage-limit-policy"
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

	f := plugins.Formula

	plugins.Register[*scorers.Queue](r, "queue-scorer", scorer, stable,
		desc("prefers endpoints with short waiting queues, relative to the other candidates"),
		f("(maxW − W)/(maxW − minW) over the candidates' waiting queues W; all equal → 1"))
	plugins.Register[*scorers.RunningRequests](r, "running-requests-size-scorer", scorer, stable,
		desc("prefers endpoints running fewer requests, relative to the other candidates"),
		f("(maxR − R)/(maxR − minR) over the candidates' running requests R; all equal → 1"))
	plugins.Register[*scorers.KVCacheUtilization](r, "kv-cache-utilization-scorer", scorer, stable,
		desc("prefers endpoints with free KV cache"),
		f("1 − kvUsage"))
	plugins.Register[*scorers.LoRAAffinity](r, "lora-affinity-scorer", scorer, stable,
		desc("prefers endpoints that already serve the request's LoRA adapter, then those that can load it"),
		f("1 adapter active · 0.8 free adapter slot · 0.6 adapter waiting to load · 0 full"))
	plugins.Register[*scorers.LoadAware](r, "load-aware-scorer", scorer, stable,
		desc("prefers short waiting queues on an absolute scale, whatever the other candidates' queues"),
		f("W = 0 → 0.5; else 0.5·(1 − min(W, threshold)/threshold)"))

	plugins.Register[*scorers.PrefixCache](r, "prefix-cache-scorer", scorer, stable,
		desc("prefers endpoints holding more of the prompt's prefix, as a prefix producer (approximate by default) reports it"),
		f("(1 − w)·matched/total + w·min(1, matchedTokens/matchLengthScaleTokens)², w = matchLengthWeight"))
	plugins.Register[*scorers.NoHitLRU](r, "no-hit-lru-scorer", scorer, plugins.Stability("beta"),
		desc("spreads cold (no prefix hit anywhere) requests to the endpoints least recently given one"),
		f("cold request: 1 − r/(n − 1) for least-recently-used rank r of n; warm request: 0.5 everywhere"))

	plugins.Register[*filters.LabelSelector](r, "label-selector-filter", filter, stable,
		desc("keeps endpoints whose labels match matchLabels and matchExpressions, like a Kubernetes label selector"))
	plugins.Register[*filters.LoRAAffinity](r, "lora-affinity-filter", filter, stable,
		desc("keeps endpoints holding the LoRA adapter, or (rarely, or when none do) those with a free slot"),
		f("both groups non-empty: holders with probability threshold, else those with a free slot"))

	plugins.Register[*filters.PrefixAffinity](r, "prefix-cache-affinity-filter", filter, plugins.Stability("beta"),
		desc("keeps the endpoints whose prefix match is near the best when the best is high enough"),
		f("best ratio ≥ affinityThreshold → keep ratio ≥ best − tolerance; else keep all"))

	plugins.Register[*pickers.MaxScore](r, "max-score-picker", picker, stable,
		desc("highest total, ties broken at random; fallbacks by descending total"),
		f("argmax Σ weight·score"))
	plugins.Register[*pickers.Random](r, "random-picker", picker, stable,
		desc("uniformly random endpoints, ignoring scores"))
	plugins.Register[*pickers.WeightedRandom](r, "weighted-random-picker", picker, stable,
		desc("random endpoints with probability proportional to their totals"),
		f("P(e) = total(e)/Σ totals; uniform when every total is 0"))

	plugins.Register[*profiles.SingleProfile](r, "single-profile-handler", handler, stable, desc("runs the only configured profile"))
	plugins.Register[*profiles.HeaderProfile](r, "header-profile-handler", handler, stable, desc("runs the profile named by a request header"))

	plugins.Register[*prefix.Approx](r, scheduling.DefaultPrefixProducer, plugins.Category(CategoryProducer), stable,
		plugins.DefaultFor(scheduling.PrefixMatchKey(scheduling.DefaultPrefixProducer)),
		desc("hashes the prompt into chained blocks, matches them against an index of earlier picks, credits the pick"))
	plugins.Register[*precise.Producer](r, precise.TypeName, plugins.Category(CategoryProducer), plugins.Stability("beta"),
		desc("follows the engines' KV-cache events over ZeroMQ and matches the prompt's token blocks against what each endpoint holds, by tier"),
		f("matched = Σ tier weight over each endpoint's run of consecutive blocks from block 0 (GPU 1.0, CPU 0.8)"))

	plugins.Register[*openai.Parser](r, "openai-parser", parser, stable, desc("OpenAI-compatible completions, chat/completions, embeddings, responses, conversations and the render paths"))
	plugins.Register[*anthropic.Parser](r, "anthropic-parser", parser, stable, desc("Anthropic messages and messages/count_tokens bodies; split stream usage"))
	plugins.Register[*vllmhttp.Parser](r, "vllmhttp-parser", parser, stable, desc("vLLM inference/v1/generate bodies with pre-tokenized token_ids"))
	plugins.Register[*sglang.Parser](r, "sglang-parser", parser, plugins.Stability("beta"), desc("SGLang native generate bodies (text or input_ids); usage from meta_info"))
	plugins.Register[*passthrough.Parser](r, "passthrough-parser", parser, stable, desc("claims no path: the fallback for paths no other parser claims; never rejects a body"))

	plugins.Register[*scorers.ActiveRequest](r, "active-request-scorer", scorer, stable,
		desc("prefers endpoints with fewer requests in flight from this picker (its own count, current between scrapes)"),
		f("n ≤ idleThreshold → 1; else maxBusyScore·(max n − n)/max n over the candidates"))
	plugins.Register[*scorers.TokenLoad](r, "token-load-scorer", scorer, stable,
		desc("prefers endpoints with fewer prompt tokens in flight, counting this request's uncached tokens"),
		f("1 − min(t, T)/T, t = in-flight prompt tokens + this request's uncached tokens, T = queueThresholdTokens"))
	plugins.Register[*scorers.SessionAffinity](r, "session-affinity-scorer", scorer, stable,
		desc("keeps a session on the endpoint named by its session token header, which it writes back on the response"),
		f("1 for the session's endpoint, 0 otherwise"))
	plugins.Register[*inflight.Producer](r, scorers.DefaultInFlightProducer, plugins.Category(CategoryProducer), stable,
		plugins.DefaultFor(scorers.InFlightKey(scorers.DefaultInFlightProducer)),
		desc("counts in-flight requests and prompt tokens per endpoint (this picker's, or every replica's with indexBackend redis); tokens released at the first chunk"))
	plugins.Register[*saturation.Utilization](r, "utilization-detector", plugins.Category(CategorySaturationDetector), stable,
		desc("pool saturation from scraped queue and KV metrics; as a filter, drops endpoints over their limits × (1 + headroom)"),
		f("mean over endpoints of max(W/queueDepthThreshold, kv/kvCacheUtilThreshold)"))
	plugins.Register[*saturation.Concurrency](r, "concurrency-detector", plugins.Category(CategorySaturationDetector), stable,
		desc("pool saturation from the picker's own in-flight count; as a filter, drops endpoints over their limits × (1 + headroom)"),
		f("in-flight requests/(endpoints × maxConcurrency); tokens: in-flight tokens/(endpoints × maxTokenConcurrency); hybrid: the larger"))

	dataSource, extractor, disc := plugins.Category(CategoryDataSource), plugins.Category(CategoryExtractor), plugins.Category(CategoryDiscovery)
	plugins.Register[*metrics.Source](r, "metrics-data-source", dataSource, stable, desc("scrapes each endpoint's Prometheus /metrics (bounded workers, timeout, size limit, TLS) every 50ms"))
	plugins.Register[*metrics.CoreExtractor](r, "core-metrics-extractor", extractor, stable, desc("reads queue, running, KV usage, LoRA and KV block metrics of vllm, sglang, trtllm-serve, triton-tensorrt-llm or a configured engine"))
	plugins.Register[*models.Source](r, "models-data-source", dataSource, plugins.Stability("beta"), desc("polls each endpoint's GET /v1/models into the models attribute"))
	plugins.Register[*models.Extractor](r, "models-data-extractor", extractor, plugins.Stability("beta"), desc("stores a models-data-source's list in the models attribute"))
	plugins.Register[*discovery.File](r, "file-discovery", disc, stable, desc("endpoints from a YAML or JSON file, optionally reloaded when it changes"))
	plugins.Register[*discovery.Static](r, "static-discovery", disc, stable, desc("a fixed list of endpoints"))

	fairness, ordering, usage := plugins.Category(CategoryFairnessPolicy), plugins.Category(CategoryOrderingPolicy), plugins.Category(CategoryUsageLimitPolicy)
	plugins.Register[*flowcontrol.GlobalStrict](r, "global-strict-fairness-policy", fairness, stable, desc("serves the flow whose head comes first in the band's order: one queue across tenants"))
	plugins.Register[*flowcontrol.RoundRobin](r, "round-robin-fairness-policy", fairness, stable, desc("serves the band's non-empty flows in turn, one request each"))
	plugins.Register[*flowcontrol.FCFS](r, "fcfs-ordering-policy", ordering, stable, desc("first come, first served"))
	plugins.Register[*flowcontrol.EDF](r, "edf-ordering-policy", ordering, stable, desc("earliest deadline first: the request's own deadline or its queue TTL, whichever is sooner"))
	plugins.Register[*flowcontrol.SLODeadline](r, "slo-deadline-ordering-policy", ordering, plugins.Stability("beta"),
		desc("earliest TTFT deadline first; requests without the header last"),
		f("deadline = arrival + x-llm-d-slo-ttft-ms"))
	plugins.Register[*flowcontrol.StaticUsageLimit](r, "static-usage-limit-policy", usage, stable, desc("one saturation ceiling, threshold, for every band"))
	plugins.Register[*flowcontrol.PriorityHoldback](r, "priority-holdback-policy", usage, plugins.Stability("beta"),
		desc("ceilings fall linearly from maxCeiling (highest band) to minCeiling (lowest), holding lower bands back first"),
		f("ceiling = minCeiling + r·(maxCeiling − minCeiling), r from 0 (lowest band) to 1 (highest) by band rank or priority value"))
	return r
}
