// Package prommetrics exports the picker's own metrics
// (requestcontrol.Metrics) to Prometheus, under llm-d's llm_d_epp_* names
// where llm-d has an equivalent (so its dashboards keep working) and
// eppkit_* names otherwise:
//
//	llm_d_epp_request_total{model_name,target_model_name,fairness_id,priority}
//	llm_d_epp_request_error_total{...,error_code}        error_code: the drop reason, else the HTTP status
//	eppkit_request_status_total{code,reason}             every answer by status and drop reason
//	llm_d_epp_request_duration_seconds{...}              arrival to last byte
//	llm_d_epp_request_input_tokens / _output_tokens / _cached_tokens{...}
//	eppkit_stage_duration_seconds{stage}                 parse, admission, producers, admitters, scheduling, pre-request
//	llm_d_epp_scheduler_e2e_duration_seconds             the scheduling stage
//	llm_d_epp_plugin_duration_seconds{extension_point,plugin_type,plugin_name}
//	llm_d_epp_prefix_indexer_hit_ratio{producer}         per pick: share of the prompt's prefix on the chosen endpoint
//
// and, read from the picker's state at each scrape:
//
//	llm_d_epp_ready_endpoints{name}, llm_d_epp_average_queue_size{name},
//	llm_d_epp_average_running_requests{name}, llm_d_epp_average_kv_cache_utilization{name}
//	llm_d_epp_prefix_indexer_size{producer}              entries in each prefix producer's index
//	llm_d_epp_flow_control_queue_size{priority,inference_pool}, llm_d_epp_flow_control_queue_bytes{...}
//	eppkit_flow_control_queue_wait_seconds{priority}     summary: wait of dispatched requests
//	eppkit_flow_control_requests_total{priority,outcome} dispatched, rejected, expired, cancelled, drained
//	eppkit_kv_events_messages_total{outcome}             received; dropped (malformed, duplicate, unknown endpoint)
//	eppkit_kv_events_gaps_total
//	eppkit_shared_backend_errors_total{plugin}           failed calls to a shared backend's server (timeouts included)
//	eppkit_shared_backend_skipped_total{plugin}          calls not made while the server was marked down
//	eppkit_shared_backend_dropped_total{plugin}          updates lost (queue full, server down)
//	eppkit_shared_backend_down{plugin}                   1 while the server is marked down
//	eppkit_shared_backend_mirror_lookups_total{plugin}   lookups answered from the replica's mirror (redis.mirror)
//	eppkit_shared_backend_mirror_loads_total{plugin}     copies of the shared index the mirror loaded
//
// Label cardinality is capped: past Options.LabelLimit distinct values of
// a model name or fairness id, new values are reported as "other".
package prommetrics

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/requestcontrol"
)

// Other replaces label values past the cardinality limit.
const Other = "other"

// Options configure the binding; every field is optional.
type Options struct {
	// LabelLimit caps the distinct values of each model-name and
	// fairness-id label (default 100).
	LabelLimit int
	// PoolName labels the pool gauges (default "default").
	PoolName string
	// Director, when set, is read at each scrape: its pool for the pool
	// gauges, and its flow-control queues when flow control is on.
	Director *requestcontrol.Director
	// Plugins are the picker's plugin instances by name (as in
	// config.Runtime.Plugins), read at each scrape: the index size of every
	// prefix producer (Index() returning a *kvindex.PrefixIndex or a
	// *kvindex.EventIndex), the backend counters of every prefix producer
	// with a shared index (BackendStats() kvindex.BackendStats), and the
	// counters of every KV-event subscriber (Subscriber() *kvindex.Subscriber).
	Plugins map[string]any
}

// Metrics is a requestcontrol.Metrics exporting to Prometheus. Build it
// with New.
type Metrics struct {
	opts    Options
	models  capper
	targets capper
	flows   capper

	requests, errors, statuses  *prometheus.CounterVec
	duration                    *prometheus.HistogramVec
	inTokens, outTokens, cached *prometheus.HistogramVec
	stages, plugins, prefixHit  *prometheus.HistogramVec
	schedulerE2E                prometheus.Histogram
	stageObservers              sync.Map // requestcontrol.Stage → prometheus.Observer
	pluginObservers             sync.Map // requestcontrol.PluginCall → prometheus.Observer

	readyDesc, queueDesc, runningDesc, kvDesc *prometheus.Desc
	indexDesc                                 *prometheus.Desc
	fcSizeDesc, fcBytesDesc                   *prometheus.Desc
	fcWaitDesc, fcOutcomeDesc                 *prometheus.Desc
	kvMsgDesc, kvGapDesc                      *prometheus.Desc
	backendErrDesc, backendSkipDesc           *prometheus.Desc
	backendDropDesc, backendDownDesc          *prometheus.Desc
	mirrorLookupDesc, mirrorLoadDesc          *prometheus.Desc
}

