package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/sim"
)

// configList collects repeated --config flags.
type configList []string

func (l *configList) String() string     { return strings.Join(*l, ",") }
func (l *configList) Set(s string) error { *l = append(*l, s); return nil }

const simulateSynopsis = `simulate [--config FILE|NAME]... [--servers N] [--workload tenants|chat|lora|FILE.jsonl]
                [--qps R|FROM:TO] [--duration D] [--seed N] [--out DIR | --no-files]
                [--burstiness K] [--limit N] [--scrape-interval D] [--kv-event-delay D]

With no --config, the built-in demo configurations are compared (random, load,
approx-prefix, precise-prefix); a NAME is one of those, or
approx-prefix-flow-control (approx-prefix behind flow control). Without --qps the
synthetic workloads ramp from 20% to 120% of the cluster's estimated capacity;
arrivals are Poisson, or gamma-distributed with --burstiness K (as vLLM's
benchmark: below 1 comes in bursts, above 1 is more even).

Besides the table, results.json, results.csv, series.json and SVG charts
(ttft-cdf.svg, load-CONFIG.svg) are written to --out DIR (default
./simulate-out); --no-files prints the table only.`

// simulate runs the policy simulator (SPEC §11).
func (c *cli) simulate(args []string) int {
	fs := c.flags("simulate", simulateSynopsis)
	var cfgs configList
	fs.Var(&cfgs, "config", "an EndpointPickerConfig file or a built-in name (repeatable)")
	servers := fs.Int("servers", 8, "number of simulated model servers")
	workload := fs.String("workload", "tenants", "tenants, chat, lora, or a Mooncake JSONL trace file")
	qps := fs.String("qps", "", "arrival rate: R requests/s, or FROM:TO for a linear ramp (trace: replay speed-up factor)")
	duration := fs.Duration("duration", 60*time.Second, "simulated time of the synthetic workloads")
	seed := fs.Uint64("seed", 1, "random seed (the same seed gives the same results)")
	out := fs.String("out", "simulate-out", "directory for results.json, results.csv, series.json and the SVG charts")
	noFiles := fs.Bool("no-files", false, "write no files: print the table only")
	burst := fs.Float64("burstiness", 1, "synthetic workloads: gamma shape of the gaps between arrivals (1 = Poisson, < 1 = bursty)")
	limit := fs.Int("limit", 0, "trace: replay at most this many requests (0: all)")
	scrape := fs.Duration("scrape-interval", sim.DefaultScrapeInterval, "how often servers publish metrics to the picker (staleness)")
	kvDelay := fs.Duration("kv-event-delay", sim.DefaultKVEventDelay, "how long KV events take to reach a precise prefix producer")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return c.usageError("simulate: unexpected argument %q", fs.Arg(0))
	}
	if *servers <= 0 || *duration <= 0 || *scrape <= 0 || *kvDelay <= 0 || !(*burst > 0) || math.IsInf(*burst, 0) {
		return c.usageError("simulate: --servers, --duration, --scrape-interval, --kv-event-delay and --burstiness must be positive")
	}
	outSet := false
	fs.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "out" })
	switch {
	case *noFiles && outSet:
		return c.usageError("simulate: --out and --no-files conflict")
	case !*noFiles && *out == "":
		return c.usageError("simulate: --out needs a directory (--no-files writes nothing)")
	}
	var configs []sim.Config
	if len(cfgs) == 0 {
		d, err := sim.DemoConfigs()
		if err != nil {
			return c.fail("simulate: %v", err)
		}
		configs = d
	}
	for _, path := range cfgs {
		name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		var cfg *config.Config
		var err error
		if y, ok := sim.DemoConfigYAML(path); ok && !fileExists(path) {
			cfg, err = config.Load([]byte(y))
		} else {
			cfg, err = config.LoadFile(path)
		}
		if err != nil {
			return c.configError(path, err)
		}
		configs = append(configs, sim.Config{Name: name, Config: cfg})
	}
	wl, err := c.simWorkload(*workload, *qps, *servers, *duration, *seed, *limit, *burst)
	if err != nil {
		return c.usageError("simulate: %v", err)
	}
	fmt.Fprintf(c.stdout, "Simulating %d configurations on %d servers, workload %s (seed %d)\n\n", len(configs), *servers, *workload, *seed)
	bar := newProgressBar(c.stderr, len(configs))
	res, err := sim.Run(context.Background(), configs, sim.Options{Servers: *servers, Seed: *seed, Workload: wl,
		ScrapeInterval: *scrape, KVEventDelay: *kvDelay, Progress: bar.update})
	bar.finish()
	if err != nil {
		return c.fail("%v", err)
	}
	if err := res.WriteTable(c.stdout); err != nil {
		return c.fail("%v", err)
	}
	if *noFiles {
		return exitOK
	}
	charts, err := writeResults(*out, res)
	if err != nil {
		return c.fail("simulate: %v", err)
	}
	fmt.Fprintf(c.stdout, "\nWrote results.json, results.csv and series.json to %s\nCharts:\n", *out)
	for _, f := range charts {
		fmt.Fprintf(c.stdout, "  %s\n", f)
	}
	fmt.Fprintf(c.stdout, "Optional PNG versions (gonum/plot, a nested module): cd sim/charts && go run ./cmd/simcharts %s\n", abs(*out))
	return exitOK
}

