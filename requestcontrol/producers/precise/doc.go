// Package precise holds the precise prefix-cache producer,
// precise-prefix-cache-producer: it follows the engines' own KV-cache
// events (SPEC §5.2) instead of guessing from routing decisions.
//
// A kvindex.Subscriber receives the events over ZeroMQ — connecting to every
// endpoint's publisher as the data layer adds and removes endpoints, or
// binding one socket the engines connect to — and applies them to a
// kvindex.EventIndex. For each request the producer needs the prompt's token
// ids: the request's own (a prompt of token ids, vLLM's inference/v1/generate
// token_ids, SGLang's input_ids), else those of a Tokenizer the build plugs
// in, else those the engine's render endpoints return
// (/v1/chat/completions/render, /v1/completions/render; with a timeout and a
// cache) when render is enabled. It cuts them into blocks, looks them up and
// writes a *scheduling.PrefixMatch under PrefixMatchKey(its instance name):
// each candidate's run of consecutive blocks from block 0, weighted by tier
// (GPU 1.0, CPU 0.8). A prefix-cache-scorer reads it with
// prefixMatchInfoProducerName: precise-prefix-cache-producer.
//
// Without token ids the producer reports no data (an error the Director logs
// with the reason; the scorer then scores 0): it never guesses.
//
// With speculativeIndexing, a pick credits the chosen endpoint with the
// request's blocks for speculativeTTL, until the engine's own events confirm
// them; the match is then the larger of the two.
//
// With indexBackend redis the index lives in a Redis (or Valkey) server
// that every replica of the picker shares (kvindex/redisindex): any replica
// may follow the events — all of them, applying the same batches, is
// harmless — and one in kvEventsConfig mode none follows none and reads
// what the others write. A lookup is one round trip bounded by
// redis.timeout; when the server is down or slow the request goes on
// without prefix data (with speculative indexing, with this replica's own
// recent picks only) and BackendStats counts the errors.
package precise