var _ requestcontrol.Metrics = (*Metrics)(nil)

// Label sets.
var (
	modelLabels  = []string{"model_name", "target_model_name", "fairness_id", "priority"}
	errorLabels  = append(append([]string{}, modelLabels...), "error_code")
	pluginLabels = []string{"extension_point", "plugin_type", "plugin_name"}
)

// Buckets, as llm-d's.
var (
	requestBuckets = []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
	stageBuckets   = []float64{0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1}
	tokenBuckets   = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32778, 65536, 131072, 262144, 524288, 1048576}
	ratioBuckets   = []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}
)

// New returns the binding with its metrics registered with reg.
func New(reg prometheus.Registerer, opts Options) (*Metrics, error) {
	if opts.LabelLimit <= 0 {
		opts.LabelLimit = 100
	}
	if opts.PoolName == "" {
		opts.PoolName = "default"
	}
	m := &Metrics{opts: opts}
	m.models.limit, m.targets.limit, m.flows.limit = opts.LabelLimit, opts.LabelLimit, opts.LabelLimit
	counter := func(name, help string, labels []string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels []string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	}
	m.requests = counter("llm_d_epp_request_total", "Total number of processed requests.", modelLabels)
	m.errors = counter("llm_d_epp_request_error_total", "Total number of request errors.", errorLabels)
	m.statuses = counter("eppkit_request_status_total", "Requests answered, by HTTP status and drop reason.", []string{"code", "reason"})
	m.duration = histogram("llm_d_epp_request_duration_seconds", "End-to-end request latency distribution in seconds.", requestBuckets, modelLabels)
	m.inTokens = histogram("llm_d_epp_request_input_tokens", "Input token count distribution per request.", tokenBuckets, modelLabels)
	m.outTokens = histogram("llm_d_epp_request_output_tokens", "Output token count distribution per request.", tokenBuckets, modelLabels)
	m.cached = histogram("llm_d_epp_request_cached_tokens", "Prompt tokens read from cache per request, as the model server reported.", tokenBuckets, modelLabels)
	m.stages = histogram("eppkit_stage_duration_seconds", "Duration of each stage of the request pipeline in seconds.", stageBuckets, []string{"stage"})
	m.schedulerE2E = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "llm_d_epp_scheduler_e2e_duration_seconds",
		Help: "End-to-end scheduling latency distribution in seconds.", Buckets: stageBuckets})
	m.plugins = histogram("llm_d_epp_plugin_duration_seconds",
		"Plugin processing latency distribution in seconds for each extension point, plugin type and plugin name.", stageBuckets, pluginLabels)
	m.prefixHit = histogram("llm_d_epp_prefix_indexer_hit_ratio",
		"Share of the prompt's prefix blocks found on the chosen endpoint, per pick.", ratioBuckets, []string{"producer"})

	pool := []string{"name"}
	m.readyDesc = prometheus.NewDesc("llm_d_epp_ready_endpoints", "The number of ready endpoints in the inference server pool.", pool, nil)
	m.queueDesc = prometheus.NewDesc("llm_d_epp_average_queue_size", "The average number of requests pending in the model server queue.", pool, nil)
	m.runningDesc = prometheus.NewDesc("llm_d_epp_average_running_requests", "The average number of running requests across model servers in the pool.", pool, nil)
	m.kvDesc = prometheus.NewDesc("llm_d_epp_average_kv_cache_utilization", "The average kv cache utilization for an inference server pool.", pool, nil)
	m.indexDesc = prometheus.NewDesc("llm_d_epp_prefix_indexer_size", "Entries held in a prefix producer's index.", []string{"producer"}, nil)
	band := []string{"priority", "inference_pool"}
	m.fcSizeDesc = prometheus.NewDesc("llm_d_epp_flow_control_queue_size", "Current number of requests actively held in the Flow Control queue.", band, nil)
	m.fcBytesDesc = prometheus.NewDesc("llm_d_epp_flow_control_queue_bytes", "Current total size in bytes of requests actively held in the Flow Control queue.", band, nil)
	m.fcWaitDesc = prometheus.NewDesc("eppkit_flow_control_queue_wait_seconds", "Time dispatched requests waited in the Flow Control queue.", []string{"priority"}, nil)
	m.fcOutcomeDesc = prometheus.NewDesc("eppkit_flow_control_requests_total", "Requests leaving the Flow Control queue, by outcome.", []string{"priority", "outcome"}, nil)
	m.kvMsgDesc = prometheus.NewDesc("eppkit_kv_events_messages_total", "KV-event messages, by outcome.", []string{"outcome"}, nil)
	m.kvGapDesc = prometheus.NewDesc("eppkit_kv_events_gaps_total", "Sequence gaps detected in KV-event streams.", nil, nil)
	// A shared backend is a plugin's state kept on a server every replica
	// uses: the prefix indexes and the in-flight counts with indexBackend
	// redis.
	plugin := []string{"plugin"}
	m.backendErrDesc = prometheus.NewDesc("eppkit_shared_backend_errors_total", "Failed calls to a plugin's shared backend server, timeouts included.", plugin, nil)
	m.backendSkipDesc = prometheus.NewDesc("eppkit_shared_backend_skipped_total", "Calls to a plugin's shared backend server not made while it was marked down.", plugin, nil)
	m.backendDropDesc = prometheus.NewDesc("eppkit_shared_backend_dropped_total", "Updates to a plugin's shared backend lost: write queue full or server down.", plugin, nil)
	m.backendDownDesc = prometheus.NewDesc("eppkit_shared_backend_down", "1 while a plugin's shared backend server is marked down after repeated errors.", plugin, nil)
	m.mirrorLookupDesc = prometheus.NewDesc("eppkit_shared_backend_mirror_lookups_total", "Lookups a plugin answered from its replica's copy of the shared index, without a round trip.", plugin, nil)
	m.mirrorLoadDesc = prometheus.NewDesc("eppkit_shared_backend_mirror_loads_total", "Copies of the shared index a plugin's mirror loaded: at start, after falling behind, after the server lost the index.", plugin, nil)

	for _, c := range []prometheus.Collector{m.requests, m.errors, m.statuses, m.duration, m.inTokens, m.outTokens, m.cached,
		m.stages, m.schedulerE2E, m.plugins, m.prefixHit, (*gauges)(m)} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Request implements requestcontrol.Metrics.
