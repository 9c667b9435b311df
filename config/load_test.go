package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/config"
)

const header = "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\n"

func TestLoadSeed(t *testing.T) {
	for _, f := range []string{"testdata/seed-default-plugins.yaml", "testdata/seed-configmap.yaml"} {
		t.Run(f, func(t *testing.T) {
			cfg, err := config.LoadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(cfg.Plugins); got != 5 {
				t.Fatalf("plugins: got %d, want 5", got)
			}
			ms := cfg.Plugins[3]
			if ms.Name != "metrics-data-source" || ms.Type != "metrics-data-source" {
				t.Errorf("name should default to type: %+v", ms)
			}
			if want := `{"scheme":"http","path":"/metrics","insecureSkipVerify":true}`; string(ms.Parameters) != want {
				t.Errorf("parameters:\n got %s\nwant %s", ms.Parameters, want)
			}
			prof := cfg.SchedulingProfiles[0]
			if prof.Name != "default" || len(prof.Plugins) != 3 || *prof.Plugins[2].Weight != 3 {
				t.Errorf("profile: %+v", prof)
			}
		})
	}
}

func TestLoadEmptyIsNoConfig(t *testing.T) {
	for _, in := range []string{"", "\n", "# nothing\n", "---\n"} {
		cfg, err := config.Load([]byte(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if len(cfg.Plugins) != 0 || len(cfg.SchedulingProfiles) != 0 {
			t.Fatalf("%q: %+v", in, cfg)
		}
	}
}

func TestLoadLegacyAPIVersion(t *testing.T) {
	_, err := config.Load([]byte("apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: queue-scorer\n"))
	if err != nil {
		t.Fatal(err)
	}
}

func TestLoadAllSections(t *testing.T) {
	cfg, err := config.LoadFile("testdata/all-sections.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fc := cfg.FlowControl
	if fc.MaxBytes.Value() != 1<<30 || fc.MaxRequests.Value() != 1000 {
		t.Errorf("limits: %v %v", fc.MaxBytes, fc.MaxRequests)
	}
	if fc.DefaultRequestTTL.String() != "30s" {
		t.Errorf("ttl: %v", fc.DefaultRequestTTL)
	}
	if len(fc.PriorityBands) != 2 || fc.PriorityBands[1].MaxBytes.Value() != 500_000_000 {
		t.Errorf("bands: %+v", fc.PriorityBands)
	}
	if !cfg.FeatureEnabled("flowControl") {
		t.Error("flowControl gate should be on")
	}
	if cfg.DataLayer.Discovery.PluginRef != "static" || len(cfg.DataLayer.Sources[0].Extractors) != 1 {
		t.Errorf("dataLayer: %+v", cfg.DataLayer)
	}
	if got := cfg.RequestHandler.Parsers[0].PluginRef; got != "openai" {
		t.Errorf("parsers: %v", got)
	}
}

func TestFeatureGates(t *testing.T) {
	cfg, err := config.Load([]byte(header + "featureGates: [flowControl=false, somethingNew]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.FeatureEnabled("flowControl") {
		t.Error("flowControl=false should be off")
	}
	ws := cfg.Warnings()
	if len(ws) != 1 || !strings.Contains(ws[0].String(), `featureGates[1]: unknown feature gate "somethingNew"`) {
		t.Errorf("warnings: %v", ws)
	}
}

func TestDeprecatedFieldsMigrate(t *testing.T) {
	cfg, err := config.Load([]byte(header + `plugins:
- type: openai-parser
- name: sd
  type: concurrency-detector
saturationDetector:
  pluginRef: sd
parser:
  pluginRef: openai-parser
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.FlowControl.SaturationDetector.PluginRef != "sd" || cfg.RequestHandler.Parsers[0].PluginRef != "openai-parser" {
		t.Errorf("not migrated: %+v %+v", cfg.FlowControl, cfg.RequestHandler)
	}
	if ws := cfg.Warnings(); len(ws) != 2 || !strings.Contains(ws[0].Message, "deprecated") {
		t.Errorf("warnings: %v", ws)
	}
}

// TestLoadBadInput checks that every structural mistake is an error naming
// its YAML path (and line).
func TestLoadBadInput(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"unknown top-level field", header + "pluginz: []\n",
			[]string{`config: unknown field "pluginz" (did you mean "plugins"?) (line 3)`}},
		{"unknown plugin field", header + "plugins:\n- type: a\n  params: {x: 1}\n",
			[]string{`plugins[0]: unknown field "params" (did you mean "parameters"?) (line 5)`}},
		{"unknown profile entry field", header + "plugins: [{type: a}, {type: b}]\nschedulingProfiles:\n- name: p\n  plugins:\n  - pluginRef: a\n  - pluginRef: b\n    weigth: 2\n",
			[]string{`schedulingProfiles[0].plugins[1]: unknown field "weigth" (did you mean "weight"?)`}},
		{"unknown flowControl field", header + "flowControl:\n  maxByte: 1Gi\n",
			[]string{`flowControl: unknown field "maxByte" (did you mean "maxBytes"?)`}},
		{"unknown band field far from any", header + "flowControl:\n  priorityBands:\n  - priority: 1\n    zzz: 1\n",
			[]string{`flowControl.priorityBands[0]: unknown field "zzz" (known fields: priority, maxBytes, maxRequests, fairnessPolicyRef, orderingPolicyRef)`}},
		{"weight zero", header + "plugins: [{type: a}, {type: b}, {type: c}]\nschedulingProfiles:\n- name: p\n  plugins: [{pluginRef: a}, {pluginRef: b}, {pluginRef: c, weight: 0}]\n",
			[]string{`schedulingProfiles[0].plugins[2].weight: must be > 0 (got 0)`}},
		{"weight negative", header + "plugins: [{type: a}]\nschedulingProfiles:\n- name: p\n  plugins: [{pluginRef: a, weight: -1.5}]\n",
			[]string{`schedulingProfiles[0].plugins[0].weight: must be > 0 (got -1.5)`}},
		{"weight NaN", header + "plugins: [{type: a}]\nschedulingProfiles:\n- name: p\n  plugins: [{pluginRef: a, weight: .nan}]\n",
			[]string{`schedulingProfiles[0].plugins[0].weight: must be > 0 (got NaN)`}},
		{"weight infinite", header + "plugins: [{type: a}]\nschedulingProfiles:\n- name: p\n  plugins: [{pluginRef: a, weight: .inf}]\n",
			[]string{`schedulingProfiles[0].plugins[0].weight: must be > 0 (got +Inf)`}},
		{"weight string", header + "plugins: [{type: a}]\nschedulingProfiles:\n- name: p\n  plugins: [{pluginRef: a, weight: heavy}]\n",
			[]string{`schedulingProfiles[0].plugins[0].weight: want a number, got the string "heavy"`}},
		{"undefined plugin", header + "plugins: [{type: queue-scorer}]\nschedulingProfiles:\n- name: p\n  plugins:\n  - pluginRef: queue-scorer\n  - pluginRef: nope\n",
			[]string{`schedulingProfiles[0].plugins[1].pluginRef: undefined plugin "nope" (line 8)`}},
		{"undefined plugin near miss", header + "plugins: [{type: queue-scorer}]\nschedulingProfiles:\n- name: p\n  plugins: [{pluginRef: queue-scorr}]\n",
			[]string{`undefined plugin "queue-scorr" (did you mean "queue-scorer"?)`}},
		{"duplicate plugin names", header + "plugins:\n- type: queue-scorer\n- name: queue-scorer\n  type: load-aware-scorer\n",
			[]string{`plugins[1].name: duplicate plugin name "queue-scorer" (also plugins[0])`}},
		{"duplicate profile names", header + "plugins: [{type: a}]\nschedulingProfiles:\n- name: p\n  plugins: [{pluginRef: a}]\n- name: p\n  plugins: [{pluginRef: a}]\n",
			[]string{`schedulingProfiles[1].name: duplicate profile name "p" (also schedulingProfiles[0])`}},
		{"profile without name", header + "plugins: [{type: a}]\nschedulingProfiles:\n- plugins: [{pluginRef: a}]\n",
			[]string{`schedulingProfiles[0].name: missing`}},
		{"plugin listed twice in profile", header + "plugins: [{type: a}]\nschedulingProfiles:\n- name: p\n  plugins: [{pluginRef: a}, {pluginRef: a}]\n",
			[]string{`schedulingProfiles[0].plugins[1].pluginRef: plugin "a" is already in this profile (plugins[0])`}},
		{"missing type", header + "plugins:\n- name: x\n",
			[]string{`plugins[0].type: missing`}},
		{"type not a string", header + "plugins:\n- type: [a]\n",
			[]string{`plugins[0].type: want a string, got a list`}},
		{"plugins not a list", header + "plugins:\n  a: b\n",
			[]string{`plugins: want a list, got a mapping`}},
		{"parameters not a mapping", header + "plugins:\n- type: a\n  parameters: [1, 2]\n",
			[]string{`plugins[0].parameters: want a mapping of parameters, got a list`}},
		{"parameters NaN", header + "plugins:\n- type: a\n  parameters:\n    threshold: .nan\n",
			[]string{`plugins[0].parameters.threshold: .nan is not a valid parameter value`}},
		{"parameters duplicate key", header + "plugins:\n- type: a\n  parameters:\n    x: 1\n    x: 2\n",
			[]string{`plugins[0].parameters.x: duplicate field`}},
		{"duplicate key", header + "plugins: []\nplugins: []\n",
			[]string{`plugins: duplicate field (line 4)`}},
		{"missing apiVersion", "kind: EndpointPickerConfig\nplugins: [{type: a}]\n",
			[]string{`apiVersion: missing: want llm-d.ai/v1alpha1`}},
		{"wrong apiVersion", "apiVersion: v1\nkind: EndpointPickerConfig\n",
			[]string{`apiVersion: unsupported apiVersion "v1"`}},
		{"wrong kind", "apiVersion: llm-d.ai/v1alpha1\nkind: Deployment\n",
			[]string{`kind: unsupported kind "Deployment": want EndpointPickerConfig`}},
		{"not a mapping", "- a\n- b\n",
			[]string{`config: want a mapping, got a list`}},
		{"invalid YAML", header + "plugins:\n- type: a\n  name: [b\n",
			[]string{`config: invalid YAML: line 4: did not find expected`}},
		{"two documents", header + "---\n" + header,
			[]string{`more than one YAML document`}},
		{"bad feature gate", header + "featureGates: [flowControl=maybe]\n",
			[]string{`featureGates[0]: invalid feature gate "flowControl=maybe"`}},
		{"bad quantity", header + "flowControl:\n  maxBytes: 1Gx\n",
			[]string{`flowControl.maxBytes: invalid quantity "1Gx": unknown suffix "Gx"`}},
		{"negative quantity", header + "flowControl:\n  maxRequests: -5\n",
			[]string{`flowControl.maxRequests: invalid quantity "-5": must not be negative`}},
		{"bad duration", header + "flowControl:\n  defaultRequestTTL: 10\n",
			[]string{`flowControl.defaultRequestTTL: want a duration like "60s", got the number 10`}},
		{"negative duration", header + "flowControl:\n  noEndpointRequestTTL: -1s\n",
			[]string{`flowControl.noEndpointRequestTTL: must not be negative`}},
		{"duplicate band priority", header + "flowControl:\n  priorityBands:\n  - priority: 1\n  - priority: 1\n",
			[]string{`flowControl.priorityBands[1].priority: duplicate priority 1 (also priorityBands[0])`}},
		{"band priority not an int", header + "flowControl:\n  priorityBands:\n  - priority: high\n",
			[]string{`flowControl.priorityBands[0].priority: want an integer, got the string "high"`}},
		{"undefined band policy", header + "flowControl:\n  priorityBands:\n  - priority: 1\n    fairnessPolicyRef: rr\n",
			[]string{`flowControl.priorityBands[0].fairnessPolicyRef: undefined plugin "rr"`}},
		{"undefined saturation detector", header + "flowControl:\n  saturationDetector:\n    pluginRef: sd\n",
			[]string{`flowControl.saturationDetector.pluginRef: undefined plugin "sd"`}},
		{"undefined data source", header + "dataLayer:\n  sources:\n  - pluginRef: m\n    extractors: [{pluginRef: e}]\n",
			[]string{`dataLayer.sources[0].pluginRef: undefined plugin "m"`, `dataLayer.sources[0].extractors[0].pluginRef: undefined plugin "e"`}},
		{"undefined discovery", header + "dataLayer:\n  discovery: {pluginRef: d}\n",
			[]string{`dataLayer.discovery.pluginRef: undefined plugin "d"`}},
		{"injectDefaults not a bool", header + "dataLayer:\n  injectDefaults: sometimes\n",
			[]string{`dataLayer.injectDefaults: want true or false, got the string "sometimes"`}},
		{"undefined parser", header + "requestHandler:\n  parsers: [{pluginRef: p}]\n",
			[]string{`requestHandler.parsers[0].pluginRef: undefined plugin "p"`}},
		{"merge keys", header + "plugins:\n- &a {type: a}\n- <<: *a\n  name: b\n",
			[]string{`plugins[1]: merge keys (<<) are not supported`}},
		{"configmap with two entries", "apiVersion: v1\nkind: ConfigMap\ndata:\n  a.yaml: x\n  b.yaml: y\n",
			[]string{`data: a ConfigMap must hold exactly one entry`}},
		{"configmap inner error keeps file lines", "apiVersion: v1\nkind: ConfigMap\ndata:\n  c.yaml: |\n    " +
			strings.ReplaceAll(header, "\n", "\n    ") + "pluginz: []\n",
			[]string{`unknown field "pluginz" (did you mean "plugins"?) (line 7)`}},
		{"several errors at once", header + "plugins:\n- type: a\n- name: a\n  type: b\nschedulingProfiles:\n- name: p\n  plugins: [{pluginRef: x, weight: 0}]\n",
			[]string{`plugins[1].name: duplicate plugin name "a"`, `schedulingProfiles[0].plugins[0].pluginRef: undefined plugin "x"`, `schedulingProfiles[0].plugins[0].weight: must be > 0`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load([]byte(tt.in))
			if err == nil {
				t.Fatalf("want an error containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n  %v\nwant it to contain\n  %s", err, w)
				}
			}
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Errorf("error %v is not a *config.Error", err)
			}
			if n := len(config.Errors(err)); n < len(tt.want) {
				t.Errorf("Errors returned %d errors, want at least %d", n, len(tt.want))
			}
		})
	}
}

func TestQuantity(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"100", 100}, {"1k", 1000}, {"1Ki", 1024}, {"1Gi", 1 << 30}, {"500M", 500_000_000},
		{"1.5Gi", 3 << 29}, {"500m", 1}, {"1e3", 1000}, {"2E", 2_000_000_000_000_000_000}, {"+7", 7},
	}
	for _, tt := range tests {
		q, err := config.ParseQuantity(tt.in)
		if err != nil || q.Value() != tt.want || q.String() != tt.in {
			t.Errorf("ParseQuantity(%q) = %v (%d), %v; want %d", tt.in, q, q.Value(), err, tt.want)
		}
	}
	for _, bad := range []string{"", "Gi", "1Gx", "-1", "1..2", "9Ei", "1e", "1e+"} {
		if q, err := config.ParseQuantity(bad); err == nil {
			t.Errorf("ParseQuantity(%q) = %d, want an error", bad, q.Value())
		}
	}
}
