package requestcontrol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// Named pairs a plugin with its instance name for logs and errors.
type Named[T any] struct {
	Name   string
	Plugin T
}

// Director runs the request pipeline of SPEC §3. HandleRequest takes a raw
// request through parse, model rewrite, objective, the admission gate,
// candidates, data producers, custom admitters, scheduling and pre-request
// hooks, and returns an Exchange that carries the response back through the
// response hooks. Schedule is the lower-level step from the parsed request
// and its candidates.
//
// Build a Director as a struct literal (config.Build does) and do not change
// its fields while it serves; objectives and model rewrites, which change at
// run time, are set with SetObjectives and SetModelRewrites. A Director is
// safe for concurrent use.
type Director struct {
	Producers   []Named[DataProducer] // in dependency order
	Scheduler   *scheduling.Scheduler
	PreRequests []Named[PreRequest]
	Logger      *slog.Logger // nil discards

	// Parsers chooses the parser for a request path; nil rejects every
	// HandleRequest with 400.
	Parsers *parsers.Selector
	// Pool supplies the endpoints; nil means none (503).
	Pool Pool
	// Admission is the admission gate, run before candidates are chosen: the
	// default saturation admission (SaturationAdmitter), or flow control,
	// which blocks until the request is dispatched. Nil admits everything.
	Admission Admitter
	// Admitters are custom admission plugins, run in order after the data
	// producers and before scheduling.
	Admitters []Named[Admitter]
	// Response hooks, each in configuration order.
	ResponseHeaders   []Named[ResponseHeader]
	ResponseChunks    []Named[ResponseChunk]
	ResponseCompletes []Named[ResponseComplete]
	// Limits bound the buffered request and response bodies.
	Limits Limits
	// Rand draws model-rewrite targets; nil means a source seeded with 1.
	Rand *rand.Rand
	// Metrics, when set, receives the duration of each stage of every
	// request (see Instrument, which also times every plugin).
	Metrics Metrics

	objectives atomic.Pointer[Objectives]
	rewrites   atomic.Pointer[ModelRewrites]
	once       sync.Once
	log        *slog.Logger
	rnd        *rand.Rand
	stats      struct{ rejected, panics, tooLarge atomic.Uint64 }
}

// Limits bound what the Director buffers. Zero fields take the defaults.
type Limits struct {
	// MaxRequestBytes is the largest request body accepted (413 above);
	// default 16 MiB.
	MaxRequestBytes int64
	// MaxResponseBytes is the largest non-streaming response body buffered
	// to rewrite the model name and read usage; a larger one is passed
	// through as is and counted in Stats.ResponsesTooLarge. Default 16 MiB.
	MaxResponseBytes int64
	// MaxLineBytes is the longest line of a streaming response held back to
	// rewrite it; a longer one is passed through. Default 1 MiB.
	MaxLineBytes int
}

// Default limits.
const (
	DefaultMaxRequestBytes  = 16 << 20
	DefaultMaxResponseBytes = 16 << 20
	DefaultMaxLineBytes     = 1 << 20
)

func (l Limits) request() int64 {
	if l.MaxRequestBytes > 0 {
		return l.MaxRequestBytes
	}
	return DefaultMaxRequestBytes
}

func (l Limits) response() int64 {
	if l.MaxResponseBytes > 0 {
		return l.MaxResponseBytes
	}
	return DefaultMaxResponseBytes
}

func (l Limits) line() int {
	if l.MaxLineBytes > 0 {
		return l.MaxLineBytes
	}
	return DefaultMaxLineBytes
}

// Stats are the Director's counters since it was built.
type Stats struct {
	Rejected          uint64 // requests rejected by HandleRequest
	Panics            uint64 // plugin panics recovered
	ResponsesTooLarge uint64 // non-streaming responses passed through unbuffered
}

// Stats returns the counters.
func (d *Director) Stats() Stats {
	return Stats{d.stats.rejected.Load(), d.stats.panics.Load(), d.stats.tooLarge.Load()}
}

