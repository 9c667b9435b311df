package requestcontroltest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/parsers/anthropic"
	"github.com/eppkit/eppkit/parsers/openai"
	"github.com/eppkit/eppkit/parsers/sglang"
	"github.com/eppkit/eppkit/parsers/vllmhttp"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/pickers"
	"github.com/eppkit/eppkit/scheduling/scorers"
)

// Config describes a Director for a test. The zero value gives three
// endpoints, the openai, anthropic, vllmhttp and sglang parsers, one profile
// (queue-scorer, max-score-picker) and no admission gate.
type Config struct {
	// Endpoints are the pool; nil means Endpoints(3).
	Endpoints []*scheduling.Endpoint
	// Plugins are added with Director.Use, in order, named "plugin-<i>"
	// unless they are Named.
	Plugins []any
	// Filters and Scorers of the one profile; nil scorers mean the queue
	// scorer.
	Filters []scheduling.Filter
	Scorers []scheduling.Scorer
	// Admission is the admission gate.
	Admission requestcontrol.Admitter
	// Objectives and Rewrites are set on the Director.
	Objectives requestcontrol.Objectives
	Rewrites   []requestcontrol.ModelRewrite
	Limits     requestcontrol.Limits
	// Parsers replace the default parsers.
	Parsers []parsers.Parser
	Seed    uint64
}

// Named names a plugin in Config.Plugins.
type Named struct {
	Name   string
	Plugin any
}

// NewDirector builds a Director from cfg; it fails the test on a bad
// configuration. Its logger writes to the test log.
func NewDirector(t testing.TB, cfg Config) *requestcontrol.Director {
	t.Helper()
	eps := cfg.Endpoints
	if eps == nil {
		eps = Endpoints(3)
	}
	prof := &scheduling.Profile{Name: "default", PickerName: "max-score-picker", Picker: &pickers.MaxScore{}}
	for i, f := range cfg.Filters {
		prof.Filters = append(prof.Filters, scheduling.NamedFilter{Name: fmt.Sprintf("filter-%d", i), Filter: f})
	}
	scs := cfg.Scorers
	if scs == nil {
		scs = []scheduling.Scorer{&scorers.Queue{}}
	}
	for i, s := range scs {
		prof.Scorers = append(prof.Scorers, scheduling.WeightedScorer{Name: fmt.Sprintf("scorer-%d", i), Scorer: s, Weight: 1})
	}
	sched, err := scheduling.New(scheduling.ProfileHandlerFunc(
		func(ctx context.Context, _ *scheduling.Request, names []string, run scheduling.RunProfileFunc) (string, error) {
			_, err := run(ctx, names[0])
			return names[0], err
		}), prof)
	if err != nil {
		t.Fatalf("requestcontroltest: %v", err)
	}
	ps := cfg.Parsers
	if ps == nil {
		ps = []parsers.Parser{&openai.Parser{}, &anthropic.Parser{}, &vllmhttp.Parser{}, &sglang.Parser{}}
	}
	d := &requestcontrol.Director{
		Scheduler: sched,
		Parsers:   parsers.NewSelector(ps...),
		Pool:      requestcontrol.StaticPool(eps),
		Admission: cfg.Admission,
		Limits:    cfg.Limits,
		Logger:    TestLogger(t),
		Rand:      plugins.NewRand(cfg.Seed),
	}
	for i, p := range cfg.Plugins {
		name := fmt.Sprintf("plugin-%d", i)
		if n, ok := p.(Named); ok {
			name, p = n.Name, n.Plugin
		}
		d.Use(name, p)
	}
	if cfg.Objectives != nil {
		d.SetObjectives(cfg.Objectives)
	}
	if cfg.Rewrites != nil {
		rw, err := requestcontrol.NewModelRewrites(cfg.Rewrites...)
		if err != nil {
			t.Fatalf("requestcontroltest: %v", err)
		}
		d.SetModelRewrites(rw)
	}
	return d
}

// Endpoints returns n endpoints "ep-0", "ep-1", ... at 10.0.0.<i+1>:8000
// with usable metrics: endpoint i has i waiting requests, so ep-0 wins a
// queue-scored pick.
func Endpoints(n int) []*scheduling.Endpoint {
	eps := make([]*scheduling.Endpoint, n)
	for i := range eps {
		eps[i] = datalayer.New(fmt.Sprintf("ep-%d", i), fmt.Sprintf("10.0.0.%d", i+1), 8000, nil).
			WithMetrics(datalayer.Metrics{Waiting: i, UpdateTime: time.Now()})
	}
	return eps
}