func abs(dir string) string {
	if a, err := filepath.Abs(dir); err == nil {
		return a
	}
	return dir
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// parseRamp reads R or FROM:TO; ok is false for "".
func parseRamp(s string) (from, to float64, ok bool, err error) {
	if s == "" {
		return 0, 0, false, nil
	}
	a, b, ramp := strings.Cut(s, ":")
	if from, err = strconv.ParseFloat(a, 64); err != nil || from <= 0 {
		return 0, 0, false, fmt.Errorf("--qps %q: want a positive rate or FROM:TO", s)
	}
	to = from
	if ramp {
		if to, err = strconv.ParseFloat(b, 64); err != nil || to <= 0 {
			return 0, 0, false, fmt.Errorf("--qps %q: want a positive rate or FROM:TO", s)
		}
	}
	return from, to, true, nil
}

// simWorkload makes the workload factory the flags describe.
func (c *cli) simWorkload(name, qps string, servers int, d time.Duration, seed uint64, limit int, burst float64) (sim.WorkloadFunc, error) {
	from, to, fixed, err := parseRamp(qps)
	if err != nil {
		return nil, err
	}
	p := sim.DefaultServerParams()
	ramp := func(capacity float64) sim.Ramp {
		if fixed {
			return sim.Ramp{From: from, To: to, Duration: d, Burstiness: burst}
		}
		return sim.Ramp{From: 0.2 * capacity, To: 1.2 * capacity, Duration: d, Burstiness: burst}
	}
	switch name {
	case "tenants":
		w := sim.Tenants{Seed: seed}
		w.Arrivals = ramp(w.Capacity(servers, p))
		return func() (sim.Workload, error) { return w.New(), nil }, nil
	case "chat":
		w := sim.Chat{Seed: seed}
		w.Arrivals = ramp(float64(servers) * p.CostEstimate(400, 200))
		return func() (sim.Workload, error) { return w.New(), nil }, nil
	case "lora":
		w := sim.LoRAMix{Seed: seed}
		w.Arrivals = ramp(float64(servers) * p.CostEstimate(500, 200))
		return func() (sim.Workload, error) { return w.New(), nil }, nil
	}
	if _, err := os.Stat(name); err != nil {
		return nil, fmt.Errorf("--workload %q: not tenants, chat, lora or a readable trace file", name)
	}
	speed := 1.0
	if fixed {
		speed = from
	}
	return func() (sim.Workload, error) {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		// The file stays open for the run; the process exits soon after.
		return sim.Mooncake{R: f, Speed: speed, Limit: limit}.New()
	}, nil
}

// writeResults writes the results' files and SVG charts into dir and
// returns the charts' paths.
func writeResults(dir string, res *sim.Results) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for _, o := range []struct {
		name  string
		write func(io.Writer) error
	}{{"results.json", res.WriteJSON}, {"results.csv", res.WriteCSV}, {"series.json", res.WriteSeries}} {
		f, err := os.Create(filepath.Join(dir, o.name))
		if err != nil {
			return nil, err
		}
		err = o.write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
	}
	return res.Series().WriteSVG(dir)
}

// progressBar draws one line on a terminal while the simulation runs; it
// draws nothing when w is not a terminal.
type progressBar struct {
	w       io.Writer
	configs int
	on      bool
	drawn   bool
}

func newProgressBar(w io.Writer, configs int) *progressBar {
	on := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			on = true
		}
	}
	return &progressBar{w: w, configs: configs, on: on}
}

func (b *progressBar) update(p sim.Progress) {
	if !b.on {
		return
	}
	const width = 30
	done := p.Index
	if p.Done {
		done++
	}
	n := done * width / max(b.configs, 1)
	fmt.Fprintf(b.w, "\r[%s%s] %d/%d %-16s t=%7.1fs %8d requests", strings.Repeat("#", n), strings.Repeat(".", width-n),
		done, b.configs, p.Config, p.VirtualTime.Seconds(), p.Arrived)
	b.drawn = true
}

func (b *progressBar) finish() {
	if b.drawn {
		fmt.Fprintf(b.w, "\r%s\r", strings.Repeat(" ", 90))
	}
}
