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
	if _, err := os.Stat(filepath.Join(dir, "results.csv")); err != nil {
		t.Error(err)
	}
}

func TestSimulateConfigsAndTrace(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"simulate", "--config", "testdata/config.yaml", "--config", "approx-prefix",
		"--workload", "../../sim/testdata/mooncake.jsonl", "--servers", "2"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "config ") || !strings.Contains(out.String(), "approx-prefix") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestSimulateUsage(t *testing.T) {
	for _, args := range [][]string{
		{"simulate", "--workload", "nope"},
		{"simulate", "--qps", "x"},
		{"simulate", "--servers", "0"},
		{"simulate", "extra"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"simulate", "--config", "testdata/bad-config.yaml"}, &out, &errb); code != exitFail {
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
