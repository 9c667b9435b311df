package metrics_test

import (
	"fmt"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/datalayer/metrics"
)

// The core extractor reads an engine's metrics, chosen by the endpoint's
// engine label, from a parsed scrape.
func ExampleCoreExtractor() {
	x := &metrics.CoreExtractor{}
	x.SetDefaults()
	if err := x.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	page := []byte(`# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{tp_rank="0"} 3
sglang:num_running_reqs{tp_rank="0"} 17
sglang:token_usage{tp_rank="0"} 0.25
sglang:cache_config_info{num_pages="412930",page_size="1"} 1
`)
	fams, err := metrics.Parse(page, metrics.NewFilter(x.MetricFamilies()...))
	if err != nil {
		fmt.Println(err)
		return
	}
	e := datalayer.New("sglang-0", "10.0.0.1", 30000, map[string]string{metrics.EngineLabel: metrics.EngineSGLang})
	if err := x.Extract(fams, e); err != nil {
		fmt.Println(err)
		return
	}
	m := e.Metrics
	fmt.Println(m.Waiting, m.Running, m.KVUsage, m.BlockSize, m.GPUBlocks)
	// Output:
	// 3 17 0.25 1 412930
}

// Custom engines and metrics use the selector syntax name{label="value"}.
func ExampleParseSelector() {
	sel, err := metrics.ParseSelector(`nv_trt_llm_request_metrics{request_type=waiting}`)
	fmt.Println(sel, err)
	fmt.Println(sel.Matches(metrics.Labels{{Name: "model", Value: "tensorrt_llm"}, {Name: "request_type", Value: "waiting"}}))
	// Output:
	// nv_trt_llm_request_metrics{request_type="waiting"} <nil>
	// true
}
