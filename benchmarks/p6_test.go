package benchmarks

import (
	"os"
	"testing"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/datalayer/metrics"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/std"
)

// BenchmarkP6Extract parses one realistic vLLM /metrics page (40 KB, every
// family and histogram of a vLLM 0.10 engine) and extracts it into an
// endpoint, as the first scrape of an endpoint does. The steady-state scrape
// path and the 100-endpoint CPU run are in datalayer/metrics.
func BenchmarkP6Extract(b *testing.B) {
	text, err := os.ReadFile("../datalayer/metrics/testdata/vllm.prom")
	if err != nil {
		b.Fatal(err)
	}
	p, err := std.Registry().Build("core-metrics-extractor", "core-metrics-extractor", nil)
	if err != nil {
		b.Fatal(err)
	}
	x := p.(*metrics.CoreExtractor)
	if err := plugins.Init(b.Context(), x, plugins.Deps{}.WithDefaults()); err != nil {
		b.Fatal(err)
	}
	filter := metrics.NewFilter(x.MetricFamilies()...)
	e := datalayer.New("e", "10.0.0.1", 8000, nil)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		fams, err := metrics.Parse(text, filter)
		if err != nil {
			b.Fatal(err)
		}
		d := *e
		if err := x.Extract(fams, &d); err != nil {
			b.Fatal(err)
		}
	}
	if d := *e; x.Extract(must(metrics.Parse(text, filter)), &d) != nil || d.Metrics.Waiting != 7 {
		b.Fatalf("extracted %+v", d.Metrics)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
