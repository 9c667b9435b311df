package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/sim"
)

func TestSimulateDemo(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run([]string{"simulate", "--duration", "8s", "--servers", "4", "--out", dir}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, name := range []string{"random", "load", "approx-prefix", "precise-prefix", "TTFT p50", "hit rate"} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("table lacks %q:\n%s", name, out.String())
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	// SPEC §10's field names.
	var res struct {
		Configs []map[string]json.RawMessage `json:"configs"`
	}
	if err := json.Unmarshal(data, &res); err != nil || len(res.Configs) != 4 {
		t.Fatalf("results.json: %v, %d configs", err, len(res.Configs))
	}
	for _, c := range res.Configs {
		for _, f := range []string{"name", "ttft", "e2e", "outputTokensPerSec", "hitRate", "rejected", "requests"} {
			if _, ok := c[f]; !ok {
				t.Errorf("results.json config lacks %q", f)
			}
		}
		var p map[string]float64
		if err := json.Unmarshal(c["ttft"], &p); err != nil || len(p) != 4 || p["p90"] <= 0 {
			t.Errorf("ttft %s", c["ttft"])
		}
	}
	for _, name := range []string{"results.csv", "series.json", "ttft-cdf.svg", "load-random.svg", "load-load.svg",
		"load-approx-prefix.svg", "load-precise-prefix.svg"} {
		f := filepath.Join(dir, name)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Error(err)
			continue
		}
		if strings.HasSuffix(name, ".svg") {
			if !bytes.Contains(data, []byte("<polyline")) {
				t.Errorf("%s draws no line", name)
			}
			if !strings.Contains(out.String(), "\n  "+f+"\n") {
				t.Errorf("output does not list %s:\n%s", f, out.String())
			}
		}
	}
	if !strings.Contains(out.String(), "cd sim/charts && go run ./cmd/simcharts "+dir) {
		t.Errorf("output lacks the PNG command:\n%s", out.String())
	}
}

// With --no-files nothing is written (not even ./simulate-out, the default
// --out, which would land in this package's directory).
func TestSimulateNoFiles(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"simulate", "--config", "random", "--duration", "2s", "--servers", "2", "--no-files"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "random") || strings.Contains(out.String(), "Wrote") {
		t.Errorf("output:\n%s", out.String())
	}
	if _, err := os.Stat("simulate-out"); !os.IsNotExist(err) {
		t.Errorf("simulate-out exists: %v", err)
	}
	errb.Reset()
	if code := run([]string{"simulate", "-h"}, &out, &errb); code != exitOK || !strings.Contains(errb.String(), `(default "simulate-out")`) ||
		!strings.Contains(errb.String(), "--no-files") {
		t.Errorf("help (exit %d) does not give the default --out or --no-files:\n%s", code, errb.String())
	}
}

func TestSimulateConfigsAndTrace(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"simulate", "--config", "testdata/config.yaml", "--config", "approx-prefix",
		"--workload", "../../sim/testdata/mooncake.jsonl", "--servers", "2", "--no-files"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "config ") || !strings.Contains(out.String(), "approx-prefix") {
		t.Errorf("output:\n%s", out.String())
	}
}

// Bursty arrivals (gamma, shape 0.3) on a small chat workload run.
func TestSimulateBursty(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"simulate", "--config", "load", "--workload", "chat", "--servers", "2",
		"--duration", "5s", "--burstiness", "0.3", "--no-files"}, &out, &errb)
	if code != exitOK || !strings.Contains(out.String(), "load") {
		t.Fatalf("exit %d: %s\n%s", code, errb.String(), out.String())
	}
}

func TestSimulateUsage(t *testing.T) {
	for _, args := range [][]string{
		{"simulate", "--workload", "nope"},
		{"simulate", "--qps", "x"},
		{"simulate", "--servers", "0"},
		{"simulate", "--burstiness", "0"},
		{"simulate", "--burstiness", "NaN"},
		{"simulate", "extra"},
		{"simulate", "--out", ""},
		{"simulate", "--out", t.TempDir(), "--no-files"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"simulate", "--config", "testdata/bad-config.yaml", "--no-files"}, &out, &errb); code != exitFail {
		t.Errorf("bad config: exit %d: %s", code, errb.String())
	}
}

func TestProgressBar(t *testing.T) {
	var b bytes.Buffer
	if p := newProgressBar(&b, 2); p.on {
		t.Fatal("a progress bar on a non-terminal")
	}
	p := &progressBar{w: &b, configs: 2, on: true}
	p.update(sim.Progress{Config: "random", Index: 0, Done: true, Arrived: 1000})
	p.finish()
	if s := b.String(); !strings.Contains(s, "[###############...............] 1/2 random") {
		t.Errorf("progress line %q", s)
	}
}