// SetObjectives replaces the objective table. It is safe while serving.
func (d *Director) SetObjectives(o Objectives) { d.objectives.Store(&o) }

// SetModelRewrites replaces the model rewrite rules (nil: none). It is safe
// while serving.
func (d *Director) SetModelRewrites(m *ModelRewrites) { d.rewrites.Store(m) }

func (d *Director) init() {
	d.once.Do(func() {
		d.log = d.Logger
		if d.log == nil {
			d.log = slog.New(slog.DiscardHandler)
		}
		d.rnd = d.Rand
		if d.rnd == nil {
			d.rnd = plugins.NewRand(1)
		}
	})
}

// Decision is the outcome of a successful cycle.
type Decision struct {
	// Endpoints are "ip:port" strings, primary first, then fallbacks.
	Endpoints []string
	Result    *scheduling.Result
}

// Header returns the x-gateway-destination-endpoint value.
func (d *Decision) Header() string { return strings.Join(d.Endpoints, ",") }

// Inbound is a request as the adapter received it.
type Inbound struct {
	// ID identifies the request in logs (x-request-id).
	ID string
	// Path is the URL path (with or without the query string); empty means
	// the ":path" header, then "x-original-path".
	Path string
	// Headers are the request headers with lower-case names. HandleRequest
	// deletes the UntrustedHeaders from it before any plugin runs.
	Headers map[string]string
	// Body is the complete request body (see ReadBody).
	Body []byte
	// Subset is the gateway's endpoint subset hint ("ip:port" entries); nil
	// means no restriction.
	Subset []string
	// Trace, when non-nil, receives the decision trace.
	Trace *scheduling.Trace
}

// ReadBody reads a request body of at most Limits.MaxRequestBytes; a longer
// one is a 413 Rejection, found without buffering more than the limit.
func (d *Director) ReadBody(r io.Reader) ([]byte, error) {
	limit := d.Limits.request()
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("requestcontrol: read body: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(limit)
	}
	return b, nil
}

func tooLarge(limit int64) *Rejection {
	return &Rejection{Status: http.StatusRequestEntityTooLarge,
		Err: fmt.Errorf("request body larger than the limit of %d bytes", limit)}
}

// HandleRequest runs the request side of the pipeline for in and returns the
// Exchange that forwards it; errors are *Rejection (status and reason).
// ctx is the request's context: when it is done before the Exchange is
// closed, the Exchange closes itself, so in-flight accounting is released
// even if the adapter forgets. HandleRequest is Parse followed by Handle.
func (d *Director) HandleRequest(ctx context.Context, in *Inbound) (*Exchange, error) {
	p, err := d.Parse(ctx, in)
	if err != nil {
		return nil, err
	}
	return d.Handle(ctx, p)
}

// Parsed is a request that passed the first stage of HandleRequest
// (Director.Parse), ready for the second (Director.Handle).
type Parsed struct {
	in     *Inbound
	req    *scheduling.Request
	parser parsers.Parser
	sw     stopwatch
}

// Parse runs the first stage of HandleRequest: it drops the untrusted
// headers, checks the body's size, parses it and runs the producers'
// Prepare (Preparer). The stage reads no state
// that requests change (only the Director's configuration), so a caller
// may run it ahead of Handle on another goroutine: the simulator parses the
// next requests while the current one is scheduled. Errors are *Rejection
// and count as rejections.
func (d *Director) Parse(ctx context.Context, in *Inbound) (_ *Parsed, err error) {
	d.init()
	defer d.logRejection(ctx, in.ID, &err)
	if in.Headers == nil {
		in.Headers = map[string]string{}
	}
	for _, h := range UntrustedHeaders {
		delete(in.Headers, h)
	}
	if limit := d.Limits.request(); int64(len(in.Body)) > limit {
		return nil, tooLarge(limit)
	}
	sw := d.stopwatch()
	req, parser, err := d.parse(ctx, in)
	if err != nil {
		return nil, err
	}
	if err := d.prepare(ctx, req); err != nil {
		return nil, err
	}
	return &Parsed{in: in, req: req, parser: parser, sw: sw}, nil
}