func (m *Metrics) Request(r requestcontrol.RequestMetrics) {
	labels := []string{m.models.value(r.Model), m.targets.value(r.TargetModel), m.flows.value(r.FairnessID), strconv.Itoa(r.Priority)}
	m.requests.WithLabelValues(labels...).Inc()
	code := strconv.Itoa(r.Status)
	m.statuses.WithLabelValues(code, r.Reason).Inc()
	if r.Status >= 400 || r.Status == 0 {
		ec := r.Reason
		if ec == "" {
			ec = code
		}
		m.errors.WithLabelValues(append(labels, ec)...).Inc()
		return
	}
	m.duration.WithLabelValues(labels...).Observe(r.Duration.Seconds())
	if u := r.Usage; u.PromptTokens > 0 || u.CompletionTokens > 0 {
		m.inTokens.WithLabelValues(labels...).Observe(float64(u.PromptTokens))
		m.outTokens.WithLabelValues(labels...).Observe(float64(u.CompletionTokens))
		m.cached.WithLabelValues(labels...).Observe(float64(u.CachedTokens))
	}
}

// Stage implements requestcontrol.Metrics.
func (m *Metrics) Stage(s requestcontrol.Stage, d time.Duration) {
	o, ok := m.stageObservers.Load(s)
	if !ok {
		o, _ = m.stageObservers.LoadOrStore(s, m.stages.WithLabelValues(string(s)))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
	if s == requestcontrol.StageScheduling {
		m.schedulerE2E.Observe(d.Seconds())
	}
}

// Plugin implements requestcontrol.Metrics.
func (m *Metrics) Plugin(p requestcontrol.PluginCall, d time.Duration) {
	o, ok := m.pluginObservers.Load(p)
	if !ok {
		o, _ = m.pluginObservers.LoadOrStore(p, m.plugins.WithLabelValues(p.Point, p.Type, p.Name))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
}

// PrefixMatch implements requestcontrol.Metrics.
func (m *Metrics) PrefixMatch(producer string, ratio float64) {
	m.prefixHit.WithLabelValues(producer).Observe(ratio)
}

// gauges collects the state read at each scrape.
type gauges Metrics

func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{g.readyDesc, g.queueDesc, g.runningDesc, g.kvDesc, g.indexDesc,
		g.fcSizeDesc, g.fcBytesDesc, g.fcWaitDesc, g.fcOutcomeDesc, g.kvMsgDesc, g.kvGapDesc,
		g.backendErrDesc, g.backendSkipDesc, g.backendDropDesc, g.backendDownDesc, g.mirrorLookupDesc, g.mirrorLoadDesc} {
		ch <- d
	}
}

func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	o := g.opts
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if d := o.Director; d != nil && d.Pool != nil {
		eps := d.Pool.Endpoints()
		var n, waiting, running, kv float64
		for _, e := range eps {
			if !e.Metrics.Usable() {
				continue
			}
			n++
			waiting += float64(e.Metrics.Waiting)
			running += float64(e.Metrics.Running)
			kv += e.Metrics.KVUsage
		}
		gauge(g.readyDesc, float64(len(eps)), o.PoolName)
		if n > 0 {
			gauge(g.queueDesc, waiting/n, o.PoolName)
			gauge(g.runningDesc, running/n, o.PoolName)
			gauge(g.kvDesc, kv/n, o.PoolName)
		}
	}
	var kv kvindex.SubscriberStats
	subscribers := 0
	for name, p := range o.Plugins {
		switch v := p.(type) {
		case interface{ Index() *kvindex.PrefixIndex }:
			if x := v.Index(); x != nil { // nil: the index is shared, in Redis
				gauge(g.indexDesc, float64(x.Len()), name)
			}
		case interface{ Index() *kvindex.EventIndex }:
			if x := v.Index(); x != nil {
				gauge(g.indexDesc, float64(x.Len()), name)
			}
		}
		if v, ok := p.(interface{ BackendStats() kvindex.BackendStats }); ok {
			if st := v.BackendStats(); st.Backend != "" {
				ch <- prometheus.MustNewConstMetric(g.backendErrDesc, prometheus.CounterValue, float64(st.Errors), name)
				ch <- prometheus.MustNewConstMetric(g.backendSkipDesc, prometheus.CounterValue, float64(st.Skipped), name)
				ch <- prometheus.MustNewConstMetric(g.backendDropDesc, prometheus.CounterValue, float64(st.Dropped), name)
				ch <- prometheus.MustNewConstMetric(g.mirrorLookupDesc, prometheus.CounterValue, float64(st.MirrorLookups), name)
				ch <- prometheus.MustNewConstMetric(g.mirrorLoadDesc, prometheus.CounterValue, float64(st.MirrorLoads), name)
				down := 0.0
				if st.Down {
					down = 1
				}
				gauge(g.backendDownDesc, down, name)
			}
		}
		if v, ok := p.(interface{ Subscriber() *kvindex.Subscriber }); ok && v.Subscriber() != nil {
			st := v.Subscriber().Stats()
			kv.Messages += st.Messages
			kv.Malformed += st.Malformed
			kv.Duplicates += st.Duplicates
			kv.UnknownEndpoints += st.UnknownEndpoints
			kv.Gaps += st.Gaps
			subscribers++
		}
	}
	if subscribers > 0 {
		ch <- prometheus.MustNewConstMetric(g.kvMsgDesc, prometheus.CounterValue, float64(kv.Messages), "received")
		ch <- prometheus.MustNewConstMetric(g.kvMsgDesc, prometheus.CounterValue, float64(kv.Malformed+kv.Duplicates+kv.UnknownEndpoints), "dropped")
		ch <- prometheus.MustNewConstMetric(g.kvGapDesc, prometheus.CounterValue, float64(kv.Gaps))
	}
	if d := o.Director; d != nil {
		if fa, ok := d.Admission.(*requestcontrol.FlowAdmitter); ok && fa.Controller != nil {
			for _, b := range fa.Controller.Stats().Bands {
				prio := strconv.Itoa(b.Priority)
				gauge(g.fcSizeDesc, float64(b.Queued), prio, o.PoolName)
				gauge(g.fcBytesDesc, float64(b.Bytes), prio, o.PoolName)
				ch <- prometheus.MustNewConstSummary(g.fcWaitDesc, b.Dispatched, b.WaitTotal.Seconds(), nil, prio)
				for _, oc := range []struct {
					name string
					n    uint64
				}{{"dispatched", b.Dispatched}, {"rejected", b.Rejected}, {"expired", b.Expired}, {"cancelled", b.Cancelled}, {"drained", b.Drained}} {
					ch <- prometheus.MustNewConstMetric(g.fcOutcomeDesc, prometheus.CounterValue, float64(oc.n), prio, oc.name)
				}
			}
		}
	}
}

// capper bounds the distinct values of a label: the first limit values
// seen are kept, later ones become Other.
type capper struct {
	limit int
	seen  sync.Map // string → struct{}
	n     atomic.Int64
}

func (c *capper) value(v string) string {
	if _, ok := c.seen.Load(v); ok {
		return v
	}
	if c.n.Add(1) > int64(c.limit) {
		c.n.Add(-1)
		return Other
	}
	if _, loaded := c.seen.LoadOrStore(v, struct{}{}); loaded {
		c.n.Add(-1)
	}
	return v
}
