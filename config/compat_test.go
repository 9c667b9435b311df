package config_test

import (
	"context"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/requestcontrol/producers/prefix"
)

// gaiePrefixConfig is the older GAIE/llm-d layout: the prefix index's
// parameters on the scorer.
const gaiePrefixConfig = `kind: ConfigMap
apiVersion: v1
metadata:
  name: epp
data:
  default-plugins.yaml: |
    apiVersion: inference.networking.x-k8s.io/v1alpha1
    kind: EndpointPickerConfig
    plugins:
    - type: queue-scorer
    - type: prefix-cache-scorer
      parameters:
        hashBlockSize: 64
        maxPrefixBlocksToMatch: 256
        lruCapacityPerServer: 31250
    schedulingProfiles:
    - name: default
      plugins:
      - pluginRef: queue-scorer
        weight: 2
      - pluginRef: prefix-cache-scorer
        weight: 3
`

// approx returns the built approx producer called name.
func approx(t *testing.T, rt *config.Runtime, name string) *prefix.Approx {
	t.Helper()
	p, ok := rt.Plugin(name)
	if !ok {
		t.Fatalf("no plugin %q", name)
	}
	a, ok := p.(*prefix.Approx)
	if !ok {
		t.Fatalf("plugin %q is a %T", name, p)
	}
	return a
}

// countType returns how many instances of typ rt has.
func countType(rt *config.Runtime, typ string) int {
	n := 0
	for _, p := range rt.Plugins {
		if p.Type == typ {
			n++
		}
	}
	return n
}

// effectiveParams returns each plugin's parameters in rt's effective
// configuration, by name.
func effectiveParams(t *testing.T, rt *config.Runtime) map[string]map[string]any {
	t.Helper()
	y, err := rt.Config.Effective()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Plugins []struct {
			Name       string
			Parameters map[string]any
		}
	}
	if err := yaml.Unmarshal(y, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, p := range doc.Plugins {
		out[p.Name] = p.Parameters
	}
	return out
}

