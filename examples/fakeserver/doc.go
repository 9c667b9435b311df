// Package fakeserver is a fake OpenAI-compatible model server for tests,
// demos and load tests of the picker (SPEC §8): no model, but the behaviour
// a picker routes on.
//
//   - API: /v1/completions and /v1/chat/completions (streaming as
//     server-sent events, one token per event, with
//     stream_options.include_usage), /v1/models, and vLLM's render endpoints
//     (/v1/completions/render, /v1/chat/completions/render) returning the
//     token ids of a simple whitespace tokenizer (Tokenize, RenderChat).
//   - State: a continuous batch of MaxRunning requests with a queue in front,
//     a paged KV cache of KVBlocks blocks with prefix caching and LRU
//     eviction, and MaxLoRAs adapter slots (any model name other than the
//     base model is served as an adapter).
//   - Latency: prefill costs PrefillPerToken per uncached prompt token, so
//     cached prefix blocks skip it; each output token costs DecodePerToken.
//   - /metrics in vLLM's names: vllm:num_requests_waiting,
//     vllm:num_requests_running, vllm:kv_cache_usage_perc,
//     vllm:lora_requests_info, vllm:cache_config_info and the prefix cache
//     counters, all reflecting the simulated state.
//   - KV events (optional): BlockStored / BlockRemoved / AllBlocksCleared in
//     vLLM's msgpack array format on a ZeroMQ PUB socket, bound or connected,
//     topic kv@<host:port>@<model>.
//
// Every response carries x-served-by: host:port, so a test (or a person with
// curl) sees where a request went. StartCluster runs several servers in one
// process; "eppkit fakeserver --count N --base-port P" does it from the
// command line.
package fakeserver
