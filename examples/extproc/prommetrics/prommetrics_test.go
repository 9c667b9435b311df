package prommetrics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/examples/extproc/prommetrics"
	"github.com/eppkit/eppkit/flowcontrol"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins/pluginstest"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/requestcontrol/producers/precise"
	"github.com/eppkit/eppkit/requestcontrol/producers/prefix"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/schedulingtest"
)

func TestExport(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	approx := pluginstest.Build[*prefix.Approx](t, std.Registry(), "approx-prefix-cache-producer", "")
	approx.Index().Add("10.0.0.1:8000", []uint64{1, 2, 3})
	now := time.Now()
	ep := func(name string, w, r int, kv float64) *datalayer.Endpoint {
		return datalayer.New(name, "10.0.0.1", 8000, nil).WithMetrics(datalayer.Metrics{Waiting: w, Running: r, KVUsage: kv, UpdateTime: now})
	}
	d := &requestcontrol.Director{Pool: requestcontrol.StaticPool{ep("a", 2, 4, 0.5), ep("b", 4, 0, 0.1)}}
	m, err := prommetrics.New(reg, prommetrics.Options{LabelLimit: 2, Director: d,
		Plugins: map[string]any{"approx": approx}})
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"a", "b", "c", "d", "a"} {
		m.Request(requestcontrol.RequestMetrics{Model: model, TargetModel: model, FairnessID: "f", Status: 200,
			Duration: 30 * time.Millisecond, Usage: parsers.Usage{PromptTokens: 100, CompletionTokens: 10}})
	}
	m.Request(requestcontrol.RequestMetrics{Model: "a", Status: 429, Reason: requestcontrol.ReasonSaturated})
	m.Stage(requestcontrol.StageScheduling, 20*time.Microsecond)
	m.Stage(requestcontrol.StageParse, 10*time.Microsecond)
	m.Plugin(requestcontrol.PluginCall{Point: "Scorer", Type: "queue-scorer", Name: "q"}, time.Microsecond)
	m.PrefixMatch("approx", 0.75)

	want := `
# HELP llm_d_epp_request_total Total number of processed requests.
# TYPE llm_d_epp_request_total counter
llm_d_epp_request_total{fairness_id="",model_name="a",priority="0",target_model_name="other"} 1
llm_d_epp_request_total{fairness_id="f",model_name="a",priority="0",target_model_name="a"} 2
llm_d_epp_request_total{fairness_id="f",model_name="b",priority="0",target_model_name="b"} 1
llm_d_epp_request_total{fairness_id="f",model_name="other",priority="0",target_model_name="other"} 2
# HELP llm_d_epp_request_error_total Total number of request errors.
# TYPE llm_d_epp_request_error_total counter
llm_d_epp_request_error_total{error_code="rejected-saturated",fairness_id="",model_name="a",priority="0",target_model_name="other"} 1
# HELP eppkit_request_status_total Requests answered, by HTTP status and drop reason.
# TYPE eppkit_request_status_total counter
eppkit_request_status_total{code="200",reason=""} 5
eppkit_request_status_total{code="429",reason="rejected-saturated"} 1
# HELP llm_d_epp_ready_endpoints The number of ready endpoints in the inference server pool.
# TYPE llm_d_epp_ready_endpoints gauge
llm_d_epp_ready_endpoints{name="default"} 2
# HELP llm_d_epp_average_queue_size The average number of requests pending in the model server queue.
# TYPE llm_d_epp_average_queue_size gauge
llm_d_epp_average_queue_size{name="default"} 3
# HELP llm_d_epp_average_kv_cache_utilization The average kv cache utilization for an inference server pool.
# TYPE llm_d_epp_average_kv_cache_utilization gauge
llm_d_epp_average_kv_cache_utilization{name="default"} 0.3
# HELP llm_d_epp_prefix_indexer_size Entries held in a prefix producer's index.
# TYPE llm_d_epp_prefix_indexer_size gauge
llm_d_epp_prefix_indexer_size{producer="approx"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llm_d_epp_request_total", "llm_d_epp_request_error_total",
		"eppkit_request_status_total", "llm_d_epp_ready_endpoints", "llm_d_epp_average_queue_size",
		"llm_d_epp_average_kv_cache_utilization", "llm_d_epp_prefix_indexer_size"); err != nil {
		t.Error(err)
	}
	for name, n := range map[string]int{
		"llm_d_epp_request_duration_seconds":       3, // a, b, other
		"llm_d_epp_request_input_tokens":           3,
		"eppkit_stage_duration_seconds":            2,
		"llm_d_epp_scheduler_e2e_duration_seconds": 1,
		"llm_d_epp_plugin_duration_seconds":        1,
		"llm_d_epp_prefix_indexer_hit_ratio":       1,
	} {
		if got, err := testutil.GatherAndCount(reg, name); err != nil || got != n {
			t.Errorf("%s: %d series (%v), want %d", name, got, err, n)
		}
	}
}

func TestRegisterTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := prommetrics.New(reg, prommetrics.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := prommetrics.New(reg, prommetrics.Options{}); err == nil {
		t.Error("registering twice succeeded")
	}
}

// TestStateGauges reads flow-control queues and KV-event counters from the
// picker's own objects at each scrape.
func TestStateGauges(t *testing.T) {
	fc, err := flowcontrol.New(flowcontrol.Config{Bands: []flowcontrol.BandConfig{{Priority: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	pp := pluginstest.Build[*precise.Producer](t, std.Registry(), precise.TypeName,
		`{"kvEventsConfig":{"mode":"bind","zmqEndpoint":"tcp://127.0.0.1:0"}}`)
	defer pp.Close()
	reg := prometheus.NewPedanticRegistry()
	d := &requestcontrol.Director{Admission: &requestcontrol.FlowAdmitter{Controller: fc}}
	if _, err := prommetrics.New(reg, prommetrics.Options{Director: d, Plugins: map[string]any{"precise": pp}}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP llm_d_epp_flow_control_queue_size Current number of requests actively held in the Flow Control queue.
# TYPE llm_d_epp_flow_control_queue_size gauge
llm_d_epp_flow_control_queue_size{inference_pool="default",priority="5"} 0
# HELP eppkit_kv_events_messages_total KV-event messages, by outcome.
# TYPE eppkit_kv_events_messages_total counter
eppkit_kv_events_messages_total{outcome="dropped"} 0
eppkit_kv_events_messages_total{outcome="received"} 0
# HELP llm_d_epp_prefix_indexer_size Entries held in a prefix producer's index.
# TYPE llm_d_epp_prefix_indexer_size gauge
llm_d_epp_prefix_indexer_size{producer="precise"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llm_d_epp_flow_control_queue_size",
		"eppkit_kv_events_messages_total", "llm_d_epp_prefix_indexer_size"); err != nil {
		t.Error(err)
	}
	if n, _ := testutil.GatherAndCount(reg, "eppkit_flow_control_queue_wait_seconds", "eppkit_flow_control_requests_total", "eppkit_kv_events_gaps_total"); n != 7 {
		t.Errorf("%d flow-control and gap series, want 7", n)
	}
}

// TestSharedIndexBackend: a prefix producer whose index is shared in Redis
// has no local index to size; its failed calls to the server are counted.
func TestSharedIndexBackend(t *testing.T) {
	approx := pluginstest.Build[*prefix.Approx](t, std.Registry(), scheduling.DefaultPrefixProducer,
		`{"indexBackend":"redis","redis":{"address":"127.0.0.1:1","timeout":"1s"}}`) // nothing listens on port 1
	req := schedulingtest.Req("m").Body(&parsers.Body{Model: "m", Prompt: strings.Repeat("x", 1000)}).Build()
	if err := approx.Produce(context.Background(), req, schedulingtest.Eps(schedulingtest.Ep("a"))); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if _, err := prommetrics.New(reg, prommetrics.Options{Plugins: map[string]any{"approx": approx}}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP eppkit_shared_backend_errors_total Failed calls to a plugin's shared backend server, timeouts included.
# TYPE eppkit_shared_backend_errors_total counter
eppkit_shared_backend_errors_total{plugin="approx"} 1
# HELP eppkit_shared_backend_down 1 while a plugin's shared backend server is marked down after repeated errors.
# TYPE eppkit_shared_backend_down gauge
eppkit_shared_backend_down{plugin="approx"} 0
# HELP eppkit_shared_backend_mirror_lookups_total Lookups a plugin answered from its replica's copy of the shared index, without a round trip.
# TYPE eppkit_shared_backend_mirror_lookups_total counter
eppkit_shared_backend_mirror_lookups_total{plugin="approx"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "eppkit_shared_backend_errors_total",
		"eppkit_shared_backend_down", "eppkit_shared_backend_mirror_lookups_total", "llm_d_epp_prefix_indexer_size"); err != nil {
		t.Error(err)
	}
}
