package metrics_test

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/eppkit/eppkit/datalayer/metrics"
)

// FuzzExtract feeds arbitrary text through the scrape path: Parse (with and
// without the filter, and through a Parser twice) and the extractor for
// every engine. Nothing may panic; a successful extraction must give usable
// metrics (no NaN, infinite or negative value); the filtered parse must
// agree with the reusing Parser.
func FuzzExtract(f *testing.F) {
	// Small seeds keep the fuzzer fast (it minimises every new input): the
	// vLLM page is cut to the families the extractor reads and one histogram.
	vllm := readFile(f, "vllm.prom")
	at := bytes.Index(vllm, []byte("# HELP vllm:num_requests_running"))
	end := bytes.Index(vllm, []byte("# HELP vllm:prefix_cache_queries_total"))
	hist := bytes.Index(vllm, []byte("# HELP vllm:request_params_n"))
	histEnd := bytes.Index(vllm, []byte("# HELP vllm:request_params_max_tokens"))
	lora := bytes.Index(vllm, []byte("# HELP vllm:lora_requests_info"))
	f.Add(slices.Concat(vllm[at:end], vllm[hist:histEnd], vllm[lora:]))
	for _, name := range []string{"vllm-v0.prom", "sglang.prom", "sglang-gauges.prom", "trtllm-serve.prom", "triton-tensorrt-llm.prom"} {
		f.Add(readFile(f, name))
	}
	f.Add([]byte(vllmCore + `vllm:lora_requests_info{max_lora="2",running_lora_adapters="a,,b ",waiting_lora_adapters=""} 1e9` + "\n"))
	f.Add([]byte("vllm:num_requests_waiting NaN\nvllm:num_requests_running -1\nvllm:kv_cache_usage_perc +Inf\n"))
	f.Add([]byte("# TYPE x histogram\nx_bucket{le=\"1\"} 1\nx_bucket{le=\"+Inf\"} 2\nx_sum 3\nx_count 2\n"))
	f.Add([]byte("a{b=\"c\"} 1\na{b=\"c\"} 2\n"))
	f.Add([]byte("{\"quoted.name\",a=\"b\"} 1\n"))
	x := extractor(f, `{"customMetrics": [{"attributeKey": "k", "metricSpec": "x_count", "optional": true}]}`)
	filter := metrics.NewFilter(x.MetricFamilies()...)
	f.Fuzz(func(t *testing.T, text []byte) {
		_, _ = metrics.Parse(text, nil)
		fams, err := metrics.Parse(text, filter)
		p := metrics.NewParser(filter)
		for range 2 {
			again, err2 := p.Parse(text)
			if (err == nil) != (err2 == nil) || err == nil && !sameFamilies(fams, again) {
				t.Fatalf("Parse and Parser disagree: %v / %v", err, err2)
			}
		}
		if err != nil {
			return
		}
		for _, engine := range x.Engines() {
			e := endpoint(engine)
			if err := x.Extract(fams, e); err == nil && !e.Metrics.Usable() {
				t.Fatalf("engine %s: extracted unusable metrics %+v", engine, e.Metrics)
			}
		}
	})
}

// sameFamilies compares two parses, NaN values included.
func sameFamilies(a, b metrics.Families) bool {
	if len(a) != len(b) {
		return false
	}
	for name, fa := range a {
		fb, ok := b[name]
		if !ok || fa.Type != fb.Type || len(fa.Samples) != len(fb.Samples) {
			return false
		}
		for i := range fa.Samples {
			sa, sb := fa.Samples[i], fb.Samples[i]
			if sa.Name != sb.Name || !reflect.DeepEqual(sa.Labels, sb.Labels) || math.Float64bits(sa.Value) != math.Float64bits(sb.Value) {
				return false
			}
		}
	}
	return true
}