// prepare runs the producers' Prepare (Preparer).
func (d *Director) prepare(ctx context.Context, req *scheduling.Request) (err error) {
	name := ""
	defer func() {
		if r := recover(); r != nil {
			err = d.panicked(ctx, name, req.ID, r)
		}
	}()
	for _, p := range d.Producers {
		if pp, ok := p.Plugin.(Preparer); ok {
			name = p.Name
			pp.Prepare(ctx, req)
		}
	}
	return nil
}

// Handle runs the rest of HandleRequest for a request Parse returned:
// model rewrites, the objective, admission, scheduling and the pre-request
// hooks. Handle calls must be made in the order the requests should be
// served, one Parsed once.
func (d *Director) Handle(ctx context.Context, p *Parsed) (_ *Exchange, err error) {
	in, req, sw := p.in, p.req, p.sw
	defer d.logRejection(ctx, in.ID, &err)
	d.rewrite(ctx, req)
	d.objective(ctx, req)
	sw.lap(StageParse)

	if d.Admission != nil {
		err := d.admit(ctx, "admission", d.Admission, req, d.endpoints())
		sw.lap(StageAdmission)
		if err != nil {
			return nil, err
		}
	}
	candidates := Subset(d.endpoints(), in.Subset)
	if len(candidates) == 0 {
		err := scheduling.ErrNoCandidates
		if in.Subset != nil {
			err = fmt.Errorf("%w: no ready endpoint matches the subset hint %v", err, in.Subset)
		}
		return nil, Reject(err)
	}
	dec, err := d.Schedule(ctx, req, candidates)
	if err != nil {
		return nil, err
	}
	return d.newExchange(ctx, req, dec, p.parser), nil
}

// logRejection counts and logs a request the pipeline rejects (*err non-nil).
func (d *Director) logRejection(ctx context.Context, id string, err *error) {
	if *err == nil {
		return
	}
	d.stats.rejected.Add(1)
	level := slog.LevelDebug // a rejection is an answer, not a failure
	if rej, ok := (*err).(*Rejection); ok && rej.Status >= 500 {
		level = slog.LevelError
	}
	if d.log.Enabled(ctx, level) {
		d.log.LogAttrs(ctx, level, "Error handling request",
			slog.String("x-request-id", id), slog.String("error", (*err).Error()))
	}
}

func (d *Director) endpoints() []*scheduling.Endpoint {
	if d.Pool == nil {
		return nil
	}
	return d.Pool.Endpoints()
}

// parse selects the parser and parses the body.
func (d *Director) parse(ctx context.Context, in *Inbound) (req *scheduling.Request, p parsers.Parser, err error) {
	path := in.Path
	if path == "" {
		path = header(in.Headers, ":path", "x-original-path")
	}
	if d.Parsers == nil {
		return nil, nil, &Rejection{Status: http.StatusBadRequest, Err: errors.New("requestcontrol: no parsers configured")}
	}
	p, suffix, err := d.Parsers.Select(path)
	if err != nil {
		return nil, nil, Reject(err)
	}
	defer func() {
		if r := recover(); r != nil {
			err = d.panicked(ctx, "parser", in.ID, r)
		}
	}()
	body, err := p.ParseRequest(suffix, in.Body)
	if err != nil {
		return nil, nil, Reject(err)
	}
	return &scheduling.Request{
		ID:            in.ID,
		IncomingModel: body.Model,
		TargetModel:   body.Model,
		Body:          body,
		Headers:       in.Headers,
		Trace:         in.Trace,
	}, p, nil
}

