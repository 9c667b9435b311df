package metrics

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/plugins"
)

// EngineLabel is the endpoint label that names an endpoint's engine.
const EngineLabel = "llm-d.ai/engine-type"

// The built-in engines.
const (
	EngineVLLM   = "vllm"
	EngineSGLang = "sglang"
	EngineTRTLLM = "trtllm-serve"
	EngineTriton = "triton-tensorrt-llm"
)

// EngineConfig maps an engine's metric names to the Metrics fields. Each
// spec is a Selector (name{label="value",...}); a spec may list alternatives
// separated by "|", the first whose family the scrape holds being used (vLLM's
// KV usage is "vllm:kv_cache_usage_perc | vllm:gpu_cache_usage_perc"). An
// empty spec leaves the field unknown.
//
// Several series matching one spec (one per data-parallel engine, say) are
// combined: request counts, GPU blocks and custom metrics are summed, KV
// usage is averaged, block size takes the largest.
type EngineConfig struct {
	Name string `json:"name"`
	// QueuedRequestsSpec, RunningRequestsSpec and KVUsageSpec are required in
	// a scrape when set: a missing one fails the collection.
	QueuedRequestsSpec  string `json:"queuedRequestsSpec,omitempty"`
	RunningRequestsSpec string `json:"runningRequestsSpec,omitempty"`
	KVUsageSpec         string `json:"kvUsageSpec,omitempty"`
	// LoRASpec is an info gauge with labels running_lora_adapters,
	// waiting_lora_adapters (comma-separated names) and max_lora, whose value
	// is a timestamp: the series with the largest value is read; ties prefer
	// the series with non-empty adapter lists, then the smallest label values.
	LoRASpec string `json:"loraSpec,omitempty"`
	// CacheInfoSpec is an info gauge whose labels hold the block size and the
	// GPU block count (label names below, default block_size and
	// num_gpu_blocks); CacheBlockSizeSpec and CacheNumBlocksSpec are gauges
	// holding them as values, read when the info gauge does not give them.
	CacheInfoSpec           string `json:"cacheInfoSpec,omitempty"`
	CacheBlockSizeLabelName string `json:"cacheBlockSizeLabelName,omitempty"`
	CacheNumBlocksLabelName string `json:"cacheNumBlocksLabelName,omitempty"`
	CacheBlockSizeSpec      string `json:"cacheBlockSizeSpec,omitempty"`
	CacheNumBlocksSpec      string `json:"cacheNumBlocksSpec,omitempty"`
	// CustomMetrics are read into float64 endpoint attributes.
	CustomMetrics []CustomMetric `json:"customMetrics,omitempty"`
}

// CustomMetric reads the metric MetricSpec selects into the float64 endpoint
// attribute AttributeKey (AttributeKey(key) is its plugins.Key). A missing
// metric fails the collection unless Optional, which removes the attribute.
type CustomMetric struct {
	AttributeKey string `json:"attributeKey"`
	MetricSpec   string `json:"metricSpec"`
	Optional     bool   `json:"optional,omitempty"`
}

// AttributeKey returns the endpoint attribute key a custom metric is stored
// under.
func AttributeKey(name string) plugins.Key[float64] { return plugins.NewKey[float64](name) }

// builtinEngines are the mappings of SPEC §7 (SGLang's page_size and
// num_pages gauges, which newer SGLang versions expose instead of the info
// gauge, are read as a fallback).
var builtinEngines = []EngineConfig{
	{
		Name:                EngineVLLM,
		QueuedRequestsSpec:  "vllm:num_requests_waiting",
		RunningRequestsSpec: "vllm:num_requests_running",
		KVUsageSpec:         "vllm:kv_cache_usage_perc | vllm:gpu_cache_usage_perc",
		LoRASpec:            "vllm:lora_requests_info",
		CacheInfoSpec:       "vllm:cache_config_info",
	},
	{
		Name:                    EngineSGLang,
		QueuedRequestsSpec:      "sglang:num_queue_reqs",
		RunningRequestsSpec:     "sglang:num_running_reqs",
		KVUsageSpec:             "sglang:token_usage",
		CacheInfoSpec:           "sglang:cache_config_info",
		CacheBlockSizeLabelName: "page_size",
		CacheNumBlocksLabelName: "num_pages",
		CacheBlockSizeSpec:      "sglang:page_size",
		CacheNumBlocksSpec:      "sglang:num_pages",
	},
	{
		Name:                EngineTRTLLM,
		QueuedRequestsSpec:  "trtllm_num_requests_waiting",
		RunningRequestsSpec: "trtllm_num_requests_running",
		KVUsageSpec:         "trtllm_kv_cache_utilization",
		CacheBlockSizeSpec:  "trtllm_kv_cache_tokens_per_block",
		CacheNumBlocksSpec:  "trtllm_kv_cache_max_blocks",
	},
	{
		Name:                EngineTriton,
		QueuedRequestsSpec:  `nv_trt_llm_request_metrics{request_type="waiting"}`,
		RunningRequestsSpec: `nv_trt_llm_request_metrics{request_type="scheduled"}`,
		KVUsageSpec:         `nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"}`,
		CacheBlockSizeSpec:  `nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="tokens_per"}`,
		CacheNumBlocksSpec:  `nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max"}`,
	},
}

