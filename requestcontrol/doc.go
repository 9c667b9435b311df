// Package requestcontrol runs the request pipeline of SPEC §3 around the
// scheduler. Director.HandleRequest takes a request as the gateway adapter
// received it through
//
//	parse         the parser chosen by the longest path suffix (parsers.Selector); bad body → 400, too big → 413
//	model rewrite the x-llm-d-model-name-rewrite header, then InferenceModelRewrite rules (ModelRewrites),
//	              a weighted draw from the injected random source; the body is re-serialised
//	objective     x-llm-d-inference-objective → priority (Objectives); fairness id (FairnessID)
//	admission     the gate (Director.Admission): SaturationAdmitter sheds priority < 0 at saturation
//	              with 429 rejected-saturated; flow control takes this place when it is on
//	candidates    the pool (Pool) restricted by the gateway's subset hint (Subset); none → 503
//	producers     DataProducer plugins in dependency order
//	admitters     custom Admitter plugins; a denial is a 429 with a reason
//	scheduling    the scheduler's profiles; all filtered → 429
//	pre-request   PreRequest hooks: index updates, in-flight counts, extra headers
//
// and returns an Exchange: the body and headers to forward (the destination
// header is always the Director's; inbound copies are never trusted), and
// the response side, which runs the ResponseHeader, ResponseChunk and
// ResponseComplete hooks, reads usage with the parser, and rewrites the
// model name back to the client's, streaming or not. ResponseComplete runs
// exactly once for every request whose pre-request hooks started: at the end
// of the response, or when the client goes away, the upstream fails, the
// adapter closes early or a plugin panics, so in-flight accounting is always
// released (LoadTracker is the shared counter).
//
// Every refusal is a *Rejection with the HTTP status and the
// x-llm-d-request-dropped-reason value. Director.Schedule is the
// lower-level step from a parsed request and its candidates to the pick.
//
// The subpackages hold the stock plugins: producers/ (the prefix and
// in-flight load producers) and saturation/ (the utilization and concurrency
// detectors). requestcontroltest drives a Director with fake transport
// events.
package requestcontrol
