package requestcontrol

import (
	"context"
	"net/http"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// DataProducer writes typed data (declared by Produces) on the request or on
// request-scoped endpoint state before scheduling. Producers run in the
// dependency order the config loader computed. Produce is called concurrently
// for different requests; an error means "no data": the Director removes the
// producer's keys from the request so consumers never see stale values.
type DataProducer interface {
	plugins.Producer
	Produce(ctx context.Context, req *scheduling.Request, endpoints []*scheduling.Endpoint) error
}

// Preparer is implemented by data producers with per-request work that
// reads only the request and the producer's configuration, such as hashing
// the prompt. Director.Parse calls Prepare right after parsing, so the work
// runs in the parse stage, which a caller may run ahead of Handle on
// another goroutine (the simulator does). Prepare may run concurrently with
// any hook of other requests; it must not read or write state that other
// requests change, and it leaves its result on the request (req.Data) for
// Produce, which must still work when Prepare did not run or the result no
// longer fits (say, the target model was rewritten after parsing).
type Preparer interface {
	Prepare(ctx context.Context, req *scheduling.Request)
}

// PreRequest runs after the pick, before the request is forwarded: update
// indexes with what the chosen endpoint will now hold, count in-flight load,
// set headers (Request.SetHeader). It must not block on I/O. A plugin that
// starts accounting here ends it in ResponseComplete, which the Director
// calls exactly once for every request whose PreRequest hooks started, even
// when a later stage fails.
type PreRequest interface {
	PreRequest(ctx context.Context, req *scheduling.Request, res *scheduling.Result)
}

// PreRequestFunc adapts a function to PreRequest.
type PreRequestFunc func(ctx context.Context, req *scheduling.Request, res *scheduling.Result)

// PreRequest calls f.
func (f PreRequestFunc) PreRequest(ctx context.Context, req *scheduling.Request, res *scheduling.Result) {
	f(ctx, req, res)
}

// The response hooks take only types of the scheduling layer and below, so a
// scheduling plugin (a session-affinity scorer) can implement them without
// importing this package. served is the endpoint that answered: the primary
// pick unless the adapter reported a fallback. The hooks of one request are
// called in order from one goroutine at a time; hooks of different requests
// run concurrently. A hook must not block and must not keep its arguments
// beyond the call. A panic in a hook is recovered and logged; the other hooks
// still run.

// ResponseHeader is called once when the response headers arrive, before any
// body chunk. h is what the client will receive: the hook may add to it (a
// session token).
type ResponseHeader interface {
	ResponseHeader(ctx context.Context, req *scheduling.Request, served *scheduling.Endpoint, h http.Header)
}

// ResponseChunk is called with every non-empty chunk of the response body as
// it arrives from the engine, in order, before the model name is rewritten
// back. The first call marks the first token of a streaming response.
type ResponseChunk interface {
	ResponseChunk(ctx context.Context, req *scheduling.Request, served *scheduling.Endpoint, chunk []byte)
}

// ResponseComplete is called exactly once for every request whose PreRequest
// hooks started: with the usage read from the response and a nil error when
// the response ended, or with the error that ended the request otherwise
// (client gone, upstream failure, a panic in a later stage; usage then holds
// what was read so far). served is nil when no endpoint answered. This is
// where in-flight accounting is released; it must tolerate a request it did
// not account for.
type ResponseComplete interface {
	ResponseComplete(ctx context.Context, req *scheduling.Request, served *scheduling.Endpoint, usage parsers.Usage, err error)
}
