package requestcontrol

import (
	"context"
	"reflect"
	"time"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// Metrics receives the picker's own measurements, so the library records
// them without depending on a metrics library; a binding exports them
// (examples/extproc/prommetrics exports them to Prometheus under llm-d's
// llm_d_epp_* names). The Director reports stage durations when its Metrics
// field is set; Instrument also wraps every plugin to report its calls; the
// adapters report each request's outcome.
//
// The methods are called on the request path, concurrently: they must be
// safe for concurrent use, cheap, and must not block or keep their
// arguments. Label values such as model names are not bounded by the
// library: a binding caps their cardinality.
type Metrics interface {
	// Request is called by the adapter once per request it answered (or
	// gave up on because the client went away).
	Request(r RequestMetrics)
	// Stage is called with how long one stage of one request took.
	Stage(s Stage, d time.Duration)
	// Plugin is called with how long one call of a plugin took.
	Plugin(p PluginCall, d time.Duration)
	// PrefixMatch is called after each pick with the fraction (0..1) of the
	// prompt's prefix blocks the chosen endpoint was found to hold, once per
	// prefix producer.
	PrefixMatch(producer string, ratio float64)
}

// Stage is a stage of the request pipeline, as reported to Metrics.
type Stage string

// The stages of HandleRequest, in order. A stage that has nothing to run
// (no admission gate, no custom admitter) is not reported.
const (
	StageParse      Stage = "parse"       // body parse, model rewrite, objective
	StageAdmission  Stage = "admission"   // the admission gate, flow-control queueing included
	StageProducers  Stage = "producers"   // the data producers
	StageAdmitters  Stage = "admitters"   // custom admitters
	StageScheduling Stage = "scheduling"  // the scheduler's profiles
	StagePreRequest Stage = "pre-request" // pre-request hooks
)

// Extension points, as PluginCall.Point.
const (
	PointProducer   = "DataProducer"
	PointAdmitter   = "Admitter"
	PointFilter     = "Filter"
	PointScorer     = "Scorer"
	PointPicker     = "Picker"
	PointPreRequest = "PreRequest"
)

// PluginCall names the plugin a duration is reported for.
type PluginCall struct {
	Point string // the extension point (PointScorer, ...)
	Type  string // the plugin type ("queue-scorer")
	Name  string // the instance name
}

// RequestMetrics is the outcome of one request, reported by the adapter.
type RequestMetrics struct {
	// Model is the model the client asked for; TargetModel the one the
	// request was sent to (after rewrite). Both are empty when the body
	// could not be parsed.
	Model, TargetModel string
	FairnessID         string
	Priority           int
	// Status is the HTTP status the client got (the upstream's, or the
	// rejection's); 0 when the client went away before any.
	Status int
	// Reason is the x-llm-d-request-dropped-reason of a rejection.
	Reason string
	// Duration is from the request's arrival at the adapter to the last byte
	// of the response (or the rejection).
	Duration time.Duration
	// RequestBytes and ResponseBytes are the body sizes: as received from
	// the client and as sent back to it.
	RequestBytes, ResponseBytes int64
	// Usage is what the response reported.
	Usage     parsers.Usage
	Streaming bool
}

// Outcome fills the request fields of m from x (nil for a rejected request)
// and returns m.
func (m RequestMetrics) Outcome(x *Exchange) RequestMetrics {
	if x == nil || x.Request == nil {
		return m
	}
	req := x.Request
	m.Model, m.TargetModel = req.IncomingModel, req.TargetModel
	m.FairnessID, m.Priority = FairnessID(req), req.Priority
	m.Usage = x.Usage()
	m.Streaming = req.Body != nil && req.Body.Stream
	return m
}

// stopwatch reports consecutive stages to Metrics; the zero value (no
// Metrics) does nothing.
type stopwatch struct {
	m Metrics
	t time.Time
}

func (d *Director) stopwatch() stopwatch {
	if d.Metrics == nil {
		return stopwatch{}
	}
	return stopwatch{d.Metrics, time.Now()}
}

// lap reports the time since the last lap as stage s.
func (w *stopwatch) lap(s Stage) {
	if w.m == nil {
		return
	}
	now := time.Now()
	w.m.Stage(s, now.Sub(w.t))
	w.t = now
}

// Instrument makes d report to m: it sets d.Metrics (stage durations), wraps
// each data producer, custom admitter and pre-request hook of d, and each
// filter, scorer and picker of its scheduler's profiles, in a decorator
// that reports the duration of every call, and adds a pre-request hook that
// reports how much of the prompt's prefix the chosen endpoint held. typeOf
// names a plugin instance's type (nil, or "" returned: the instance name).
//
// Call Instrument once, after building d and before it serves: it changes
// d's fields and the scheduler's profiles in place. The decorators hide the
// plugins' other methods; find plugins by name in the configuration
// (config.Runtime.Plugins), not in d.
func Instrument(d *Director, m Metrics, typeOf func(name string) string) {
	if m == nil {
		return
	}
	call := func(point, name string) PluginCall {
		typ := ""
		if typeOf != nil {
			typ = typeOf(name)
		}
		if typ == "" {
			typ = name
		}
		return PluginCall{Point: point, Type: typ, Name: name}
	}
	d.Metrics = m
	var matches []prefixMatchKey
	for i, p := range d.Producers {
		for _, k := range p.Plugin.Produces() {
			if k.KeyType() == reflect.TypeFor[*scheduling.PrefixMatch]() {
				matches = append(matches, prefixMatchKey{p.Name, plugins.NewKey[*scheduling.PrefixMatch](k.KeyName())})
			}
		}
		d.Producers[i].Plugin = timedProducer{p.Plugin, m, call(PointProducer, p.Name)}
	}
	for i, a := range d.Admitters {
		d.Admitters[i].Plugin = timedAdmitter{a.Plugin, m, call(PointAdmitter, a.Name)}
	}
	for i, h := range d.PreRequests {
		d.PreRequests[i].Plugin = timedPreRequest{h.Plugin, m, call(PointPreRequest, h.Name)}
	}
	if len(matches) > 0 {
		d.PreRequests = append(d.PreRequests, Named[PreRequest]{"prefix-match-metrics", prefixMatchReporter(m, matches)})
	}
	if d.Scheduler == nil {
		return
	}
	for _, prof := range d.Scheduler.Profiles() {
		for i, f := range prof.Filters {
			prof.Filters[i].Filter = timedFilter{f.Filter, m, call(PointFilter, f.Name)}
		}
		for i, s := range prof.Scorers {
			prof.Scorers[i].Scorer = timedScorer{s.Scorer, m, call(PointScorer, s.Name)}
		}
		prof.Picker = timedPicker{prof.Picker, m, call(PointPicker, prof.PickerName)}
	}
}

type prefixMatchKey struct {
	producer string
	key      plugins.Key[*scheduling.PrefixMatch]
}

// prefixMatchReporter reports, after the pick, the match ratio of the
// primary endpoint in each PrefixMatch a producer wrote.
func prefixMatchReporter(m Metrics, keys []prefixMatchKey) PreRequestFunc {
	return func(_ context.Context, req *scheduling.Request, res *scheduling.Result) {
		primary := res.PrimaryResult()
		if primary == nil || len(primary.Endpoints) == 0 {
			return
		}
		for _, k := range keys {
			pm, ok := plugins.Get(&req.Data, k.key)
			if !ok || pm.TotalBlocks == 0 {
				continue
			}
			// An index past the candidates makes MatchedFor search them.
			matched := pm.MatchedFor(primary.Endpoints[0], len(pm.Endpoints))
			m.PrefixMatch(k.producer, min(1, matched/float64(pm.TotalBlocks)))
		}
	}
}

type timedProducer struct {
	DataProducer
	m Metrics
	c PluginCall
}

func (t timedProducer) Produce(ctx context.Context, req *scheduling.Request, eps []*scheduling.Endpoint) error {
	start := time.Now()
	err := t.DataProducer.Produce(ctx, req, eps)
	t.m.Plugin(t.c, time.Since(start))
	return err
}

type timedAdmitter struct {
	Admitter
	m Metrics
	c PluginCall
}

func (t timedAdmitter) Admit(ctx context.Context, req *scheduling.Request, eps []*scheduling.Endpoint) error {
	start := time.Now()
	err := t.Admitter.Admit(ctx, req, eps)
	t.m.Plugin(t.c, time.Since(start))
	return err
}

type timedPreRequest struct {
	p PreRequest
	m Metrics
	c PluginCall
}

func (t timedPreRequest) PreRequest(ctx context.Context, req *scheduling.Request, res *scheduling.Result) {
	start := time.Now()
	t.p.PreRequest(ctx, req, res)
	t.m.Plugin(t.c, time.Since(start))
}

type timedFilter struct {
	f scheduling.Filter
	m Metrics
	c PluginCall
}

func (t timedFilter) Filter(ctx context.Context, req *scheduling.Request, eps []*scheduling.Endpoint) []*scheduling.Endpoint {
	start := time.Now()
	out := t.f.Filter(ctx, req, eps)
	t.m.Plugin(t.c, time.Since(start))
	return out
}

type timedScorer struct {
	scheduling.Scorer
	m Metrics
	c PluginCall
}

func (t timedScorer) Score(ctx context.Context, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	start := time.Now()
	t.Scorer.Score(ctx, req, eps, scores)
	t.m.Plugin(t.c, time.Since(start))
}

type timedPicker struct {
	scheduling.Picker
	m Metrics
	c PluginCall
}

func (t timedPicker) Pick(ctx context.Context, req *scheduling.Request, eps []*scheduling.Endpoint, totals []float64) []*scheduling.Endpoint {
	start := time.Now()
	out := t.Picker.Pick(ctx, req, eps, totals)
	t.m.Plugin(t.c, time.Since(start))
	return out
}
