package metrics_test

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/datalayer/metrics"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// extractor returns a validated core-metrics-extractor with params (JSON)
// and a fixed clock.
func extractor(t testing.TB, params string) *metrics.CoreExtractor {
	t.Helper()
	reg := plugins.NewRegistry()
	plugins.Register[*metrics.CoreExtractor](reg, "core-metrics-extractor")
	p, err := reg.Build("core-metrics-extractor", "core", []byte(params))
	if err != nil {
		t.Fatal(err)
	}
	x := p.(*metrics.CoreExtractor)
	if err := x.Init(t.Context(), plugins.Deps{Clock: fixedClock{now}}); err != nil {
		t.Fatal(err)
	}
	return x
}

func endpoint(engine string) *datalayer.Endpoint {
	var labels map[string]string
	if engine != "" {
		labels = map[string]string{metrics.EngineLabel: engine}
	}
	return datalayer.New("e", "10.0.0.1", 8000, labels)
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// extract parses text as the source would and runs x on an endpoint of engine.
func extract(t testing.TB, x *metrics.CoreExtractor, engine, text string) (*datalayer.Endpoint, error) {
	t.Helper()
	fams, err := metrics.Parse([]byte(text), metrics.NewFilter(x.MetricFamilies()...))
	if err != nil {
		return nil, err
	}
	e := endpoint(engine)
	return e, x.Extract(fams, e)
}

func TestEngines(t *testing.T) {
	x := extractor(t, "")
	tests := []struct {
		file, engine string
		want         datalayer.Metrics
	}{
		{"vllm.prom", "", datalayer.Metrics{Waiting: 7, Running: 23, KVUsage: 0.6218371204536327, BlockSize: 16, GPUBlocks: 71372,
			LoRA: datalayer.LoRA{Active: []string{"sql-lora", "tweet-summary"}, Waiting: []string{"chat-lora"}, Max: 4}}},
		{"vllm.prom", "vllm", datalayer.Metrics{Waiting: 7, Running: 23, KVUsage: 0.6218371204536327, BlockSize: 16, GPUBlocks: 71372,
			LoRA: datalayer.LoRA{Active: []string{"sql-lora", "tweet-summary"}, Waiting: []string{"chat-lora"}, Max: 4}}},
		{"vllm-v0.prom", "vllm", datalayer.Metrics{Waiting: 0, Running: 4, KVUsage: 0.125, BlockSize: 32, GPUBlocks: 27910,
			LoRA: datalayer.LoRA{Active: []string{}, Waiting: []string{}, Max: 1}}},
		{"sglang.prom", "sglang", datalayer.Metrics{Waiting: 3, Running: 17, KVUsage: 0.25, BlockSize: 1, GPUBlocks: 412930}},
		{"sglang-gauges.prom", "sglang", datalayer.Metrics{Waiting: 0, Running: 2, KVUsage: 0.0125, BlockSize: 64, GPUBlocks: 3125}},
		{"trtllm-serve.prom", "trtllm-serve", datalayer.Metrics{Waiting: 2, Running: 9, KVUsage: 0.4375, BlockSize: 32, GPUBlocks: 19958}},
		{"triton-tensorrt-llm.prom", "triton-tensorrt-llm", datalayer.Metrics{Waiting: 2, Running: 6, KVUsage: 0.3125, BlockSize: 64, GPUBlocks: 5920}},
	}
	for _, tt := range tests {
		t.Run(tt.file+"/"+tt.engine, func(t *testing.T) {
			e, err := extract(t, x, tt.engine, string(readFile(t, tt.file)))
			if err != nil {
				t.Fatal(err)
			}
			tt.want.UpdateTime = now
			if !reflect.DeepEqual(e.Metrics, tt.want) {
				t.Errorf("got  %+v\nwant %+v", e.Metrics, tt.want)
			}
			if !e.Metrics.Usable() {
				t.Error("not usable")
			}
		})
	}
}

func TestWrongEngineFails(t *testing.T) {
	x := extractor(t, "")
	_, err := extract(t, x, "sglang", string(readFile(t, "vllm.prom")))
	if err == nil || !strings.Contains(err.Error(), "sglang:num_queue_reqs: missing") {
		t.Errorf("got %v", err)
	}
	_, err = extract(t, x, "tgi", string(readFile(t, "vllm.prom")))
	if err == nil || !strings.Contains(err.Error(), `unknown engine "tgi"`) {
		t.Errorf("got %v", err)
	}
}

const vllmCore = `vllm:num_requests_waiting 1
vllm:num_requests_running 2
vllm:kv_cache_usage_perc 0.5
`

// TestLoRATieBreak: the largest value wins; equal values prefer non-empty
// lists, then the smallest labels, whatever the order of the lines.
func TestLoRATieBreak(t *testing.T) {
	x := extractor(t, "")
	series := []string{
		`vllm:lora_requests_info{max_lora="2",running_lora_adapters="",waiting_lora_adapters=""} 100`,
		`vllm:lora_requests_info{max_lora="2",running_lora_adapters="b",waiting_lora_adapters=""} 100`,
		`vllm:lora_requests_info{max_lora="2",running_lora_adapters="a",waiting_lora_adapters="c"} 100`,
		`vllm:lora_requests_info{max_lora="2",running_lora_adapters="z",waiting_lora_adapters="y"} 100`,
		`vllm:lora_requests_info{max_lora="2",running_lora_adapters="old",waiting_lora_adapters="old"} 99`,
	}
	want := datalayer.LoRA{Active: []string{"a"}, Waiting: []string{"c"}, Max: 2}
	perms := [][]int{{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {2, 0, 4, 1, 3}, {3, 2, 1, 0, 4}}
	for _, p := range perms {
		var b strings.Builder
		b.WriteString(vllmCore)
		for _, i := range p {
			b.WriteString(series[i] + "\n")
		}
		e, err := extract(t, x, "", b.String())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(e.Metrics.LoRA, want) {
			t.Errorf("order %v: got %+v", p, e.Metrics.LoRA)
		}
	}
	// A newer timestamp beats non-empty lists.
	e, err := extract(t, x, "", vllmCore+series[1]+"\n"+`vllm:lora_requests_info{max_lora="2",running_lora_adapters="",waiting_lora_adapters=""} 101`+"\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Metrics.LoRA.Active) != 0 || e.Metrics.LoRA.Max != 2 {
		t.Errorf("got %+v", e.Metrics.LoRA)
	}
}

func TestBadValues(t *testing.T) {
	x := extractor(t, "")
	tests := []struct{ name, text, want string }{
		{"NaN", "vllm:num_requests_waiting NaN\nvllm:num_requests_running 1\nvllm:kv_cache_usage_perc 0.1\n", "not a finite number"},
		{"Inf", "vllm:num_requests_waiting 1\nvllm:num_requests_running +Inf\nvllm:kv_cache_usage_perc 0.1\n", "not a finite number"},
		{"negative", "vllm:num_requests_waiting -3\nvllm:num_requests_running 1\nvllm:kv_cache_usage_perc 0.1\n", "negative"},
		{"negative kv", vllmCore[:len(vllmCore)-len("vllm:kv_cache_usage_perc 0.5\n")] + "vllm:kv_cache_usage_perc -0.5\n", "negative"},
		{"missing kv", "vllm:num_requests_waiting 1\nvllm:num_requests_running 1\n", "vllm:kv_cache_usage_perc | vllm:gpu_cache_usage_perc: missing"},
		{"missing everything", "# nothing here\nfoo 1\n", "vllm:num_requests_waiting: missing"},
		{"huge", "vllm:num_requests_waiting 1e300\nvllm:num_requests_running 1\nvllm:kv_cache_usage_perc 0.1\n", "out of range"},
		{"lora NaN only", vllmCore + `vllm:lora_requests_info{max_lora="1"} NaN` + "\n", "no series with a finite value"},
		{"lora bad max", vllmCore + `vllm:lora_requests_info{max_lora="x"} 1` + "\n", `max_lora="x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := extract(t, x, "", tt.text)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// TestDataParallel: several series of one metric are combined.
func TestDataParallel(t *testing.T) {
	x := extractor(t, "")
	text := `vllm:num_requests_waiting{engine="0"} 1
vllm:num_requests_waiting{engine="1"} 4
vllm:num_requests_running{engine="0"} 2
vllm:num_requests_running{engine="1"} 3
vllm:kv_cache_usage_perc{engine="0"} 0.2
vllm:kv_cache_usage_perc{engine="1"} 0.6
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="100"} 1
vllm:cache_config_info{block_size="16",engine="1",num_gpu_blocks="120"} 1
`
	e, err := extract(t, x, "", text)
	if err != nil {
		t.Fatal(err)
	}
	m := e.Metrics
	if m.Waiting != 5 || m.Running != 5 || math.Abs(m.KVUsage-0.4) > 1e-12 || m.BlockSize != 16 || m.GPUBlocks != 220 {
		t.Errorf("got %+v", m)
	}
}

func TestCacheInfoUnknownValues(t *testing.T) {
	x := extractor(t, "")
	e, err := extract(t, x, "", vllmCore+`vllm:cache_config_info{block_size="16",num_gpu_blocks="None"} 1`+"\n")
	if err != nil {
		t.Fatal(err)
	}
	if e.Metrics.BlockSize != 16 || e.Metrics.GPUBlocks != 0 {
		t.Errorf("got %+v", e.Metrics)
	}
}

func TestCustomEngineAndMetrics(t *testing.T) {
	x := extractor(t, `{
	  "customMetrics": [{"attributeKey": "prefix-hits", "metricSpec": "vllm:prefix_cache_hits_total", "optional": true}],
	  "engineConfigs": [{
	    "name": "my-engine",
	    "queuedRequestsSpec": "custom_queue_size{status=waiting}",
	    "runningRequestsSpec": "custom_queue_size{status=\"running\"}",
	    "kvUsageSpec": "custom_cache_utilization",
	    "customMetrics": [{"attributeKey": "custom.queue_depth", "metricSpec": "custom_queue_depth{tier=\"gold\"}"}]
	  }]
	}`)
	text := `custom_queue_size{status="waiting"} 4
custom_queue_size{status="running"} 6
custom_cache_utilization 0.75
custom_queue_depth{tier="gold"} 12
custom_queue_depth{tier="silver"} 99
vllm:prefix_cache_hits_total 5
`
	e, err := extract(t, x, "my-engine", text)
	if err != nil {
		t.Fatal(err)
	}
	if e.Metrics.Waiting != 4 || e.Metrics.Running != 6 || e.Metrics.KVUsage != 0.75 {
		t.Errorf("metrics %+v", e.Metrics)
	}
	if v, ok := plugins.Get(&e.Attrs, metrics.AttributeKey("custom.queue_depth")); !ok || v != 12 {
		t.Errorf("custom.queue_depth = %v %v", v, ok)
	}
	if v, ok := plugins.Get(&e.Attrs, metrics.AttributeKey("prefix-hits")); !ok || v != 5 {
		t.Errorf("prefix-hits = %v %v", v, ok)
	}
	// The required custom metric missing fails; the optional one is removed.
	e.Metrics = datalayer.Metrics{}
	fams, _ := metrics.Parse([]byte(text[:strings.Index(text, "custom_queue_depth")]), nil)
	if err := x.Extract(fams, e); err == nil || !strings.Contains(err.Error(), `custom metric "custom.queue_depth"`) {
		t.Errorf("got %v", err)
	}
	fams, _ = metrics.Parse([]byte(text[:strings.Index(text, "vllm:prefix")]), nil)
	if err := x.Extract(fams, e); err != nil {
		t.Fatal(err)
	}
	if _, ok := plugins.Get(&e.Attrs, metrics.AttributeKey("prefix-hits")); ok {
		t.Error("the optional attribute stayed after its metric vanished")
	}
	// The built-in engines are still there.
	if got := strings.Join(x.Engines(), ","); got != "my-engine,sglang,triton-tensorrt-llm,trtllm-serve,vllm" {
		t.Errorf("engines %s", got)
	}
}

func TestValidate(t *testing.T) {
	reg := plugins.NewRegistry()
	plugins.Register[*metrics.CoreExtractor](reg, "core-metrics-extractor")
	tests := []struct{ params, want string }{
		{`{"defaultEngine": "tgi"}`, `defaultEngine: unknown engine "tgi"`},
		{`{"engineConfigs": [{"name": ""}]}`, "engineConfigs[0].name: must not be empty"},
		{`{"engineConfigs": [{"name": "a", "kvUsageSpec": "x{y=~\"z\"}"}]}`, "only = matchers"},
		{`{"engineConfigs": [{"name": "a"}, {"name": "a"}]}`, `engine "a" is configured twice`},
		{`{"customMetrics": [{"attributeKey": "k", "metricSpec": "a"}, {"attributeKey": "k", "metricSpec": "b"}]}`, `"k" is used twice`},
		{`{"customMetrics": [{"attributeKey": "k", "metricSpec": ""}]}`, "metricSpec: must not be empty"},
		{`{"engineLabelKey": ""}`, "engineLabelKey"},
	}
	for _, tt := range tests {
		_, err := reg.Build("core-metrics-extractor", "core", []byte(tt.params))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.params, err, tt.want)
		}
	}
}

func TestRecordFailureKeepsValues(t *testing.T) {
	x := extractor(t, "")
	e, err := extract(t, x, "", vllmCore)
	if err != nil {
		t.Fatal(err)
	}
	x.RecordFailure(os.ErrDeadlineExceeded, e)
	x.RecordFailure(os.ErrDeadlineExceeded, e)
	m := e.Metrics
	if !m.Stale || m.Failures != 2 || m.LastError == "" || m.Waiting != 1 || !m.UpdateTime.Equal(now) || m.Usable() {
		t.Errorf("got %+v", m)
	}
	if age := m.Age(now.Add(time.Second)); age != time.Second {
		t.Errorf("age %v", age)
	}
}

func TestExtractorLifecycle(t *testing.T) {
	reg := plugins.NewRegistry()
	plugins.Register[*metrics.CoreExtractor](reg, "core-metrics-extractor")
	plugins.Register[*metrics.Source](reg, "metrics-data-source")
	pluginstest.TestLifecycle(t, reg, "core-metrics-extractor")
	pluginstest.TestLifecycle(t, reg, "metrics-data-source")
}

func TestVariantsDiffer(t *testing.T) {
	x := extractor(t, "")
	p := metrics.NewParser(metrics.NewFilter(x.MetricFamilies()...))
	for i, page := range variants(readFile(t, "vllm.prom"), 3) {
		fams, err := p.Parse(page)
		if err != nil {
			t.Fatal(err)
		}
		e := endpoint("")
		if err := x.Extract(fams, e); err != nil {
			t.Fatal(err)
		}
		if e.Metrics.Waiting != i || e.Metrics.Running != 20+i || e.Metrics.GPUBlocks != 71372 || len(e.Metrics.LoRA.Active) != 2 {
			t.Errorf("variant %d: %+v", i, e.Metrics)
		}
	}
}