// BuiltinEngines returns the built-in engine mappings.
func BuiltinEngines() []EngineConfig {
	out := slices.Clone(builtinEngines)
	for i := range out {
		out[i].CustomMetrics = slices.Clone(out[i].CustomMetrics)
	}
	return out
}

// FamilyReader is implemented by extractors of this package's data that
// read only some metric families: the metrics-data-source parses just those.
type FamilyReader interface {
	MetricFamilies() []string
}

// CoreExtractor is the core-metrics-extractor plugin: it reads the engine
// metrics the stock plugins use (queue, running requests, KV usage, LoRA
// adapters, block size and count) from a metrics-data-source scrape into
// Endpoint.Metrics, and custom metrics into attributes. The endpoint's
// engine is its EngineLabelKey label, DefaultEngine when it has none.
//
// A scrape that lacks a required metric, or holds a NaN, infinite or
// negative value in one, fails the collection: the endpoint keeps its last
// good metrics, marked Stale, with LastError saying why (RecordFailure).
type CoreExtractor struct {
	EngineLabelKey string `json:"engineLabelKey" doc:"endpoint label naming the engine"`
	DefaultEngine  string `json:"defaultEngine" doc:"engine of endpoints without the label"`
	// EngineConfigs add engines or replace built-in ones of the same name.
	EngineConfigs []EngineConfig `json:"engineConfigs,omitempty" doc:"engine metric mappings, added to (or replacing) vllm, sglang, trtllm-serve and triton-tensorrt-llm"`
	// CustomMetrics are read for every engine, besides each engine's own.
	CustomMetrics []CustomMetric `json:"customMetrics,omitempty" doc:"metrics read into float64 attributes for every engine: attributeKey, metricSpec name{label=\"value\"}, optional"`

	engines map[string]*mapping
	clock   plugins.Clock
}

var (
	_ datalayer.Extractor       = (*CoreExtractor)(nil)
	_ datalayer.FailureRecorder = (*CoreExtractor)(nil)
	_ datalayer.Typed           = (*CoreExtractor)(nil)
	_ FamilyReader              = (*CoreExtractor)(nil)
)

// SetDefaults sets the engine label and vllm as the default engine.
func (x *CoreExtractor) SetDefaults() {
	x.EngineLabelKey = EngineLabel
	x.DefaultEngine = EngineVLLM
}

// Validate parses every spec and checks the default engine exists.
func (x *CoreExtractor) Validate() error {
	if x.EngineLabelKey == "" {
		return errors.New("engineLabelKey: must not be empty")
	}
	configs := slices.Clone(x.EngineConfigs)
	for _, b := range builtinEngines {
		if !slices.ContainsFunc(configs, func(c EngineConfig) bool { return c.Name == b.Name }) {
			configs = append(configs, b)
		}
	}
	if _, err := compile(EngineConfig{}, x.CustomMetrics); err != nil {
		return err
	}
	engines := make(map[string]*mapping, len(configs))
	var errs []error
	for i, c := range configs {
		path := fmt.Sprintf("engineConfigs[%d]", i)
		if i >= len(x.EngineConfigs) {
			path = "engine " + c.Name
		}
		if c.Name == "" {
			errs = append(errs, fmt.Errorf("%s.name: must not be empty", path))
			continue
		}
		if _, dup := engines[c.Name]; dup {
			errs = append(errs, fmt.Errorf("%s.name: engine %q is configured twice", path, c.Name))
			continue
		}
		m, err := compile(c, x.CustomMetrics)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			continue
		}
		engines[c.Name] = m
	}
	if len(errs) == 0 && engines[x.DefaultEngine] == nil {
		errs = append(errs, fmt.Errorf("defaultEngine: unknown engine %q (known: %s)", x.DefaultEngine, strings.Join(sortedKeys(engines), ", ")))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	x.engines = engines
	return nil
}

