package metrics_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/eppkit/eppkit/datalayer/metrics"
)

// BenchmarkP6Extract is BENCHMARKS.md P6's extraction figure: parse one
// realistic vLLM /metrics page (testdata/vllm.prom: 391 lines, 40 KB, every
// family and histogram of a vLLM 0.10 engine with four LoRA series and the
// cache configuration) and extract it into an endpoint. Goal: ≤ 50 µs.
//
//   - cold: one page on its own (metrics.Parse), what the first scrape of an
//     endpoint and `eppkit metrics parse` pay;
//   - scrape: the steady state of metrics-data-source, successive scrapes of
//     one endpoint through its metrics.Parser whose queue, running and KV
//     values change every time while the info gauges (cache configuration,
//     LoRA adapters) stay as they are, as they do between engine events.
func BenchmarkP6Extract(b *testing.B) {
	text := readFile(b, "vllm.prom")
	x := extractor(b, "")
	filter := metrics.NewFilter(x.MetricFamilies()...)
	e := endpoint("")
	b.Run("cold", func(b *testing.B) {
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
	})
	b.Run("scrape", func(b *testing.B) {
		pages := variants(text, 16)
		p := metrics.NewParser(filter)
		b.SetBytes(int64(len(text)))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			fams, err := p.Parse(pages[i%len(pages)])
			if err != nil {
				b.Fatal(err)
			}
			d := *e
			if err := x.Extract(fams, &d); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// variants returns n copies of a vLLM page whose waiting, running and KV
// usage values differ from one copy to the next.
func variants(text []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		page := text
		for _, r := range []struct{ name, from, to string }{
			{"vllm:num_requests_waiting", "} 7.0", fmt.Sprintf("} %d.0", i)},
			{"vllm:num_requests_running", "} 23.0", fmt.Sprintf("} %d.0", 20+i)},
			{"vllm:kv_cache_usage_perc", "} 0.6218371204536327", fmt.Sprintf("} 0.%d", 100+i)},
		} {
			at := bytes.Index(page, []byte("\n"+r.name+"{"))
			end := at + 1 + bytes.IndexByte(page[at+1:], '\n')
			line := bytes.Replace(page[at:end], []byte(r.from), []byte(r.to), 1)
			page = bytes.Join([][]byte{page[:at], line, page[end:]}, nil)
		}
		out[i] = page
	}
	return out
}

// BenchmarkParse separates the parts: the whole page through expfmt (what a
// scraper without a filter pays), the filtered parse, and extraction alone.
func BenchmarkParse(b *testing.B) {
	text := readFile(b, "vllm.prom")
	x := extractor(b, "")
	filter := metrics.NewFilter(x.MetricFamilies()...)
	b.Run("unfiltered", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := metrics.Parse(text, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("filtered", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := metrics.Parse(text, filter); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("extract", func(b *testing.B) {
		fams, err := metrics.Parse(text, filter)
		if err != nil {
			b.Fatal(err)
		}
		e := endpoint("")
		b.ReportAllocs()
		for b.Loop() {
			d := *e
			if err := x.Extract(fams, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
}