// Chat returns a chat/completions request for model with one user message.
// headers are "name", "value" pairs.
func Chat(model, text string, headers ...string) *requestcontrol.Inbound {
	return Request("/v1/chat/completions",
		fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}]}`, model, text), headers...)
}

// Request returns an inbound request; headers are "name", "value" pairs
// (names are lower-cased).
func Request(path, body string, headers ...string) *requestcontrol.Inbound {
	h := map[string]string{}
	for i := 0; i+1 < len(headers); i += 2 {
		h[strings.ToLower(headers[i])] = headers[i+1]
	}
	return &requestcontrol.Inbound{ID: "test-request", Path: path, Headers: h, Body: []byte(body)}
}

// Response is what a fake upstream answers.
type Response struct {
	// Served is the endpoint that answered ("" means the primary pick).
	Served string
	// Status defaults to 200; Header to JSON, or SSE when Stream is set.
	Status int
	Header http.Header
	Stream bool
	// Chunks are the body chunks in order.
	Chunks [][]byte
	// Err, when set, is the upstream failure after Chunks: the response
	// does not end and the exchange is closed with Err.
	Err error
	// CancelAfter, when > 0, cancels the request context (the client goes
	// away) after that many chunks.
	CancelAfter int
}

// Result is what the client saw.
type Result struct {
	Exchange  *requestcontrol.Exchange
	Rejection *requestcontrol.Rejection
	Header    http.Header
	// Writes are the bytes each ResponseBody call returned; Body is their
	// concatenation.
	Writes [][]byte
	Body   []byte
}

// Do runs in through d and, when admitted, resp through the Exchange, as an
// adapter does (closing the Exchange at the end), and returns what the
// client saw.
func Do(ctx context.Context, d *requestcontrol.Director, in *requestcontrol.Inbound, resp Response) Result {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	x, err := d.HandleRequest(ctx, in)
	if err != nil {
		rej := requestcontrol.Reject(err)
		return Result{Rejection: rej}
	}
	defer x.Close(nil)
	r := Result{Exchange: x, Header: resp.Header}
	if r.Header == nil {
		r.Header = http.Header{"Content-Type": {"application/json"}, "Content-Length": {"0"}}
		if resp.Stream {
			r.Header = http.Header{"Content-Type": {"text/event-stream"}}
		}
	}
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	x.ResponseHeaders(resp.Served, status, r.Header)
	for i, c := range resp.Chunks {
		if resp.CancelAfter > 0 && i == resp.CancelAfter {
			cancel()
			waitClosed(x)
		}
		last := i == len(resp.Chunks)-1 && resp.Err == nil && resp.CancelAfter == 0
		out := bytes.Clone(x.ResponseBody(c, last)) // valid until the next call
		r.Writes = append(r.Writes, out)
		r.Body = append(r.Body, out...)
	}
	if len(resp.Chunks) == 0 && resp.Err == nil && resp.CancelAfter == 0 {
		out := x.ResponseBody(nil, true)
		r.Writes = append(r.Writes, out)
		r.Body = append(r.Body, out...)
	}
	if resp.Err != nil {
		x.Close(resp.Err)
	}
	return r
}

// waitClosed waits for the close-on-cancel callback, which runs on its own
// goroutine.
func waitClosed(x *requestcontrol.Exchange) {
	for range 1000 {
		if x.Closed() {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// Split cuts s into chunks of n bytes (the last may be shorter), to feed a
// response across arbitrary boundaries.
func Split(s string, n int) [][]byte {
	var out [][]byte
	for len(s) > n {
		out = append(out, []byte(s[:n]))
		s = s[n:]
	}
	return append(out, []byte(s))
}

// SSE returns a server-sent-event stream of the data events, ending with
// "data: [DONE]".
func SSE(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("data: " + e + "\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// Recorder is a plugin that records every hook call. It is safe for
// concurrent use.
type Recorder struct {
	mu                                      sync.Mutex
	preRequests, headers, chunks, completes int
	served                                  []*scheduling.Endpoint
	usage                                   []parsers.Usage
	errs                                    []error
}

var (
	_ requestcontrol.PreRequest       = (*Recorder)(nil)
	_ requestcontrol.ResponseHeader   = (*Recorder)(nil)
	_ requestcontrol.ResponseChunk    = (*Recorder)(nil)
	_ requestcontrol.ResponseComplete = (*Recorder)(nil)
)

// PreRequest records a pick.
func (r *Recorder) PreRequest(context.Context, *scheduling.Request, *scheduling.Result) {
	r.mu.Lock()
	r.preRequests++
	r.mu.Unlock()
}

// ResponseHeader records response headers.
func (r *Recorder) ResponseHeader(context.Context, *scheduling.Request, *scheduling.Endpoint, http.Header) {
	r.mu.Lock()
	r.headers++
	r.mu.Unlock()
}

// ResponseChunk records a chunk.
func (r *Recorder) ResponseChunk(context.Context, *scheduling.Request, *scheduling.Endpoint, []byte) {
	r.mu.Lock()
	r.chunks++
	r.mu.Unlock()
}

// ResponseComplete records a completion.
func (r *Recorder) ResponseComplete(_ context.Context, _ *scheduling.Request, served *scheduling.Endpoint, u parsers.Usage, err error) {
	r.mu.Lock()
	r.completes++
	r.served = append(r.served, served)
	r.usage = append(r.usage, u)
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

// Open returns the requests picked and not yet completed: 0 when every
// accounting was released.
func (r *Recorder) Open() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.preRequests - r.completes
}

// Counts returns the number of pre-request, response-header, chunk and
// completion calls.
func (r *Recorder) Counts() (preRequests, headers, chunks, completes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.preRequests, r.headers, r.chunks, r.completes
}

// Last returns the served endpoint, usage and error of the last completion.
func (r *Recorder) Last() (*scheduling.Endpoint, parsers.Usage, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) == 0 {
		return nil, parsers.Usage{}, nil
	}
	n := len(r.errs) - 1
	return r.served[n], r.usage[n], r.errs[n]
}

// Detector is a saturation detector reporting a value the test sets. The
// zero value reports 0.
type Detector struct {
	mu sync.Mutex
	v  float64
}

// Set sets the saturation to report.
func (d *Detector) Set(v float64) {
	d.mu.Lock()
	d.v = v
	d.mu.Unlock()
}

// Saturation returns the value set.
func (d *Detector) Saturation(context.Context, []*datalayer.Endpoint) float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.v
}

// Panic is a plugin that panics at one stage: "produce", "admit",
// "prerequest", "header", "chunk" or "complete".
type Panic struct{ Stage string }

var (
	_ requestcontrol.DataProducer     = Panic{}
	_ requestcontrol.Admitter         = Panic{}
	_ requestcontrol.PreRequest       = Panic{}
	_ requestcontrol.ResponseHeader   = Panic{}
	_ requestcontrol.ResponseChunk    = Panic{}
	_ requestcontrol.ResponseComplete = Panic{}
)

func (p Panic) at(stage string) {
	if p.Stage == stage {
		panic("requestcontroltest: panic in " + stage)
	}
}

// Produces returns nothing.
func (Panic) Produces() []plugins.AnyKey { return nil }

// Produce panics at "produce".
func (p Panic) Produce(context.Context, *scheduling.Request, []*scheduling.Endpoint) error {
	p.at("produce")
	return nil
}

// Admit panics at "admit".
func (p Panic) Admit(context.Context, *scheduling.Request, []*scheduling.Endpoint) error {
	p.at("admit")
	return nil
}

// PreRequest panics at "prerequest".
func (p Panic) PreRequest(context.Context, *scheduling.Request, *scheduling.Result) {
	p.at("prerequest")
}

// ResponseHeader panics at "header".
func (p Panic) ResponseHeader(context.Context, *scheduling.Request, *scheduling.Endpoint, http.Header) {
	p.at("header")
}

// ResponseChunk panics at "chunk".
func (p Panic) ResponseChunk(context.Context, *scheduling.Request, *scheduling.Endpoint, []byte) {
	p.at("chunk")
}

// ResponseComplete panics at "complete".
func (p Panic) ResponseComplete(context.Context, *scheduling.Request, *scheduling.Endpoint, parsers.Usage, error) {
	p.at("complete")
}