// rewrite applies the model-name-rewrite header, then the rewrite rules, and
// rewrites the body when the target differs.
func (d *Director) rewrite(ctx context.Context, req *scheduling.Request) {
	target := header(req.Headers, HeaderModelRewrite, HeaderRewriteAlias)
	if t, resource, ok := d.rewrites.Load().Target(req.IncomingModel, d.rnd); ok {
		target = t
		if d.log.Enabled(ctx, slog.LevelDebug) {
			d.log.LogAttrs(ctx, slog.LevelDebug, "Model rewrite rule matched", slog.String("x-request-id", req.ID),
				slog.String("modelRewrite", resource), slog.String("incomingModelName", req.IncomingModel),
				slog.String("targetModelName", target))
		}
	}
	if target == "" || target == req.IncomingModel {
		return
	}
	if err := req.Body.SetModel(target); err != nil {
		d.log.LogAttrs(ctx, slog.LevelWarn, "Model rewrite skipped: the body is not a JSON object",
			slog.String("x-request-id", req.ID), slog.String("targetModelName", target), slog.String("error", err.Error()))
		return
	}
	req.TargetModel = target
}

// objective resolves the request's objective, priority and fairness id.
func (d *Director) objective(ctx context.Context, req *scheduling.Request) {
	key := header(req.Headers, HeaderObjective, HeaderObjectiveAlias)
	if key != "" {
		plugins.Set(&req.Data, objectiveKey, key)
	}
	if f := header(req.Headers, HeaderFairnessID, HeaderFairnessAlias); f != "" {
		plugins.Set(&req.Data, fairnessIDKey, f)
	}
	found := false
	if o := d.objectives.Load(); o != nil && key != "" {
		req.Priority, found = (*o)[key]
	}
	if !d.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	if !found {
		d.log.LogAttrs(ctx, slog.LevelDebug, "No associated InferenceObjective found, using default",
			slog.String("x-request-id", req.ID), slog.String("objectiveKey", key))
	}
	d.log.LogAttrs(ctx, slog.LevelDebug, "LLM request assembled", slog.String("x-request-id", req.ID),
		slog.String("incomingModelName", req.IncomingModel), slog.String("targetModelName", req.TargetModel),
		slog.String("objectiveKey", key), slog.Int("priority", req.Priority), slog.String("fairnessID", FairnessID(req)))
}

// admit runs one admitter, mapping a denial to a Rejection (429 unless the
// admitter chose) and a panic to 500.
func (d *Director) admit(ctx context.Context, name string, a Admitter, req *scheduling.Request, eps []*scheduling.Endpoint) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = d.panicked(ctx, name, req.ID, r)
		}
	}()
	err = a.Admit(ctx, req, eps)
	if err == nil {
		return nil
	}
	var rej *Rejection
	switch {
	case errors.As(err, &rej):
		return rej
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Reject(err)
	}
	return Deny(ReasonDenied, fmt.Errorf("admitter %q: %w", name, err))
}

// Schedule runs the data producers, the custom admitters, the scheduler and
// the pre-request hooks for req over candidates: the step of HandleRequest
// from the parsed request to the pick. Errors are *Rejection. A panic in a
// plugin is recovered and becomes a 500; if the pre-request hooks had
// started, the ResponseComplete hooks run with the error. A caller of
// Schedule (rather than HandleRequest) calls Complete when the request ends.
func (d *Director) Schedule(ctx context.Context, req *scheduling.Request, candidates []*scheduling.Endpoint) (dec *Decision, err error) {
	d.init()
	if len(candidates) == 0 {
		return nil, Reject(scheduling.ErrNoCandidates)
	}
	pre := false
	stage := "data producer"
	sw := d.stopwatch()
	defer func() {
		if r := recover(); r != nil {
			dec, err = nil, d.panicked(ctx, stage, req.ID, r)
			if pre {
				d.Complete(ctx, req, nil, parsers.Usage{}, err)
			}
		}
	}()
	for _, p := range d.Producers {
		stage = p.Name
		if err := p.Plugin.Produce(ctx, req, candidates); err != nil {
			for _, k := range p.Plugin.Produces() {
				req.Data.Delete(k.KeyName())
			}
			d.log.LogAttrs(ctx, slog.LevelWarn, "data producer failed; its consumers see no data",
				slog.String("producer", p.Name), slog.String("x-request-id", req.ID), slog.String("error", err.Error()))
		}
	}
	sw.lap(StageProducers)
	for _, a := range d.Admitters {
		if err := d.admit(ctx, a.Name, a.Plugin, req, candidates); err != nil {
			return nil, err
		}
	}
	if len(d.Admitters) > 0 {
		sw.lap(StageAdmitters)
	}
	stage = "scheduler"
	res, err := d.Scheduler.Schedule(ctx, req, candidates)
	sw.lap(StageScheduling)
	if err != nil {
		return nil, Reject(err)
	}
	pre = true
	for _, h := range d.PreRequests {
		stage = h.Name
		h.Plugin.PreRequest(ctx, req, res)
	}
	sw.lap(StagePreRequest)
	primary := res.PrimaryResult()
	eps := make([]string, len(primary.Endpoints))
	for i, e := range primary.Endpoints {
		eps[i] = e.HostPort()
	}
	return &Decision{Endpoints: eps, Result: res}, nil
}