// Init keeps the clock that stamps UpdateTime.
func (x *CoreExtractor) Init(_ context.Context, deps plugins.Deps) error {
	x.clock = deps.Clock
	return nil
}

// Engines returns the names of the engines x knows, sorted.
func (x *CoreExtractor) Engines() []string { return sortedKeys(x.engines) }

// DataType returns the type of metrics-data-source data: Families.
func (x *CoreExtractor) DataType() reflect.Type { return reflect.TypeFor[Families]() }

// MetricFamilies returns every metric family some engine of x reads.
func (x *CoreExtractor) MetricFamilies() []string {
	var names []string
	for _, m := range x.engines {
		names = append(names, m.families()...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Extract reads data, a Families, into e.Metrics (UpdateTime now, Stale
// cleared) and the custom metrics into e.Attrs.
func (x *CoreExtractor) Extract(data any, e *datalayer.Endpoint) error {
	fams, ok := data.(Families)
	if !ok {
		return fmt.Errorf("core-metrics-extractor: got %T, want metrics.Families", data)
	}
	if x.engines == nil {
		return errors.New("core-metrics-extractor: not validated (call Validate)")
	}
	engine := e.Labels[x.EngineLabelKey]
	if engine == "" {
		engine = x.DefaultEngine
	}
	m := x.engines[engine]
	if m == nil {
		return fmt.Errorf("unknown engine %q (label %s; known: %s)", engine, x.EngineLabelKey, strings.Join(x.Engines(), ", "))
	}
	met, err := m.extract(fams)
	if err != nil {
		return fmt.Errorf("engine %s: %w", engine, err)
	}
	for _, c := range m.custom {
		v, found, err := value(fams, c.sels, sum, true)
		switch {
		case err != nil:
			return fmt.Errorf("engine %s: custom metric %q: %w", engine, c.key.KeyName(), err)
		case found:
			plugins.Set(&e.Attrs, c.key, v)
		case c.optional:
			e.Attrs.Delete(c.key.KeyName())
		default:
			return fmt.Errorf("engine %s: custom metric %q: %s: missing", engine, c.key.KeyName(), altString(c.sels))
		}
	}
	if x.clock != nil {
		met.UpdateTime = x.clock.Now()
	} else {
		met.UpdateTime = plugins.SystemClock{}.Now()
	}
	e.Metrics = met
	return nil
}

// RecordFailure keeps e's last good metrics and marks them stale.
func (x *CoreExtractor) RecordFailure(err error, e *datalayer.Endpoint) {
	e.Metrics.Stale = true
	e.Metrics.LastError = err.Error()
	e.Metrics.Failures++
}

// mapping is a compiled EngineConfig.
type mapping struct {
	waiting, running, kv []Selector
	lora                 []Selector
	cacheInfo            []Selector
	blockSizeLabel       string
	numBlocksLabel       string
	blockSize, numBlocks []Selector
	custom               []custom
}

type custom struct {
	key      plugins.Key[float64]
	sels     []Selector
	optional bool
}

func compile(c EngineConfig, common []CustomMetric) (*mapping, error) {
	var errs []error
	spec := func(field, s string) []Selector {
		sels, err := parseAlternatives(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
		}
		return sels
	}
	m := &mapping{
		waiting:        spec("queuedRequestsSpec", c.QueuedRequestsSpec),
		running:        spec("runningRequestsSpec", c.RunningRequestsSpec),
		kv:             spec("kvUsageSpec", c.KVUsageSpec),
		lora:           spec("loraSpec", c.LoRASpec),
		cacheInfo:      spec("cacheInfoSpec", c.CacheInfoSpec),
		blockSizeLabel: cmp(c.CacheBlockSizeLabelName, "block_size"),
		numBlocksLabel: cmp(c.CacheNumBlocksLabelName, "num_gpu_blocks"),
		blockSize:      spec("cacheBlockSizeSpec", c.CacheBlockSizeSpec),
		numBlocks:      spec("cacheNumBlocksSpec", c.CacheNumBlocksSpec),
	}
	keys := map[string]bool{}
	add := func(field string, cms []CustomMetric) {
		for i, cm := range cms {
			path := fmt.Sprintf("%s[%d]", field, i)
			switch {
			case cm.AttributeKey == "":
				errs = append(errs, fmt.Errorf("%s.attributeKey: must not be empty", path))
				continue
			case keys[cm.AttributeKey]:
				errs = append(errs, fmt.Errorf("%s.attributeKey: %q is used twice", path, cm.AttributeKey))
				continue
			case strings.TrimSpace(cm.MetricSpec) == "":
				errs = append(errs, fmt.Errorf("%s.metricSpec: must not be empty", path))
				continue
			}
			keys[cm.AttributeKey] = true
			m.custom = append(m.custom, custom{key: AttributeKey(cm.AttributeKey), sels: spec(path+".metricSpec", cm.MetricSpec), optional: cm.Optional})
		}
	}
	add("customMetrics", common)
	add("customMetrics", c.CustomMetrics)
	return m, errors.Join(errs...)
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// parseAlternatives parses "sel | sel ...". An empty string is no selector.
func parseAlternatives(s string) ([]Selector, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []Selector
	for _, part := range splitAlternatives(s) {
		sel, err := ParseSelector(part)
		if err != nil {
			return nil, err
		}
		out = append(out, sel)
	}
	return out, nil
}

// splitAlternatives splits s at the "|" outside quoted label values.
func splitAlternatives(s string) []string {
	var parts []string
	inQuote, start := false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && inQuote:
			i++
		case c == '"':
			inQuote = !inQuote
		case c == '|' && !inQuote:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

func altString(sels []Selector) string {
	parts := make([]string, len(sels))
	for i, s := range sels {
		parts[i] = s.String()
	}
	return strings.Join(parts, " | ")
}

func (m *mapping) families() []string {
	var names []string
	for _, sels := range [][]Selector{m.waiting, m.running, m.kv, m.lora, m.cacheInfo, m.blockSize, m.numBlocks} {
		for _, s := range sels {
			names = append(names, s.Name)
		}
	}
	for _, c := range m.custom {
		for _, s := range c.sels {
			names = append(names, s.Name)
		}
	}
	return names
}

func (m *mapping) extract(fams Families) (datalayer.Metrics, error) {
	var out datalayer.Metrics
	var errs []error
	count := func(sels []Selector) int {
		if len(sels) == 0 {
			return 0
		}
		v, found, err := value(fams, sels, sum, false)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !found:
			errs = append(errs, fmt.Errorf("%s: missing", altString(sels)))
		case v > math.MaxInt32:
			errs = append(errs, fmt.Errorf("%s = %v: out of range", altString(sels), v))
		default:
			return int(math.Round(v))
		}
		return 0
	}
	out.Waiting = count(m.waiting)
	out.Running = count(m.running)
	if len(m.kv) > 0 {
		v, found, err := value(fams, m.kv, mean, false)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !found:
			errs = append(errs, fmt.Errorf("%s: missing", altString(m.kv)))
		default:
			out.KVUsage = v
		}
	}
	lora, err := m.loraInfo(fams)
	if err != nil {
		errs = append(errs, err)
	}
	out.LoRA = lora
	out.BlockSize, out.GPUBlocks = m.cacheConfig(fams)
	return out, errors.Join(errs...)
}

type combine uint8

const (
	sum combine = iota
	mean
	largest
)

// value reads the first alternative whose family the scrape holds: the
// matching series combined by how. found is false when no alternative's
// family holds a matching series. NaN and infinities are errors, and so are
// negative values unless negativeOK.
func value(fams Families, alts []Selector, how combine, negativeOK bool) (v float64, found bool, err error) {
	for _, sel := range alts {
		series := fams.Series(sel.Name)
		if len(series) == 0 {
			continue
		}
		n := 0
		for i := range series {
			s := &series[i]
			if !sel.Matches(s.Labels) {
				continue
			}
			switch {
			case math.IsNaN(s.Value) || math.IsInf(s.Value, 0):
				return 0, false, fmt.Errorf("%s = %v: not a finite number", seriesString(s.Name, s.Labels), s.Value)
			case s.Value < 0 && !negativeOK:
				return 0, false, fmt.Errorf("%s = %v: negative", seriesString(s.Name, s.Labels), s.Value)
			}
			switch {
			case n == 0:
				v = s.Value
			case how == largest:
				v = max(v, s.Value)
			default:
				v += s.Value
			}
			n++
		}
		if n == 0 {
			continue
		}
		if how == mean {
			v /= float64(n)
		}
		return v, true, nil
	}
	return 0, false, nil
}

// loraInfo reads the LoRA info gauge: the series with the largest value (a
// timestamp); ties prefer non-empty adapter lists, then the smallest label
// values, so the choice never depends on the order of the lines.
func (m *mapping) loraInfo(fams Families) (datalayer.LoRA, error) {
	var best *Sample
	var bestRank loraRank
	seen := 0
	for _, sel := range m.lora {
		for _, s := range sel.Select(fams) {
			seen++
			if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
				continue
			}
			r := rankOf(s)
			if best == nil || r.better(bestRank) {
				s := s
				best, bestRank = &s, r
			}
		}
		if seen > 0 {
			break
		}
	}
	if best == nil {
		if seen > 0 {
			return datalayer.LoRA{}, fmt.Errorf("%s: no series with a finite value", altString(m.lora))
		}
		return datalayer.LoRA{}, nil
	}
	l := datalayer.LoRA{Active: bestRank.running, Waiting: bestRank.waiting}
	if v, ok := best.Labels.Get("max_lora"); ok && v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return datalayer.LoRA{}, fmt.Errorf("%s: max_lora=%q is not a count", best.Name, v)
		}
		l.Max = n
	}
	return l, nil
}

type loraRank struct {
	value            float64
	nonEmpty         int
	running, waiting []string
	key              string // the raw labels, for the last tie-break
}

func rankOf(s Sample) loraRank {
	run, _ := s.Labels.Get("running_lora_adapters")
	wait, _ := s.Labels.Get("waiting_lora_adapters")
	maxLoRA, _ := s.Labels.Get("max_lora")
	r := loraRank{value: s.Value, running: splitList(run), waiting: splitList(wait), key: run + "\x00" + wait + "\x00" + maxLoRA}
	if len(r.running) > 0 {
		r.nonEmpty++
	}
	if len(r.waiting) > 0 {
		r.nonEmpty++
	}
	return r
}

func (r loraRank) better(o loraRank) bool {
	if r.value != o.value {
		return r.value > o.value
	}
	if r.nonEmpty != o.nonEmpty {
		return r.nonEmpty > o.nonEmpty
	}
	return r.key < o.key
}

// splitList splits a comma-separated adapter list, dropping blanks.
func splitList(s string) []string {
	out := []string{}
	for part := range strings.SplitSeq(s, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// cacheConfig reads the block size and GPU block count: from the info
// gauge's labels, else from the gauges. Unknown or malformed values are 0
// (unknown); they never fail the collection.
func (m *mapping) cacheConfig(fams Families) (blockSize, gpuBlocks int) {
	for _, sel := range m.cacheInfo {
		series := sel.Select(fams)
		for _, s := range series {
			blockSize = max(blockSize, labelInt(s.Labels, m.blockSizeLabel))
			gpuBlocks += labelInt(s.Labels, m.numBlocksLabel)
		}
		if len(series) > 0 {
			break
		}
	}
	gauge := func(sels []Selector, how combine) int {
		v, found, err := value(fams, sels, how, false)
		if err != nil || !found || v > math.MaxInt32 {
			return 0
		}
		return int(math.Round(v))
	}
	if blockSize == 0 {
		blockSize = gauge(m.blockSize, largest)
	}
	if gpuBlocks == 0 {
		gpuBlocks = gauge(m.numBlocks, sum)
	}
	return blockSize, gpuBlocks
}

func labelInt(l Labels, name string) int {
	v, ok := l.Get(name)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 || n > math.MaxInt32 {
		return 0 // "None" before the engine profiled its memory
	}
	return n
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
