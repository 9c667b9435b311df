package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// Results are a simulation's results, one per configuration, in the order
// of SPEC §10's results.json.
type Results struct {
	Configs []Result `json:"configs"`
}

// Result is one configuration's outcome.
type Result struct {
	Name string `json:"name"`
	// TTFT is the time to first token (arrival to the end of the step that
	// completes the prefill), in seconds.
	TTFT Percentiles `json:"ttft"`
	// E2E is the end-to-end latency, arrival to the last token, in seconds.
	E2E Percentiles `json:"e2e"`
	// Queue is the time from a request's arrival to its first admission to
	// a server's running batch, in seconds: its wait in the server's queue,
	// plus its wait at the gateway when flow control held it.
	Queue Percentiles `json:"queue"`
	// OutputTokensPerSec is the output tokens of completed requests over
	// the virtual time from the first arrival to the last completion.
	OutputTokensPerSec float64 `json:"outputTokensPerSec"`
	// HitRate is the engine-side prefix-cache hit rate: prompt tokens found
	// in the servers' KV caches over all prompt tokens (the truth, not the
	// scorer's estimate).
	HitRate float64 `json:"hitRate"`
	// Rejected counts the requests the pipeline rejected (429, 503, …).
	Rejected int `json:"rejected"`
	// Requests counts the arrivals.
	Requests int `json:"requests"`
	// Completed counts the requests served to the end; Failed those a
	// server could not serve (larger than its KV cache).
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	// PerServer counts the requests routed to each server; Imbalance is
	// the busiest server's count over the mean (1 is perfect balance).
	PerServer []int   `json:"perServer"`
	Imbalance float64 `json:"loadImbalance"`
	// PromptTokens, CachedTokens and OutputTokens are totals over the
	// completed requests.
	PromptTokens int64 `json:"promptTokens"`
	CachedTokens int64 `json:"cachedTokens"`
	OutputTokens int64 `json:"outputTokens"`
	// VirtualSeconds is the simulated time from the first arrival to the
	// last completion.
	VirtualSeconds float64 `json:"virtualSeconds"`

	// TTFTs and E2Es are every completed request's latencies in seconds,
	// in completion order (for charts; not exported).
	TTFTs []float64 `json:"-"`
	E2Es  []float64 `json:"-"`
	// Load samples each server's requests (running plus waiting) every
	// LoadSampleInterval of virtual time: Load[sample][server].
	Load [][]int `json:"-"`
}

// Series is the data behind the charts, as written by WriteSeries: per
// configuration, the TTFT distribution (up to 1,000 quantiles) and the
// servers' load over time.
type Series struct {
	Configs []ConfigSeries `json:"configs"`
}

// ConfigSeries is one configuration's chart data.
type ConfigSeries struct {
	Name string `json:"name"`
	// TTFTQuantiles are TTFT values in seconds at evenly spaced quantiles
	// from 0 to 1 (sorted ascending).
	TTFTQuantiles []float64 `json:"ttftQuantiles"`
	// LoadInterval is the time between load samples in seconds; Load[i][s]
	// is server s's running plus waiting requests at sample i.
	LoadInterval float64 `json:"loadInterval"`
	Load         [][]int `json:"load"`
}

// Series returns the chart data of the results.
func (r *Results) Series() *Series {
	s := &Series{}
	for _, c := range r.Configs {
		v := slices.Clone(c.TTFTs)
		slices.Sort(v)
		var q []float64
		if n := len(v); n > 0 {
			k := min(n, 1000)
			for i := range k {
				j := 0
				if k > 1 {
					j = i * (n - 1) / (k - 1)
				}
				q = append(q, round(v[j]))
			}
		}
		s.Configs = append(s.Configs, ConfigSeries{Name: c.Name, TTFTQuantiles: q,
			LoadInterval: LoadSampleInterval.Seconds(), Load: c.Load})
	}
	return s
}

// WriteSeries writes the chart data (Series) as JSON.
func (r *Results) WriteSeries(w io.Writer) error {
	return json.NewEncoder(w).Encode(r.Series())
}

// Percentiles are latency percentiles in seconds (nearest rank).
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

func percentiles(v []float64) Percentiles {
	if len(v) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	at := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return round(s[min(max(i, 0), len(s)-1)])
	}
	return Percentiles{at(0.50), at(0.90), at(0.95), at(0.99)}
}

// round keeps 6 significant decimals so the JSON is short and stable.
func round(f float64) float64 { return math.Round(f*1e6) / 1e6 }

func (c *cluster) result(name string, rejected uint64) *Result {
	r := &Result{Name: name, TTFT: percentiles(c.ttft), E2E: percentiles(c.e2e), Queue: percentiles(c.queue),
		Rejected: int(rejected), Requests: c.arrived, Completed: c.completed, Failed: c.failed,
		PerServer: c.perServer, PromptTokens: c.prompt, CachedTokens: c.cached, OutputTokens: c.output,
		TTFTs: c.ttft, E2Es: c.e2e, Load: c.load}
	if c.prompt > 0 {
		r.HitRate = round(float64(c.cached) / float64(c.prompt))
	}
	if c.first >= 0 && c.last > c.first {
		r.VirtualSeconds = round((c.last - c.first).Seconds())
		r.OutputTokensPerSec = round(float64(c.output) / r.VirtualSeconds)
	}
	total, peak := 0, 0
	for _, n := range c.perServer {
		total += n
		peak = max(peak, n)
	}
	if total > 0 {
		r.Imbalance = round(float64(peak) * float64(len(c.perServer)) / float64(total))
	}
	return r
}

// WriteJSON writes the results as indented JSON.
func (r *Results) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteCSV writes one line per configuration with a header line.
func (r *Results) WriteCSV(w io.Writer) error {
	var b strings.Builder
	b.WriteString("name,ttft_p50,ttft_p90,ttft_p95,ttft_p99,e2e_p50,e2e_p90,e2e_p95,e2e_p99,output_tokens_per_sec,hit_rate,rejected,requests,completed,load_imbalance\n")
	for _, c := range r.Configs {
		fmt.Fprintf(&b, "%s,%g,%g,%g,%g,%g,%g,%g,%g,%g,%g,%d,%d,%d,%g\n", csvField(c.Name),
			c.TTFT.P50, c.TTFT.P90, c.TTFT.P95, c.TTFT.P99, c.E2E.P50, c.E2E.P90, c.E2E.P95, c.E2E.P99,
			c.OutputTokensPerSec, c.HitRate, c.Rejected, c.Requests, c.Completed, c.Imbalance)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func csvField(s string) string {
	if strings.ContainsAny(s, ",\"\n") {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}

// WriteTable writes the side-by-side comparison table; balance is the
// busiest server's request count over the mean (1.00 is perfect).
func (r *Results) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "config\tTTFT p50\tp90\tp99\te2e p50\tp90\tqueue p90\tout tok/s\thit rate\tbalance\trejected\trequests\t")
	for _, c := range r.Configs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.1f%%\t%.2f\t%d\t%d\t\n", c.Name,
			secs(c.TTFT.P50), secs(c.TTFT.P90), secs(c.TTFT.P99), secs(c.E2E.P50), secs(c.E2E.P90), secs(c.Queue.P90),
			c.OutputTokensPerSec, 100*c.HitRate, c.Imbalance, c.Rejected, c.Requests)
	}
	return tw.Flush()
}

func secs(s float64) string {
	switch {
	case s < 1:
		return fmt.Sprintf("%.0fms", s*1000)
	case s < 100:
		return fmt.Sprintf("%.2fs", s)
	}
	return fmt.Sprintf("%.0fs", s)
}
