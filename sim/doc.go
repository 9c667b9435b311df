// Package sim is a policy simulator: a deterministic discrete-event
// simulation of a cluster of vLLM-like model servers, in virtual time,
// driving the library's real request pipeline (config.Build's Director, with
// the user's EndpointPickerConfig) so a routing policy can be evaluated
// offline with exactly the plugin code that runs in production. Nothing here
// re-implements a scorer.
//
// # The loop
//
// Run simulates each configuration in turn over a fresh copy of the same
// workload. Events (request arrivals, the end of an engine step, metrics
// scrapes, KV-event deliveries) are kept in a heap ordered by virtual time
// and then by scheduling order, so the same Options and seed give
// byte-identical results. Plugins get the virtual clock and seeded random
// sources through config.Options. Every request goes through the Director
// as a /v1/completions body: its first stage (Director.Parse: parsing, and
// producers' request-only work such as prompt hashing) runs ahead on a
// second goroutine, which reads no simulated state, and its second stage
// (Director.Handle: admission, producers, scheduling, pre-request hooks)
// runs in the event loop at the request's arrival. Admission and rejections
// happen as in production; the response (with its usage, cached tokens
// included) goes back through the Exchange, so in-flight accounting and
// response hooks run too. With the flowControl feature gate on, requests
// wait in the real flow controller: the simulator leaves its background
// dispatcher stopped and dispatches, one item at a time in virtual time,
// after every arrival, engine step and scrape; a request's TTFT includes
// its wait at the gateway, and what waits past its TTL is rejected.
//
// # The servers
//
// Each server (ServerParams; DefaultServerParams is an 8B model on one
// H100-class GPU) is an engine in the manner of vLLM: a FCFS waiting queue
// and a running batch advanced one step at a time. A step's token budget
// (MaxBatchedTokens) is spent on one token per decoding sequence, then on
// chunks of prefills, then on admitting waiting requests while MaxSeqs and
// the KV cache allow. A step costs StepOverhead + PrefillPerToken per
// prefill token computed + DecodePerSeq per decoding sequence (+ LoRALoad
// when it loads an adapter). The step that completes a prefill yields the
// first token (TTFT); each later step one more.
//
// The KV cache is paged (KVBlocks blocks of BlockTokens tokens) with prefix
// caching by chained block hash (the root folds in the model or adapter
// name): a computed full prompt block is registered under its hash, a later
// request reuses the longest cached run of its leading blocks, and
// unreferenced blocks stay cached on a free queue until evicted, least
// recently freed first and, within a request, tail first. When a decoding
// sequence needs a block and none is free, the most recently admitted
// sequence is preempted and later recomputed. An answer's full blocks are
// cached too when a later prompt repeats it (Request.OutputUnits: the next
// turn of a chat). LoRA adapters occupy MaxLoRAs slots; a request whose
// adapter is not loaded loads it into a free or idle slot, or waits.
//
// Servers publish their metrics (waiting, running, KV usage, LoRA, block
// size and count) to the picker every ScrapeInterval, so the picker sees
// stale data as in production. When a configuration has a precise prefix
// producer, servers also publish KV events (BlockStored with token ids and
// parent hash, BlockRemoved on eviction) that reach its index after
// KVEventDelay, and the producer is given the simulator's tokenizer.
//
// # Workloads
//
// A request's prompt is a sequence of content units, one per KV block:
// equal units are equal text (each token is 4 bytes derived from the unit's
// id), so the engines' prefix cache, the approximate producer's hashing and
// the KV events all agree on what is shared. Tenants is BENCHMARKS.md P7's
// shared-prefix workload; Chat has multi-turn sessions whose prompts grow;
// LoRAMix spreads requests over adapters; Mooncake replays a Mooncake JSONL
// trace, streamed. Arrivals follow a linear rate Ramp, Poisson or, with
// Ramp.Burstiness, gamma-distributed gaps (bursts and lulls at the same mean
// rate, as vLLM's benchmark_serving --burstiness).
//
// # Results
//
// Each configuration's Result has TTFT and end-to-end percentiles, output
// tokens/s, the engine-side prefix-cache hit rate (cached prompt tokens
// over prompt tokens: the truth, not a scorer's estimate), per-server
// request counts and rejections. Results writes the side-by-side table,
// SPEC §10's results.json, CSV, and the chart data (Series); Series.WriteSVG
// draws the charts (TTFT CDF, per-server load over time) as SVG images with
// the standard library, and the nested module sim/charts draws them as PNG
// images with gonum/plot.
package sim