func TestScorerPrefixParamsMoveToProducer(t *testing.T) {
	cfg := load(t, gaiePrefixConfig)
	rt, err := config.Build(context.Background(), cfg, std.Registry(), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	a := approx(t, rt, "approx-prefix-cache-producer")
	if a.BlockSizeTokens != 64 || a.MaxPrefixBlocksToMatch != 256 || a.LRUCapacityPerServer != 31250 {
		t.Errorf("producer: blockSizeTokens %d, maxPrefixBlocksToMatch %d, lruCapacityPerServer %d; want 64, 256, 31250",
			a.BlockSizeTokens, a.MaxPrefixBlocksToMatch, a.LRUCapacityPerServer)
	}
	if !a.AutoTune {
		t.Error("autoTune: the producer's other parameters keep their defaults")
	}
	if n := countType(rt, "approx-prefix-cache-producer"); n != 1 || len(rt.AutoCreated) != 0 {
		t.Errorf("%d producers, auto-created %v: want the one declared for the scorer", n, rt.AutoCreated)
	}
	want := `plugins[1].parameters: prefix index parameters hashBlockSize (as blockSizeTokens), maxPrefixBlocksToMatch, lruCapacityPerServer moved to plugin "approx-prefix-cache-producer" (type approx-prefix-cache-producer, declared for it): in eppkit the producer keeps the index (line 11)`
	if w := warnings(rt); !strings.Contains(w, want) || strings.Count(w, "moved to plugin") != 1 {
		t.Errorf("warnings:\n%swant one:\n%s", w, want)
	}
	params := effectiveParams(t, rt)
	if p := params["prefix-cache-scorer"]; p != nil {
		t.Errorf("effective scorer parameters %v: want none", p)
	}
	if p := params["approx-prefix-cache-producer"]; p["blockSizeTokens"] != 64 || p["maxPrefixBlocksToMatch"] != 256 ||
		p["lruCapacityPerServer"] != 31250 || len(p) != 3 {
		t.Errorf("effective producer parameters %v", p)
	}
	y, _ := rt.Config.Effective()
	if !strings.Contains(string(y), "name: approx-prefix-cache-producer # declared for plugins[1]'s prefix index parameters\n") {
		t.Errorf("effective configuration does not say where the producer comes from:\n%s", y)
	}
	// Build works on a copy: the loaded configuration still has the
	// parameters on the scorer.
	if p, _ := cfg.Plugin("prefix-cache-scorer"); !strings.Contains(string(p.Parameters), "hashBlockSize") {
		t.Errorf("Build modified its input: %s", p.Parameters)
	}
	// The effective configuration loads back to the same producer, with
	// nothing left to move.
	rt2, err := config.Build(context.Background(), load(t, string(y)), std.Registry(), config.Options{})
	if err != nil {
		t.Fatalf("effective configuration: %v\n%s", err, y)
	}
	defer rt2.Close()
	if a := approx(t, rt2, "approx-prefix-cache-producer"); a.BlockSizeTokens != 64 || a.MaxPrefixBlocksToMatch != 256 {
		t.Errorf("reloaded producer: %+v", a)
	}
	if w := warnings(rt2); strings.Contains(w, "moved") {
		t.Errorf("reloaded warnings: %s", w)
	}
}

func TestScorerPrefixParamsAliasesAndMerge(t *testing.T) {
	t.Run("blockSize", func(t *testing.T) {
		rt := mustBuild(t, header+`plugins:
- type: prefix-cache-scorer
  parameters: {blockSize: 32, autoTune: false, matchLengthWeight: 0.5}
`)
		a := approx(t, rt, "approx-prefix-cache-producer")
		if a.BlockSizeTokens != 32 || a.AutoTune {
			t.Errorf("producer: blockSizeTokens %d autoTune %v", a.BlockSizeTokens, a.AutoTune)
		}
		// The scorer keeps its own parameters.
		if p := effectiveParams(t, rt)["prefix-cache-scorer"]; len(p) != 1 || p["matchLengthWeight"] != 0.5 {
			t.Errorf("scorer parameters %v", p)
		}
	})
	t.Run("declared producer", func(t *testing.T) {
		rt := mustBuild(t, header+`plugins:
- type: approx-prefix-cache-producer
  parameters: {maxPrefixBlocksToMatch: 128, lruCapacityPerServer: 1000}
- type: prefix-cache-scorer
  parameters: {hashBlockSize: 64, lruCapacityPerServer: 1000.0, maxPrefixTokensToMatch: 4096}
`)
		a := approx(t, rt, "approx-prefix-cache-producer")
		if a.BlockSizeTokens != 64 || a.MaxPrefixBlocksToMatch != 128 || a.LRUCapacityPerServer != 1000 || a.MaxPrefixTokensToMatch != 4096 {
			t.Errorf("producer: %+v", a)
		}
		if n := countType(rt, "approx-prefix-cache-producer"); n != 1 {
			t.Errorf("%d producers", n)
		}
		if w := warnings(rt); !strings.Contains(w, `moved to plugin "approx-prefix-cache-producer" (type approx-prefix-cache-producer, plugins[0])`) {
			t.Errorf("warnings: %s", w)
		}
		y, _ := rt.Config.Effective()
		if !strings.Contains(string(y), `    parameters:
      maxPrefixBlocksToMatch: 128
      lruCapacityPerServer: 1000
      blockSizeTokens: 64
      maxPrefixTokensToMatch: 4096
`) {
			t.Errorf("effective producer parameters: the declared ones first, then the moved ones:\n%s", y)
		}
	})
	t.Run("two scorers, one producer", func(t *testing.T) {
		rt := mustBuild(t, header+`plugins:
- {name: a, type: prefix-cache-scorer, parameters: {hashBlockSize: 64}}
- {name: b, type: prefix-cache-scorer, parameters: {blockSizeTokens: 64, lruCapacityPerServer: 500}}
`)
		a := approx(t, rt, "approx-prefix-cache-producer")
		if a.BlockSizeTokens != 64 || a.LRUCapacityPerServer != 500 {
			t.Errorf("producer: %+v", a)
		}
		if n := countType(rt, "approx-prefix-cache-producer"); n != 1 {
			t.Errorf("%d producers, want 1", n)
		}
		if w := warnings(rt); strings.Count(w, "moved to plugin") != 2 {
			t.Errorf("want one warning per scorer: %s", w)
		}
	})
	t.Run("producer named by the scorer", func(t *testing.T) {
		rt := mustBuild(t, header+`plugins:
- type: prefix-cache-scorer
  parameters: {prefixMatchInfoProducerName: my-prefix, hashBlockSize: 128}
`)
		if a := approx(t, rt, "my-prefix"); a.BlockSizeTokens != 128 {
			t.Errorf("producer: %+v", a)
		}
		if n := countType(rt, "approx-prefix-cache-producer"); n != 1 || len(rt.AutoCreated) != 0 {
			t.Errorf("%d producers, auto-created %v", n, rt.AutoCreated)
		}
	})
}

func TestScorerPrefixParamsErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"two scorers disagree", header + `plugins:
- {name: a, type: prefix-cache-scorer, parameters: {hashBlockSize: 64}}
- {name: b, type: prefix-cache-scorer, parameters: {blockSize: 32}}
`, []string{`plugins[1].parameters.blockSize: 32 conflicts with 64 at plugins[0].parameters.hashBlockSize: both are plugin "approx-prefix-cache-producer"'s blockSizeTokens; keep one (line 5)`}},
		{"one scorer disagrees with itself", header + `plugins:
- {type: prefix-cache-scorer, parameters: {hashBlockSize: 64, blockSizeTokens: 16}}
`, []string{`plugins[0].parameters.blockSizeTokens: 16 conflicts with 64 at plugins[0].parameters.hashBlockSize`}},
		{"declared producer disagrees", header + `plugins:
- type: approx-prefix-cache-producer
  parameters: {maxPrefixBlocksToMatch: 128}
- type: prefix-cache-scorer
  parameters: {maxPrefixBlocksToMatch: 256}
`, []string{`plugins[1].parameters.maxPrefixBlocksToMatch: 256 conflicts with 128 at plugins[0].parameters.maxPrefixBlocksToMatch: both are plugin "approx-prefix-cache-producer"'s maxPrefixBlocksToMatch; keep one (line 6)`}},
		{"producer of another type", header + `plugins:
- type: precise-prefix-cache-producer
- type: prefix-cache-scorer
  parameters:
    prefixMatchInfoProducerName: precise-prefix-cache-producer
    hashBlockSize: 64
    lruCapacityPerServer: 100
`, []string{`plugins[1].parameters.hashBlockSize: hashBlockSize, lruCapacityPerServer: prefix index parameters of type approx-prefix-cache-producer, but this scorer reads plugin "precise-prefix-cache-producer" (plugins[0], type precise-prefix-cache-producer): set them in that plugin's own parameters, or remove them (line 5)`}},
		{"typo on the scorer", header + `plugins:
- type: prefix-cache-scorer
  parameters: {hashBlockSze: 64}
`, []string{`plugins[0].parameters: plugin "prefix-cache-scorer" (type prefix-cache-scorer): unknown field "hashBlockSze"`}},
		{"typo beside a moved parameter", header + `plugins:
- type: prefix-cache-scorer
  parameters: {hashBlockSize: 64, matchLengthWeigth: 0.5}
`, []string{`plugins[0].parameters: plugin "prefix-cache-scorer" (type prefix-cache-scorer): unknown field "matchLengthWeigth"`}},
		{"bad moved value", header + `plugins:
- type: prefix-cache-scorer
  parameters: {hashBlockSize: 0}
`, []string{`plugins[0].parameters: plugin "approx-prefix-cache-producer" (type approx-prefix-cache-producer): blockSizeTokens: must be > 0`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := build(t, tt.in, config.Options{})
			if err == nil {
				t.Fatal("built")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant:\n%s", err, w)
				}
			}
		})
	}
}

// The seed ConfigMap has a bare prefix-cache-scorer: nothing moves, and its
// effective configuration is the golden one (the producer auto-created).
func TestSeedConfigMapUnchangedByCompat(t *testing.T) {
	cfg, err := config.LoadFile("testdata/seed-configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := config.Build(context.Background(), cfg, std.Registry(), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if w := warnings(rt); strings.Contains(w, "moved") {
		t.Errorf("warnings: %s", w)
	}
	if len(rt.AutoCreated) != 1 || rt.AutoCreated[0].Name != "approx-prefix-cache-producer" {
		t.Errorf("auto-created: %v", rt.AutoCreated)
	}
	golden(t, "testdata/seed.effective.yaml", rt.Config)
}
