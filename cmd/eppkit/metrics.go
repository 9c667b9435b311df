package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/datalayer/metrics"
)

const metricsSynopsis = `metrics parse [--engine vllm] FILE|-

Reads a Prometheus /metrics dump (FILE, or - for stdin) the way the picker
does — metrics-data-source's parse, core-metrics-extractor's mapping for the
engine — and prints what it extracts as JSON:

  {"waiting": n, "running": n, "kvUsage": f, "blockSize": n, "gpuBlocks": n,
   "lora": {"active": [...], "waiting": [...], "max": n}}

A dump the picker would reject (malformed text, a missing required metric, a
NaN or negative value) exits 1 with the reason.`

// maxMetricsInput bounds what metrics parse reads.
const maxMetricsInput = 64 << 20

// metricsOutput is the machine-readable result (SPEC §10). Scripts rely on
// these field names: add fields, never rename them.
type metricsOutput struct {
	Waiting   int        `json:"waiting"`
	Running   int        `json:"running"`
	KVUsage   float64    `json:"kvUsage"`
	BlockSize int        `json:"blockSize"`
	GPUBlocks int        `json:"gpuBlocks"`
	LoRA      loraOutput `json:"lora"`
}

type loraOutput struct {
	Active  []string `json:"active"`
	Waiting []string `json:"waiting"`
	Max     int      `json:"max"`
}

func (c *cli) metrics(args []string) int {
	if len(args) == 0 || args[0] != "parse" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintf(c.stdout, "usage: eppkit %s\n", metricsSynopsis)
			return exitOK
		}
		return c.usageError("usage: eppkit metrics parse [--engine vllm] FILE|-")
	}
	fs := c.flags("metrics parse", metricsSynopsis)
	engine := fs.String("engine", metrics.EngineVLLM, "engine whose metric names to read: "+strings.Join(engineNames(), ", "))
	if code, ok := parse(fs, args[1:]); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return c.usageError("metrics parse: want one FILE (or -), got %d arguments", fs.NArg())
	}
	x := &metrics.CoreExtractor{}
	x.SetDefaults()
	if err := x.Validate(); err != nil {
		return c.fail("metrics parse: %v", err)
	}
	if !slices.Contains(x.Engines(), *engine) {
		return c.usageError("metrics parse: unknown engine %q (known: %s)", *engine, strings.Join(x.Engines(), ", "))
	}
	file := fs.Arg(0)
	text, err := c.readInput(file)
	if err != nil {
		return c.fail("metrics parse: %v", err)
	}
	fams, err := metrics.Parse(text, metrics.NewFilter(x.MetricFamilies()...))
	if err != nil {
		return c.fail("metrics parse: %s: %v", file, err)
	}
	e := datalayer.New("input", "127.0.0.1", 0, map[string]string{x.EngineLabelKey: *engine})
	if err := x.Extract(fams, e); err != nil {
		return c.fail("metrics parse: %s: %v", file, err)
	}
	m := e.Metrics
	out := metricsOutput{
		Waiting: m.Waiting, Running: m.Running, KVUsage: m.KVUsage, BlockSize: m.BlockSize, GPUBlocks: m.GPUBlocks,
		LoRA: loraOutput{Active: nonNil(m.LoRA.Active), Waiting: nonNil(m.LoRA.Waiting), Max: m.LoRA.Max},
	}
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return c.fail("metrics parse: %v", err)
	}
	return exitOK
}

// readInput reads FILE or, for "-", stdin, refusing more than
// maxMetricsInput bytes.
func (c *cli) readInput(file string) ([]byte, error) {
	var r io.Reader = c.stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxMetricsInput+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxMetricsInput {
		return nil, fmt.Errorf("%s: over %d MiB", file, maxMetricsInput>>20)
	}
	return b, nil
}

func engineNames() []string {
	var out []string
	for _, e := range metrics.BuiltinEngines() {
		out = append(out, e.Name)
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
