package schedulingtest

import (
	"maps"
	"strings"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/scheduling"
)

// RequestBuilder builds a *scheduling.Request fluently. Start with Req.
type RequestBuilder struct {
	r    scheduling.Request
	with []func(*scheduling.Request)
}

// Req starts a request for model (both incoming and target model), with ID
// "test-request", priority 0, no headers and no body.
func Req(model string) *RequestBuilder {
	return &RequestBuilder{r: scheduling.Request{ID: "test-request", IncomingModel: model, TargetModel: model}}
}

// ID sets the request id.
func (b *RequestBuilder) ID(id string) *RequestBuilder { b.r.ID = id; return b }

// Target sets the target model (after rewrite), e.g. a LoRA adapter.
func (b *RequestBuilder) Target(model string) *RequestBuilder { b.r.TargetModel = model; return b }

// Header sets a request header; the name is lower-cased as the pipeline does.
func (b *RequestBuilder) Header(name, value string) *RequestBuilder {
	if b.r.Headers == nil {
		b.r.Headers = map[string]string{}
	}
	b.r.Headers[strings.ToLower(name)] = value
	return b
}

// Priority sets the request's priority (negative: sheddable).
func (b *RequestBuilder) Priority(p int) *RequestBuilder { b.r.Priority = p; return b }

// Prompt gives the request a completions body with prompt text.
func (b *RequestBuilder) Prompt(text string) *RequestBuilder {
	b.r.Body = &parsers.Body{API: "completions", Model: b.r.IncomingModel, Prompt: text}
	return b
}

// Body sets the parsed body.
func (b *RequestBuilder) Body(body *parsers.Body) *RequestBuilder { b.r.Body = body; return b }

// Trace makes the request record a decision trace.
func (b *RequestBuilder) Trace() *RequestBuilder { b.r.Trace = &scheduling.Trace{}; return b }

// With registers fn to adjust the request at the end of Build, e.g. to set
// typed per-request data.
func (b *RequestBuilder) With(fn func(*scheduling.Request)) *RequestBuilder {
	b.with = append(b.with, fn)
	return b
}

// Build returns a new request; each call returns a distinct value with its
// own headers, data and trace.
func (b *RequestBuilder) Build() *scheduling.Request {
	r := b.r
	r.Headers = maps.Clone(b.r.Headers)
	r.AddedHeaders = maps.Clone(b.r.AddedHeaders)
	r.Data = b.r.Data.Clone()
	if b.r.Trace != nil {
		r.Trace = &scheduling.Trace{}
	}
	if b.r.Body != nil {
		body := *b.r.Body
		r.Body = &body
	}
	for _, fn := range b.with {
		fn(&r)
	}
	return &r
}
