package config_test

import (
	"context"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/requestcontrol"
)

const objectivesYAML = `apiVersion: llm-d.ai/v1alpha2
kind: InferenceObjective
metadata:
  name: critical
  namespace: default
spec:
  priority: 10
  poolRef:
    name: my-pool
---
apiVersion: inference.networking.x-k8s.io/v1alpha2
kind: InferenceObjective
metadata: {name: sheddable-batch}
spec: {priority: -1}
---
apiVersion: v1
kind: List
items:
- apiVersion: llm-d.ai/v1alpha2
  kind: InferenceObjective
  metadata: {name: standard}
  spec: {}
  status: {conditions: []}
`

func TestLoadObjectives(t *testing.T) {
	o, err := config.LoadObjectives([]byte(objectivesYAML))
	if err != nil {
		t.Fatal(err)
	}
	if len(o) != 3 || o["critical"] != 10 || o["sheddable-batch"] != -1 || o["standard"] != 0 {
		t.Errorf("objectives %v", o)
	}
	if o, err := config.LoadObjectives(nil); err != nil || len(o) != 0 {
		t.Errorf("empty: %v %v", o, err)
	}
}

func TestLoadObjectivesErrors(t *testing.T) {
	cases := []struct{ doc, want string }{
		{"apiVersion: llm-d.ai/v1alpha2\nkind: InferenceObjective\nmetadata: {name: a}\nspec: {priority: high}\n", `spec.priority: want an integer, got the string "high" (line 4)`},
		{"apiVersion: llm-d.ai/v1alpha2\nkind: InferenceObjective\nmetadata: {name: a}\nspec: {priorty: 1}\n", `unknown field "priorty" (did you mean "priority"?)`},
		{"apiVersion: llm-d.ai/v1alpha2\nkind: InferenceModelRewrite\nmetadata: {name: a}\n", `kind: want InferenceObjective, got "InferenceModelRewrite"`},
		{"apiVersion: apps/v1\nkind: InferenceObjective\nmetadata: {name: a}\n", `unsupported apiVersion "apps/v1"`},
		{"apiVersion: llm-d.ai/v1alpha2\nkind: InferenceObjective\nspec: {}\n", "metadata.name: missing"},
		{"apiVersion: llm-d.ai/v1alpha2\nkind: InferenceObjective\nmetadata: {name: a}\n---\napiVersion: llm-d.ai/v1alpha2\nkind: InferenceObjective\nmetadata: {name: a}\n", `documents[1].metadata.name: InferenceObjective "a" is defined twice`},
		{"kind: [", "invalid YAML"},
	}
	for _, c := range cases {
		_, err := config.LoadObjectives([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.doc, err, c.want)
		}
	}
}

// seedRewriteYAML is the seed article's InferenceModelRewrite.
const seedRewriteYAML = `apiVersion: llm-d.ai/v1alpha2
kind: InferenceModelRewrite
metadata:
  name: llama3-canary
spec:
  poolRef:
    group: inference.networking.k8s.io
    kind: InferencePool
    name: vllm-llama3-8b-instruct
  rules:
  - matches:
    - model:
        value: "llama3"
    targets:
    - modelRewrite: "llama3-stable"
      weight: 90
    - modelRewrite: "llama3-canary"
      weight: 10
  - targets:
    - modelRewrite: default-model
`

func TestLoadModelRewrites(t *testing.T) {
	rws, err := config.LoadModelRewrites([]byte(seedRewriteYAML))
	if err != nil {
		t.Fatal(err)
	}
	if len(rws) != 1 || rws[0].Name != "llama3-canary" || len(rws[0].Rules) != 2 {
		t.Fatalf("rewrites %+v", rws)
	}
	r := rws[0].Rules[0]
	if len(r.Models) != 1 || r.Models[0] != "llama3" || r.Targets[1] != (requestcontrol.RewriteTarget{Model: "llama3-canary", Weight: 10}) {
		t.Errorf("rule %+v", r)
	}
	if len(rws[0].Rules[1].Models) != 0 {
		t.Errorf("catch-all rule %+v", rws[0].Rules[1])
	}
	if _, err := requestcontrol.NewModelRewrites(rws...); err != nil {
		t.Error(err)
	}
}

func TestLoadModelRewritesErrors(t *testing.T) {
	head := "apiVersion: llm-d.ai/v1alpha2\nkind: InferenceModelRewrite\nmetadata: {name: r}\n"
	cases := []struct{ spec, want string }{
		{"spec: {rules: [{targets: [{modelRewrite: x, weight: -1}]}]}\n", "spec.rules[0].targets[0].weight: must be ≥ 0"},
		{"spec: {rules: [{matches: [{model: {type: Prefix, value: x}}], targets: [{modelRewrite: y}]}]}\n", `unsupported match type "Prefix"`},
		{"spec: {rules: [{matches: [{model: {value: x}}]}]}\n", "spec.rules[0].targets: missing"},
		{"spec: {rules: [{targets: [{weight: 1}]}]}\n", "spec.rules[0].targets[0].modelRewrite: missing"},
		{"spec: {rules: [{matches: [{model: {}}], targets: [{modelRewrite: y}]}]}\n", "spec.rules[0].matches[0].model.value: missing"},
		{"spec: {}\n", "spec.rules: missing"},
	}
	for _, c := range cases {
		_, err := config.LoadModelRewrites([]byte(head + c.spec))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.spec, err, c.want)
		}
	}
}

// TestBuildWiresRequestControl: the Director built from a configuration has
// its parsers, the default admission gate over the configured detector, and
// every hook of the configured plugins.
func TestBuildWiresRequestControl(t *testing.T) {
	cfg, err := config.Load([]byte(`
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: active-request-scorer
- type: session-affinity-scorer
- type: concurrency-detector
  parameters: {maxConcurrency: 4}
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: active-request-scorer
  - pluginRef: session-affinity-scorer
flowControl:
  saturationDetector: {pluginRef: concurrency-detector}
`))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := config.Build(context.Background(), cfg, std.Registry(), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	d := rt.Director
	if d.Parsers == nil || d.Parsers != rt.Selector {
		t.Error("parsers not wired")
	}
	gate, ok := d.Admission.(*requestcontrol.SaturationAdmitter)
	if !ok {
		t.Fatalf("admission %T", d.Admission)
	}
	if det, _ := rt.Plugin("concurrency-detector"); gate.Detector != det {
		t.Errorf("gate detector %v", gate.Detector)
	}
	names := func(ns []string) string { return strings.Join(ns, ",") }
	var pre, hdr, chunk, done []string
	for _, h := range d.PreRequests {
		pre = append(pre, h.Name)
	}
	for _, h := range d.ResponseHeaders {
		hdr = append(hdr, h.Name)
	}
	for _, h := range d.ResponseChunks {
		chunk = append(chunk, h.Name)
	}
	for _, h := range d.ResponseCompletes {
		done = append(done, h.Name)
	}
	if names(pre) != "concurrency-detector,inflight-load-producer" || names(hdr) != "session-affinity-scorer" ||
		names(chunk) != "inflight-load-producer" || names(done) != "concurrency-detector,inflight-load-producer" {
		t.Errorf("hooks: pre %v, header %v, chunk %v, complete %v", pre, hdr, chunk, done)
	}
	if len(rt.AutoCreated) != 1 || rt.AutoCreated[0].Type != "inflight-load-producer" {
		t.Errorf("auto-created %+v", rt.AutoCreated)
	}
	if len(d.Producers) != 1 || d.Producers[0].Name != "inflight-load-producer" {
		t.Errorf("producers %+v", d.Producers)
	}
}
