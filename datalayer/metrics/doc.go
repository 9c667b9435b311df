// Package metrics reads model-server engine metrics: the metrics-data-source
// plugin (Source) scrapes each endpoint's Prometheus /metrics page and parses
// it with github.com/prometheus/common/expfmt into Families; the
// core-metrics-extractor plugin (CoreExtractor) maps an engine's metric
// names onto datalayer.Metrics — waiting and running requests, KV-cache
// usage, LoRA adapters, KV block size and count — and custom metrics onto
// float64 endpoint attributes.
//
// Engines are told apart by the endpoint label llm-d.ai/engine-type (vllm
// when absent). The built-in mappings (SPEC §7):
//
//	vllm                 vllm:num_requests_waiting, vllm:num_requests_running,
//	                     vllm:kv_cache_usage_perc (or vllm:gpu_cache_usage_perc),
//	                     vllm:lora_requests_info, vllm:cache_config_info{block_size, num_gpu_blocks}
//	sglang               sglang:num_queue_reqs, sglang:num_running_reqs, sglang:token_usage,
//	                     sglang:cache_config_info{page_size, num_pages}
//	trtllm-serve         trtllm_num_requests_waiting, trtllm_num_requests_running,
//	                     trtllm_kv_cache_utilization, trtllm_kv_cache_tokens_per_block,
//	                     trtllm_kv_cache_max_blocks
//	triton-tensorrt-llm  nv_trt_llm_request_metrics{request_type=waiting|scheduled},
//	                     nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=fraction|tokens_per|max}
//
// EngineConfig adds engines or replaces these, with metric selectors written
// name{label="value"} (Selector).
//
// Cost: the source parses only the families its extractors read (Filter):
// on a realistic vLLM page that is a dozen of several hundred lines, so a
// scrape costs a memory scan of the body plus the parse of those lines. A
// missing required metric, a NaN, infinite or negative value, a duplicate
// series, malformed text in the families read, an oversized body or a failed
// request marks the endpoint's metrics stale (datalayer.Metrics), counted by
// the data layer's Runtime; the other endpoints are unaffected.
package metrics
