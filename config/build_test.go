package config_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/scheduling"
)

var update = flag.Bool("update", false, "rewrite golden files")

func load(t *testing.T, in string) *config.Config {
	t.Helper()
	cfg, err := config.Load([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func build(t *testing.T, in string, opts config.Options) (*config.Runtime, error) {
	t.Helper()
	rt, err := config.Build(context.Background(), load(t, in), testRegistry(), opts)
	if err == nil {
		t.Cleanup(func() { _ = rt.Close() })
	}
	return rt, err
}

func mustBuild(t *testing.T, in string) *config.Runtime {
	t.Helper()
	rt, err := build(t, in, config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func warnings(rt *config.Runtime) string {
	var b strings.Builder
	for _, w := range rt.Warnings {
		b.WriteString(w.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// profile describes a built profile as "filter:f scorer×w ... picker:p".
func profile(p *scheduling.Profile) string {
	var parts []string
	for _, f := range p.Filters {
		parts = append(parts, "filter:"+f.Name)
	}
	for _, s := range p.Scorers {
		parts = append(parts, s.Name+"×"+strconv.FormatFloat(s.Weight, 'g', -1, 64))
	}
	return strings.Join(append(parts, "picker:"+p.PickerName), " ")
}

func TestBuildSeed(t *testing.T) {
	cfg, err := config.LoadFile("testdata/seed-default-plugins.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := config.Build(context.Background(), cfg, std.Registry(), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()

	profs := rt.Director.Scheduler.Profiles()
	if len(profs) != 1 || profile(profs[0]) != "queue-scorer×2 kv-cache-utilization-scorer×2 prefix-cache-scorer×3 picker:max-score-picker" {
		t.Errorf("profile: %s", profile(profs[0]))
	}
	if _, _, err := rt.Selector.Select("/v1/chat/completions"); err != nil {
		t.Errorf("openai-parser should be selected: %v", err)
	}
	// Every warning is about a planned type this build does not have yet.
	reg := std.Registry()
	for _, w := range rt.Warnings {
		m := regexp.MustCompile(`type (\S+) is not available in this build \(planned\)`).FindStringSubmatch(w.Message)
		if m == nil {
			t.Errorf("unexpected warning %s", w)
			continue
		}
		if _, registered := reg.Lookup(m[1]); registered {
			t.Errorf("warning about a registered type: %s", w)
		}
	}
	if len(rt.AutoCreated) != 1 || rt.AutoCreated[0].Type != "approx-prefix-cache-producer" {
		t.Errorf("auto-created producers: %+v (the seed's log shows the prefix producer added)", rt.AutoCreated)
	}
	golden(t, "testdata/seed.effective.yaml", rt.Config)
}

// golden compares the effective configuration with a golden file and checks
// that it loads back into the same effective configuration (defaults are
// idempotent).
func golden(t *testing.T, file string, cfg *config.Config) {
	t.Helper()
	got, err := cfg.Effective()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("effective configuration differs from %s (run go test -update):\n%s", file, got)
	}
	again, err := config.Load(got)
	if err != nil {
		t.Fatalf("the effective configuration does not load: %v", err)
	}
	if err := config.Defaults(again, std.Registry()); err != nil {
		t.Fatal(err)
	}
	twice, _ := again.Effective()
	if !bytes.Equal(stripComments(twice), stripComments(got)) {
		t.Errorf("defaults are not idempotent:\n%s", twice)
	}
}

func stripComments(b []byte) []byte {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if i := strings.Index(l, " # "); i >= 0 {
			l = l[:i]
		}
		out = append(out, l)
	}
	return []byte(strings.Join(out, "\n"))
}

func TestBuildDoesNotModifyConfig(t *testing.T) {
	cfg, err := config.LoadFile("testdata/seed-default-plugins.yaml")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := cfg.Effective()
	rt, err := config.Build(context.Background(), cfg, std.Registry(), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	after, _ := cfg.Effective()
	if !bytes.Equal(before, after) {
		t.Errorf("Build modified its input:\n%s", after)
	}
}

func TestNoConfigAtAll(t *testing.T) {
	cfg, err := config.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := config.Build(context.Background(), cfg, std.Registry(), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if got := profile(rt.Director.Scheduler.Profiles()[0]); got != "queue-scorer×2 kv-cache-utilization-scorer×2 prefix-cache-scorer×3 picker:max-score-picker" {
		t.Errorf("profile: %s", got)
	}
	golden(t, "testdata/default.effective.yaml", rt.Config)
	// A nil configuration is the same as an empty one.
	rt2, err := config.Build(context.Background(), nil, std.Registry(), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close()
	a, _ := rt.Config.Effective()
	b, _ := rt2.Config.Effective()
	if !bytes.Equal(a, b) {
		t.Errorf("nil config differs from empty config:\n%s", b)
	}
}

func TestNoProfilesMakesDefaultProfile(t *testing.T) {
	rt := mustBuild(t, header+`plugins:
- type: label-selector-filter
  parameters:
    matchLabels: {app: vllm}
- type: openai-parser
- type: queue-scorer
- type: random-picker
- type: test-lifecycle
- type: load-aware-scorer
`)
	if got := profile(rt.Director.Scheduler.Profiles()[0]); got != "filter:label-selector-filter queue-scorer×1 load-aware-scorer×1 picker:random-picker" {
		t.Errorf("profile: %s", got)
	}
	if _, ok := rt.Plugin("max-score-picker"); ok {
		t.Error("a profile with a picker must not get max-score-picker")
	}
	if rt.Config.SchedulingProfiles[0].Name != "default" {
		t.Errorf("name: %s", rt.Config.SchedulingProfiles[0].Name)
	}
}

func TestProfileWithoutPickerGetsMaxScore(t *testing.T) {
	rt := mustBuild(t, header+`plugins:
- type: queue-scorer
- type: max-score-picker
  parameters: {maxNumOfEndpoints: 2}
schedulingProfiles:
- name: a
  plugins: [{pluginRef: queue-scorer}]
`)
	if got := profile(rt.Director.Scheduler.Profiles()[0]); got != "queue-scorer×1 picker:max-score-picker" {
		t.Errorf("profile: %s", got)
	}
	// The configured plugin named max-score-picker is the one used.
	if p, _ := rt.Plugin("max-score-picker"); !strings.Contains(fmt.Sprintf("%+v", p), "MaxNumOfEndpoints:2") {
		t.Errorf("picker: %+v", p)
	}
}

func TestHandlerConfiguredIsKept(t *testing.T) {
	rt := mustBuild(t, header+`plugins:
- type: queue-scorer
- type: header-profile-handler
  parameters: {header: x-profile, defaultProfile: b}
schedulingProfiles:
- name: a
  plugins: [{pluginRef: queue-scorer}]
- name: b
  plugins: [{pluginRef: queue-scorer, weight: 3}]
`)
	if _, ok := rt.Plugin("single-profile-handler"); ok {
		t.Error("single-profile-handler added although a handler is configured")
	}
	ps := rt.Director.Scheduler.Profiles()
	if len(ps) != 2 || profile(ps[1]) != "queue-scorer×3 picker:max-score-picker" {
		t.Errorf("profiles: %v", ps)
	}
}

func TestWeightOnNonScorerWarns(t *testing.T) {
	rt := mustBuild(t, header+`plugins: [{type: queue-scorer}, {type: random-picker}]
schedulingProfiles:
- name: a
  plugins: [{pluginRef: queue-scorer}, {pluginRef: random-picker, weight: 2}]
`)
	if w := warnings(rt); !strings.Contains(w, `schedulingProfiles[0].plugins[1].weight: plugin "random-picker" is not a scorer; its weight is ignored (line 6)`) {
		t.Errorf("warnings: %s", w)
	}
}

func TestFlowControlWarnings(t *testing.T) {
	rt := mustBuild(t, header+"flowControl:\n  maxRequests: 10\n")
	if w := warnings(rt); !strings.Contains(w, "flowControl: the flowControl feature gate is off: this section is checked but not used") {
		t.Errorf("warnings: %s", w)
	}
	rt = mustBuild(t, header+"featureGates: [flowControl]\n")
	if w := warnings(rt); w != "" || rt.FlowControl == nil {
		t.Errorf("flow control on: controller %v, warnings: %s", rt.FlowControl, w)
	}
}

func TestPlannedProfileHandlerIsReported(t *testing.T) {
	_, err := build(t, header+`plugins: [{type: queue-scorer}, {type: disagg-profile-handler}]
schedulingProfiles:
- {name: prefill, plugins: [{pluginRef: queue-scorer}]}
- {name: decode, plugins: [{pluginRef: queue-scorer}]}
`, config.Options{})
	want := `plugins[1]: profile handler "disagg-profile-handler": type disagg-profile-handler is not available in this build (planned)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %s", err, want)
	}
}

// TestBuildBadInput covers the errors only a registry can find: each names
// the YAML path, or both plugins.
func TestBuildBadInput(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"unknown type", header + "plugins:\n- type: queue-scorer\n- name: x\n  type: quue-scorer\n",
			[]string{`config: plugins[1].type: plugin "x": unknown plugin type "quue-scorer" (did you mean "queue-scorer"?) (line 5)`}},
		{"unknown type, no suggestion", header + "plugins:\n- type: frobnicator\n",
			[]string{`plugins[0].type: plugin "frobnicator": unknown plugin type "frobnicator" (line 4)`}},
		{"unknown parameter", header + "plugins:\n- name: picker\n  type: max-score-picker\n  parameters: {foo: 1}\n",
			[]string{`config: plugins[0].parameters: plugin "picker" (type max-score-picker): unknown field "foo" (line 4)`}},
		{"parameter of the wrong type", header + "plugins:\n- type: max-score-picker\n  parameters: {maxNumOfEndpoints: many}\n",
			[]string{`plugins[0].parameters: plugin "max-score-picker" (type max-score-picker): field "maxNumOfEndpoints": cannot use string as int`}},
		{"parameter rejected by Validate", header + "plugins:\n- type: load-aware-scorer\n  parameters: {threshold: -1}\n",
			[]string{`plugins[0].parameters: plugin "load-aware-scorer" (type load-aware-scorer): `, `threshold`}},
		{"profile references a parser", header + "plugins: [{type: queue-scorer}, {type: openai-parser}]\nschedulingProfiles:\n- name: p\n  plugins: [{pluginRef: queue-scorer}, {pluginRef: openai-parser}]\n",
			[]string{`schedulingProfiles[0].plugins[1].pluginRef: plugin "openai-parser" (type openai-parser) is not a filter, scorer or picker`}},
		{"profile references a handler", header + "plugins: [{type: queue-scorer}, {type: single-profile-handler}]\nschedulingProfiles:\n- name: p\n  plugins: [{pluginRef: single-profile-handler}]\n",
			[]string{`schedulingProfiles[0].plugins[0].pluginRef: plugin "single-profile-handler" (type single-profile-handler) is not a filter, scorer or picker`}},
		{"two pickers in a profile", header + "plugins: [{type: queue-scorer}, {type: max-score-picker}, {type: random-picker}]\nschedulingProfiles:\n- name: p\n  plugins: [{pluginRef: queue-scorer}, {pluginRef: max-score-picker}, {pluginRef: random-picker}]\n",
			[]string{`schedulingProfiles[0].plugins[2].pluginRef: profile "p" has two pickers, "max-score-picker" (plugins[1]) and "random-picker": keep one (line 6)`}},
		{"two pickers and no profile", header + "plugins: [{type: max-score-picker}, {type: random-picker}]\n",
			[]string{`schedulingProfiles: missing, and a default profile cannot hold the 2 configured pickers "max-score-picker", "random-picker": add a profile that names one`}},
		{"two profiles, no handler", header + "plugins: [{type: queue-scorer}]\nschedulingProfiles:\n- {name: a, plugins: [{pluginRef: queue-scorer}]}\n- {name: b, plugins: [{pluginRef: queue-scorer}]}\n",
			[]string{`plugins: no profile handler: 2 scheduling profiles need one`}},
		{"two handlers", header + "plugins: [{type: queue-scorer}, {type: single-profile-handler}, {name: by-header, type: header-profile-handler}]\n",
			[]string{`plugins[2]: two profile handlers, "single-profile-handler" (type single-profile-handler) and "by-header" (type header-profile-handler): configure one`}},
		{"parser that is not a parser", header + "plugins: [{type: queue-scorer}]\nrequestHandler:\n  parsers: [{pluginRef: queue-scorer}]\n",
			[]string{`requestHandler.parsers[0].pluginRef: plugin "queue-scorer" (type queue-scorer) is not a parser`}},
		{"default name taken by another type", header + "plugins:\n- {name: max-score-picker, type: queue-scorer}\nschedulingProfiles:\n- {name: a, plugins: [{pluginRef: max-score-picker}]}\n",
			[]string{`plugins[0].name: "max-score-picker" is the name of the default max-score-picker, but this plugin has type queue-scorer: rename it (line 4)`}},
		{"data dependency cycle", header + "plugins: [{type: queue-scorer}, {type: test-cyc-a}, {type: test-cyc-b}]\n",
			[]string{`data dependencies: data dependency cycle between`, `plugin "test-cyc-a"`, `plugin "test-cyc-b"`}},
		{"missing producer without default", header + "plugins: [{type: queue-scorer}, {type: test-orphan}]\n",
			[]string{`data dependencies: plugin "test-orphan" consumes data key "test/orphan" but no configured plugin produces it and no default producer is registered`}},
		{"init failure", header + "plugins: [{type: test-lifecycle}, {name: gpu, type: test-bad-init}]\n",
			[]string{`plugins[1]: plugin "gpu" (type test-bad-init): init: no GPU here (line 3)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resetEvents()
			rt, err := build(t, tt.in, config.Options{})
			if err == nil {
				t.Fatalf("want an error containing %q; warnings:\n%s", tt.want, warnings(rt))
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n  %v\nwant it to contain\n  %s", err, w)
				}
			}
			// Whatever was initialised before the failure is closed.
			var inits, closes int
			for _, e := range resetEvents() {
				if strings.HasPrefix(e, "init ") {
					inits++
				}
				if strings.HasPrefix(e, "close ") {
					closes++
				}
			}
			if inits != closes {
				t.Errorf("%d plugins initialised, %d closed", inits, closes)
			}
		})
	}
}

func TestGoBuiltConfigIsValidated(t *testing.T) {
	zero := 0.0
	cfg := &config.Config{
		Plugins: []config.PluginSpec{{Type: "queue-scorer"}},
		SchedulingProfiles: []config.SchedulingProfile{{Name: "p", Plugins: []config.ProfilePlugin{
			{PluginRef: "queue-scorer", Weight: &zero}}}},
	}
	_, err := config.Build(context.Background(), cfg, std.Registry(), config.Options{})
	if err == nil || !strings.Contains(err.Error(), "schedulingProfiles[0].plugins[0].weight: must be > 0") {
		t.Errorf("got %v", err)
	}
}

const producerConfig = header + `plugins:
- name: hook-b
  type: test-hook
- type: test-hash-scorer
- name: hook-a
  type: test-hook
schedulingProfiles:
- name: default
  plugins: [{pluginRef: test-hash-scorer}]
`

func TestAutoCreatedProducers(t *testing.T) {
	resetEvents()
	var logs bytes.Buffer
	rt, err := build(t, producerConfig, config.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var auto []string
	for _, a := range rt.AutoCreated {
		auto = append(auto, a.String())
	}
	want := []string{
		"test-hasher (type test-hasher) produces test/hashes for test-hash-scorer",
		"test-tokenizer (type test-tokenizer) produces test/tokens for test-hasher",
	}
	if !slices.Equal(auto, want) {
		t.Errorf("auto-created:\n%s\nwant:\n%s", strings.Join(auto, "\n"), strings.Join(want, "\n"))
	}
	if got := strings.Join(rt.ProducerOrder, ","); got != "test-tokenizer,test-hasher" {
		t.Errorf("producer order: %s", got)
	}
	var dp []string
	for _, p := range rt.Director.Producers {
		dp = append(dp, p.Name)
	}
	if got := strings.Join(dp, ","); got != "test-tokenizer,test-hasher" {
		t.Errorf("director producers: %s", got)
	}
	y, _ := rt.Config.Effective()
	for _, w := range []string{"- name: test-hasher # auto-created default producer", "- name: test-tokenizer # auto-created default producer"} {
		if !strings.Contains(string(y), w) {
			t.Errorf("effective configuration lacks %q:\n%s", w, y)
		}
	}
	l := logs.String()
	if n := strings.Count(l, `msg="effective configuration"`); n != 1 {
		t.Errorf("effective configuration logged %d times:\n%s", n, l)
	}
	if n := strings.Count(l, `msg="auto-created default producer"`); n != 2 {
		t.Errorf("auto-created producers logged %d times:\n%s", n, l)
	}

	// The pipeline runs the producers in order: the scorer sees the hashes.
	eps := []*datalayer.Endpoint{datalayer.New("a", "10.0.0.1", 8000, nil), datalayer.New("b", "10.0.0.2", 8000, nil)}
	req := &scheduling.Request{ID: "r1", Trace: &scheduling.Trace{}}
	if _, err := rt.Director.Schedule(context.Background(), req, eps); err != nil {
		t.Fatal(err)
	}
	if s := req.Trace.Profiles[0].Scorers[0].Scores; s[0] != 1 || s[1] != 1 {
		t.Errorf("scorer did not see the produced data: %v", s)
	}
}

func TestLifecycleOrder(t *testing.T) {
	resetEvents()
	rt, err := config.Build(context.Background(), load(t, producerConfig), testRegistry(), config.Options{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	var hooks []string
	for _, h := range rt.Director.PreRequests {
		hooks = append(hooks, h.Name)
	}
	if got := strings.Join(hooks, ","); got != "hook-b,hook-a" {
		t.Errorf("pre-request hooks must follow configuration order: %s", got)
	}
	eps := []*datalayer.Endpoint{datalayer.New("a", "10.0.0.1", 8000, nil)}
	if _, err := rt.Director.Schedule(context.Background(), &scheduling.Request{}, eps); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	_ = rt.Close() // idempotent
	var got []string
	for _, e := range resetEvents() {
		got = append(got, strings.Split(e, " rand=")[0])
	}
	want := []string{
		"init hook-b", "init test-hash-scorer", "init hook-a", // configuration order
		"init test-hasher", "init test-tokenizer", // then auto-created, as the graph adds them
		"pre-request hook-b picked a", "pre-request hook-a picked a",
		"close test-tokenizer", "close test-hasher", "close hook-a", "close test-hash-scorer", "close hook-b",
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSeedMakesRandomnessDeterministic(t *testing.T) {
	draws := func(seed uint64) []string {
		resetEvents()
		rt, err := config.Build(context.Background(), load(t, producerConfig), testRegistry(), config.Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		_ = rt.Close()
		var out []string
		for _, e := range resetEvents() {
			if strings.HasPrefix(e, "init ") {
				out = append(out, e)
			}
		}
		return out
	}
	a, b, c := draws(1), draws(1), draws(2)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different draws:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("different seeds, same draws: %v", a)
	}
	// Each plugin has its own stream.
	if strings.Split(a[0], "=")[1] == strings.Split(a[2], "=")[1] {
		t.Errorf("two plugins drew the same first value: %v", a)
	}
}

func TestScheduleEndToEnd(t *testing.T) {
	rt, err := config.Build(context.Background(), nil, std.Registry(), config.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	now := time.Now()
	busy := datalayer.New("busy", "10.0.0.1", 8000, nil).WithMetrics(datalayer.Metrics{Waiting: 10, KVUsage: 0.9, UpdateTime: now})
	idle := datalayer.New("idle", "10.0.0.2", 8000, nil).WithMetrics(datalayer.Metrics{Waiting: 0, KVUsage: 0.1, UpdateTime: now})
	body, err := rt.Selector.Parse("/v1/chat/completions", []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req := &scheduling.Request{IncomingModel: body.Model, TargetModel: body.Model, Body: body}
	d, err := rt.Director.Schedule(context.Background(), req, []*datalayer.Endpoint{busy, idle})
	if err != nil {
		t.Fatal(err)
	}
	if d.Header() != "10.0.0.2:8000" {
		t.Errorf("picked %s, want the idle endpoint", d.Header())
	}
}

var _ plugins.Clock = plugins.SystemClock{}

func TestAllSectionsEffective(t *testing.T) {
	cfg, err := config.LoadFile("testdata/all-sections.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := config.Build(context.Background(), cfg, std.Registry(), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	golden(t, "testdata/all-sections.effective.yaml", rt.Config)
	if p, _ := rt.Plugin("picker"); rt.Director.Scheduler.Profiles()[0].Picker != p {
		t.Error("the profile should use the configured picker")
	}
}
