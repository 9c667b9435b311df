// Package extproc is the Envoy ext-proc adapter (SPEC §8): an
// envoy.service.ext_proc.v3.ExternalProcessor that runs eppkit's request
// pipeline for a gateway (Envoy, or any Gateway API implementation that
// speaks ext_proc).
//
// One Process stream carries one HTTP request, with bodies in
// FULL_DUPLEX_STREAMED mode both ways (Envoy's processing mode: request and
// response headers SEND, bodies FULL_DUPLEX_STREAMED, trailers SEND or
// SKIP):
//
//   - Request headers are kept; with end_of_stream (no body) the pipeline
//     runs at once. Body chunks are buffered (bounded by the Director's
//     limit: a larger body is a 413) until end_of_stream, or until the
//     trailers, which end the body too.
//   - Then the processor answers the request headers: a header mutation
//     setting x-gateway-destination-endpoint (the pick, then its fallbacks),
//     the corrected content-length and the headers plugins added, removing
//     untrusted headers the client sent; clear_route_cache; and dynamic
//     metadata {"envoy.lb": {"x-gateway-destination-endpoint": ...}} equal to
//     the header. The body follows as StreamedBodyResponse chunks of at most
//     64 KiB, the last one marked end_of_stream (an empty body is one empty
//     chunk), then a trailers response if trailers came.
//   - A rejection is an ImmediateResponse with the rejection's status, its
//     x-llm-d-request-dropped-reason header and an OpenAI-style error body.
//   - The subset hint comes from the request's metadata
//     envoy.lb.subset_hint / x-gateway-destination-endpoint-subset.
//   - Response headers go through the response hooks (their changes come
//     back as a header mutation; content-length is removed when the model
//     name is rewritten back). Response body chunks go back as soon as they
//     arrive, the model name restored, usage read on the way; a
//     non-streaming body is buffered (bounded) and sent back whole at its
//     end. With ServedEndpointMetadata the endpoint that served is read from
//     envoy.lb / x-gateway-destination-endpoint-served.
//   - However the stream ends (response complete, the gateway closing it
//     early or resetting it) the request's Exchange is closed, so in-flight
//     accounting is released.
//
// Serve runs the processor with a gRPC health service and drains gracefully.
// The envoytest package is a client speaking Envoy's side of the protocol;
// prommetrics exports the picker's metrics to Prometheus; cmd/eppkit-extproc
// is the server binary.
package extproc