// Complete runs the ResponseComplete hooks for a request Schedule picked
// endpoints for: served answered (nil if none did), usage is what the
// response reported, err is why the request ended early (nil when the
// response completed). Exchange.Close calls it; call it only for requests
// scheduled with Schedule directly, exactly once.
func (d *Director) Complete(ctx context.Context, req *scheduling.Request, served *scheduling.Endpoint, usage parsers.Usage, err error) {
	d.init()
	for _, h := range d.ResponseCompletes {
		func() {
			defer d.recoverHook(ctx, h.Name, req.ID)
			h.Plugin.ResponseComplete(ctx, req, served, usage, err)
		}()
	}
}

// recoverHook logs and counts a panic in a response hook; deferred.
func (d *Director) recoverHook(ctx context.Context, name, id string) {
	if r := recover(); r != nil {
		_ = d.panicked(ctx, name, id, r)
	}
}

// panicked logs a recovered panic with its stack and returns the 500.
func (d *Director) panicked(ctx context.Context, where, id string, r any) *Rejection {
	d.stats.panics.Add(1)
	d.log.LogAttrs(ctx, slog.LevelError, "plugin panicked", slog.String("plugin", where),
		slog.String("x-request-id", id), slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
	return &Rejection{Status: http.StatusInternalServerError, Err: fmt.Errorf("internal error: %s panicked: %v", where, r)}
}

// forwardHeaders returns the headers to set on the forwarded request.
func forwardHeaders(req *scheduling.Request, dec *Decision, bodyChanged bool, bodyLen int) map[string]string {
	h := make(map[string]string, len(req.AddedHeaders)+2)
	for k, v := range req.AddedHeaders {
		h[k] = v
	}
	h[HeaderDestination] = dec.Header()
	if bodyChanged {
		h["content-length"] = strconv.Itoa(bodyLen)
	}
	return h
}

// Use appends plugin p, named name, to every extension point of d it
// implements: data producer, custom admitter, pre-request and the response
// hooks. Producers run in the order they are added (config.Build orders
// them by their data dependencies). Call Use while building the Director,
// not while it serves.
func (d *Director) Use(name string, p any) {
	if v, ok := p.(DataProducer); ok {
		d.Producers = append(d.Producers, Named[DataProducer]{name, v})
	}
	if v, ok := p.(Admitter); ok {
		d.Admitters = append(d.Admitters, Named[Admitter]{name, v})
	}
	if v, ok := p.(PreRequest); ok {
		d.PreRequests = append(d.PreRequests, Named[PreRequest]{name, v})
	}
	if v, ok := p.(ResponseHeader); ok {
		d.ResponseHeaders = append(d.ResponseHeaders, Named[ResponseHeader]{name, v})
	}
	if v, ok := p.(ResponseChunk); ok {
		d.ResponseChunks = append(d.ResponseChunks, Named[ResponseChunk]{name, v})
	}
	if v, ok := p.(ResponseComplete); ok {
		d.ResponseCompletes = append(d.ResponseCompletes, Named[ResponseComplete]{name, v})
	}
}
