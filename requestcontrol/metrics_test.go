package requestcontrol_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/parsers/openai"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/pickers"
	"github.com/eppkit/eppkit/scheduling/scorers"

	"github.com/eppkit/eppkit/plugins/pluginstest"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/requestcontrol/producers/prefix"
	rt "github.com/eppkit/eppkit/requestcontrol/requestcontroltest"
)

// metricsRecorder is a Metrics that remembers what it was told.
type metricsRecorder struct {
	mu       sync.Mutex
	stages   []requestcontrol.Stage
	plugins  []requestcontrol.PluginCall
	prefix   []float64
	requests []requestcontrol.RequestMetrics
}

func (m *metricsRecorder) Request(r requestcontrol.RequestMetrics) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests = append(m.requests, r)
}

func (m *metricsRecorder) Stage(s requestcontrol.Stage, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d < 0 {
		panic("negative duration")
	}
	m.stages = append(m.stages, s)
}

func (m *metricsRecorder) Plugin(p requestcontrol.PluginCall, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.plugins = append(m.plugins, p)
}

func (m *metricsRecorder) PrefixMatch(_ string, ratio float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prefix = append(m.prefix, ratio)
}

func TestInstrument(t *testing.T) {
	p := pluginstest.Build[*prefix.Approx](t, std.Registry(), "approx-prefix-cache-producer", "")
	d := rt.NewDirector(t, rt.Config{Plugins: []any{rt.Named{Name: "approx", Plugin: p}}})
	m := &metricsRecorder{}
	requestcontrol.Instrument(d, m, func(name string) string {
		if name == "approx" {
			return "approx-prefix-cache-producer"
		}
		return ""
	})
	prompt := strings.Repeat("a long shared system prompt ", 100)
	for range 2 {
		res := rt.Do(ctx, d, rt.Chat("m", prompt), rt.Response{Chunks: [][]byte{[]byte(`{"usage":{"prompt_tokens":3}}`)}})
		if res.Rejection != nil {
			t.Fatal(res.Rejection)
		}
		if got := (requestcontrol.RequestMetrics{Status: 200}).Outcome(res.Exchange); got.Model != "m" || got.Usage.PromptTokens != 3 || got.FairnessID != "default-flow" {
			t.Errorf("Outcome = %+v", got)
		}
	}
	want := []requestcontrol.Stage{"parse", "producers", "scheduling", "pre-request"}
	if len(m.stages) != 8 || !equal(m.stages[:4], want) || !equal(m.stages[4:], want) {
		t.Errorf("stages %v, want %v twice", m.stages, want)
	}
	calls := map[requestcontrol.PluginCall]int{}
	for _, c := range m.plugins {
		calls[c]++
	}
	for _, c := range []requestcontrol.PluginCall{
		{Point: "DataProducer", Type: "approx-prefix-cache-producer", Name: "approx"},
		{Point: "PreRequest", Type: "approx-prefix-cache-producer", Name: "approx"},
		{Point: "Scorer", Type: "scorer-0", Name: "scorer-0"},
		{Point: "Picker", Type: "max-score-picker", Name: "max-score-picker"},
	} {
		if calls[c] != 2 {
			t.Errorf("%+v called %d times, want 2 (calls %v)", c, calls[c], calls)
		}
	}
	// The first request found nothing cached; the second found its whole
	// prefix on the endpoint the first went to.
	if len(m.prefix) != 2 || m.prefix[0] != 0 || m.prefix[1] < 0.9 {
		t.Errorf("prefix match ratios %v, want [0, ~1]", m.prefix)
	}
}

func TestNoMetricsNoStages(t *testing.T) {
	d := rt.NewDirector(t, rt.Config{})
	if res := rt.Do(ctx, d, rt.Chat("m", "x"), rt.Response{}); res.Rejection != nil {
		t.Fatal(res.Rejection)
	}
	requestcontrol.Instrument(d, nil, nil) // nil Metrics: nothing changes
	if d.Metrics != nil {
		t.Error("Instrument with nil Metrics set d.Metrics")
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// stagePrinter prints the stages and plugin calls it is told about.
type stagePrinter struct{}

func (stagePrinter) Request(requestcontrol.RequestMetrics)         {}
func (stagePrinter) Stage(s requestcontrol.Stage, _ time.Duration) { fmt.Println("stage", s) }
func (stagePrinter) Plugin(p requestcontrol.PluginCall, _ time.Duration) {
	fmt.Println("plugin", p.Point, p.Name)
}
func (stagePrinter) PrefixMatch(string, float64) {}

// Instrument makes a Director report how long each stage and each plugin
// call took; a binding (examples/extproc/prommetrics) exports them.
func ExampleInstrument() {
	sched, _ := scheduling.New(scheduling.ProfileHandlerFunc(
		func(ctx context.Context, _ *scheduling.Request, names []string, run scheduling.RunProfileFunc) (string, error) {
			_, err := run(ctx, names[0])
			return names[0], err
		}),
		&scheduling.Profile{Name: "default", PickerName: "max-score-picker", Picker: &pickers.MaxScore{},
			Scorers: []scheduling.WeightedScorer{{Name: "queue", Scorer: &scorers.Queue{}, Weight: 1}}})
	d := &requestcontrol.Director{
		Scheduler: sched,
		Parsers:   parsers.NewSelector(&openai.Parser{}),
		Pool:      requestcontrol.StaticPool{datalayer.New("a", "10.0.0.1", 8000, nil)},
	}
	requestcontrol.Instrument(d, stagePrinter{}, nil)
	x, err := d.HandleRequest(context.Background(), &requestcontrol.Inbound{
		Path: "/v1/completions", Body: []byte(`{"model":"m","prompt":"hi"}`)})
	if err != nil {
		panic(err)
	}
	x.Close(nil)
	// Output:
	// stage parse
	// stage producers
	// plugin Scorer queue
	// plugin Picker max-score-picker
	// stage scheduling
	// stage pre-request
}
