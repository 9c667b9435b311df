package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/plugins/std"
)

// eppkit runs the CLI in-process and returns its exit status and output.
func eppkit(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func td(name string) string { return filepath.Join("testdata", name) }

func mustContain(t *testing.T, what, s string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(s, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, s)
		}
	}
}

func TestUsage(t *testing.T) {
	if code, _, errOut := eppkit(t); code != exitUsage || !strings.Contains(errOut, "usage: eppkit") {
		t.Errorf("no arguments: %d %s", code, errOut)
	}
	if code, _, errOut := eppkit(t, "frobnicate"); code != exitUsage || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %d %s", code, errOut)
	}
	if code, out, _ := eppkit(t, "help"); code != exitOK || !strings.Contains(out, "config check FILE") {
		t.Errorf("help: %d %s", code, out)
	}
	if code, _, _ := eppkit(t, "schedule", "-h"); code != exitOK {
		t.Errorf("schedule -h: %d", code)
	}
	if code, _, errOut := eppkit(t, "schedule", "--bogus"); code != exitUsage || !strings.Contains(errOut, "flag provided but not defined") {
		t.Errorf("bad flag: %d %s", code, errOut)
	}
}

func TestPlugins(t *testing.T) {
	code, out, _ := eppkit(t, "plugins")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	mustContain(t, "plugins", out,
		"scorer\n  active-request-scorer",
		"max-score-picker        stable  highest total",
		"      maxNumOfEndpoints (int, default 1): number of endpoints",
		"planned, not in this build",
		"scorer: precise-prefix-cache-scorer",
	)

	code, out, _ = eppkit(t, "plugins", "--output", "json")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var doc struct {
		Plugins []struct {
			Type, Category string
			Parameters     []struct{ Name, Type, Default, Doc string }
		}
		Planned []struct{ Type, Category string }
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(doc.Plugins, func(p struct {
		Type, Category string
		Parameters     []struct{ Name, Type, Default, Doc string }
	}) bool {
		return p.Type == "load-aware-scorer"
	})
	if i < 0 || doc.Plugins[i].Category != "scorer" || doc.Plugins[i].Parameters[0].Default != "128" {
		t.Errorf("load-aware-scorer: %+v", doc.Plugins)
	}
	if len(doc.Planned) == 0 {
		t.Error("no planned types")
	}
}

func TestConfigCheckSeed(t *testing.T) {
	code, out, errOut := eppkit(t, "config", "check", td("seed.yaml"))
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	mustContain(t, "config check", out,
		"- name: max-score-picker # system default",
		"      - pluginRef: max-score-picker\n",
		"      - pluginRef: prefix-cache-scorer\n        weight: 3\n",
		"# producer order: approx-prefix-cache-producer",
		"#   approx-prefix-cache-producer (type approx-prefix-cache-producer) produces prefix-match/approx-prefix-cache-producer for prefix-cache-scorer",
		"testdata/seed.yaml: OK",
	)
	// The output is itself a valid configuration that checks the same.
	cfg, err := config.Load([]byte(out))
	if err != nil {
		t.Fatalf("the output does not load: %v", err)
	}
	if len(cfg.Plugins) != 15 { // the seed's 5, 9 system defaults, the auto-created producer
		t.Errorf("effective plugins: %d", len(cfg.Plugins))
	}
}

func TestConfigCheckStdin(t *testing.T) {
	f, err := os.Open(td("config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out, errOut bytes.Buffer
	c := &cli{stdin: f, stdout: &out, stderr: &errOut, registry: std.Registry}
	if code := c.run([]string{"config", "check", "-"}); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	mustContain(t, "config check -", out.String(), "maxNumOfEndpoints: 2")
}

func TestConfigCheckInvalid(t *testing.T) {
	code, out, errOut := eppkit(t, "config", "check", td("bad-config.yaml"))
	if code != exitFail || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	mustContain(t, "stderr", errOut,
		"bad-config.yaml: invalid configuration\n",
		"bad-config.yaml:12: schedulingProfiles[0].plugins[0].weight: must be > 0 (got 0)\n",
		`bad-config.yaml:14: schedulingProfiles[0].plugins[1].pluginRef: undefined plugin "kv-cache-scorer"`,
	)

	code, _, errOut = eppkit(t, "config", "check", td("bad-parameter.yaml"))
	if code != exitFail {
		t.Fatalf("exit %d", code)
	}
	mustContain(t, "stderr", errOut,
		`bad-parameter.yaml:5: plugins[1].parameters: plugin "max-score-picker" (type max-score-picker): unknown field "tieBreak"`)

	if code, _, errOut := eppkit(t, "config", "check", td("missing.yaml")); code != exitFail || !strings.Contains(errOut, "no such file") {
		t.Errorf("missing file: %d %s", code, errOut)
	}
	if code, _, _ := eppkit(t, "config", "check"); code != exitUsage {
		t.Errorf("no file: %d", code)
	}
	if code, _, _ := eppkit(t, "config", "lint", "x"); code != exitUsage {
		t.Errorf("unknown subcommand: %d", code)
	}
}

func schedule(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return eppkit(t, append([]string{"schedule", "--request", td("request.json")}, args...)...)
}

func TestScheduleExplainTie(t *testing.T) {
	code, out, errOut := schedule(t, "--endpoints", td("equal-endpoints.yaml"), "--explain", "--seed", "1")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// The built-in default configuration: queue ×2, KV cache ×2, prefix ×3
	// (a cold index: no endpoint holds the prompt yet).
	mustContain(t, "explain", out,
		"seed: 1\n",
		`profile "default": 2 candidates`,
		"queue-scorer×2 kv-cache-utilization-scorer×2 prefix-cache-scorer×3 | total",
		"10.0.0.1:8000                                1.0000                        0.7500                0.0000 | 3.5000",
		"10.0.0.2:8000                                1.0000                        0.7500                0.0000 | 3.5000",
		"tie: 2 endpoints share the highest total 3.5; broken randomly",
		"x-gateway-destination-endpoint: 10.0.0.",
	)
}

func TestScheduleWithConfig(t *testing.T) {
	code, out, errOut := schedule(t, "--config", td("config.yaml"), "--endpoints", td("endpoints.yaml"))
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "endpoint: 10.0.0.2:8000\nfallbacks: 10.0.0.1:8000\nmodel: meta-llama/Llama-3.1-8B-Instruct\nx-gateway-destination-endpoint: 10.0.0.2:8000,10.0.0.1:8000\n"
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

func TestScheduleHeaderChoosesProfile(t *testing.T) {
	for _, tt := range []struct {
		header, want string
	}{
		{"", "10.0.0.1:8000"},                       // default profile "fast": shortest queue
		{"X-LLM-D-Profile: roomy", "10.0.0.2:8000"}, // emptiest KV cache
	} {
		args := []string{"--config", td("header-profiles.yaml"), "--endpoints", td("skewed-endpoints.yaml"), "--output", "json"}
		if tt.header != "" {
			args = append(args, "--header", tt.header)
		}
		code, out, errOut := schedule(t, args...)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var res struct{ Endpoints []string }
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		if res.Endpoints[0] != tt.want {
			t.Errorf("header %q: picked %v, want %s", tt.header, res.Endpoints, tt.want)
		}
	}
	if code, _, errOut := schedule(t, "--endpoints", td("equal-endpoints.yaml"), "--header", "no-colon"); code != exitUsage || !strings.Contains(errOut, `want "name: value"`) {
		t.Errorf("bad header: %d %s", code, errOut)
	}
}

func TestScheduleJSON(t *testing.T) {
	code, out, errOut := schedule(t, "--config", td("config.yaml"), "--endpoints", td("equal-endpoints.yaml"), "--output", "json", "--seed", "5")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &fields); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if got := strings.Join(keys, ","); got != "body,endpoints,incomingModel,targetModel,trace" {
		t.Errorf("fields: %s", got)
	}
	var res struct {
		Endpoints     []string
		IncomingModel string
		TargetModel   string
		Body          struct {
			Model  string
			Stream bool
		}
		Trace struct {
			Primary  string
			Profiles []struct {
				Scorers []struct {
					Scorer string
					Weight float64
					Scores []float64
				}
				Reason string
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Endpoints) != 2 || res.Endpoints[0] == res.Endpoints[1] {
		t.Errorf("endpoints: %v", res.Endpoints)
	}
	if res.IncomingModel != "meta-llama/Llama-3.1-8B-Instruct" || res.TargetModel != res.IncomingModel {
		t.Errorf("models: %q %q", res.IncomingModel, res.TargetModel)
	}
	if res.Body.Model != res.IncomingModel || !res.Body.Stream {
		t.Errorf("body: %+v", res.Body)
	}
	p := res.Trace.Profiles[0]
	if res.Trace.Primary != "default" || len(p.Scorers) != 2 || p.Scorers[0].Scorer != "queue-scorer" || p.Scorers[0].Weight != 2 {
		t.Errorf("trace: %+v", res.Trace)
	}
	if !strings.Contains(p.Reason, "broken randomly") {
		t.Errorf("reason: %s", p.Reason)
	}
}

func TestScheduleDeterministicWithSeed(t *testing.T) {
	args := []string{"--endpoints", td("equal-endpoints.yaml"), "--output", "json"}
	_, a, _ := schedule(t, append(args, "--seed", "42")...)
	_, b, _ := schedule(t, append(args, "--seed", "42")...)
	if a != b {
		t.Errorf("same seed, different output:\n%s\n%s", a, b)
	}
	// The tie is really broken at random: over a few seeds both endpoints win.
	primaries := map[string]bool{}
	for _, seed := range []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"} {
		code, out, errOut := schedule(t, append(args, "--seed", seed)...)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var res struct{ Endpoints []string }
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		primaries[res.Endpoints[0]] = true
	}
	if len(primaries) != 2 {
		t.Errorf("twelve seeds always picked %v", primaries)
	}
}

func TestScheduleRejections(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "none.yaml")
	if err := os.WriteFile(empty, []byte("endpoints: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badBody := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(badBody, []byte(`{"messages": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		status int
		reason string
	}{
		{"every endpoint filtered", []string{"--config", td("filter-all.yaml"), "--endpoints", td("equal-endpoints.yaml")}, 429, "rejected-saturated"},
		{"no endpoints", []string{"--endpoints", empty}, 503, "rejected-no-endpoints"},
		{"no parser for the path", []string{"--endpoints", td("equal-endpoints.yaml"), "--path", "/v1/models"}, 400, `parsers: no parser for path "/v1/models"`},
		{"bad body", []string{"--endpoints", td("equal-endpoints.yaml"), "--request", badBody}, 400, "missing model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, _ := schedule(t, append(tt.args, "--output", "json")...)
			if code != exitFail {
				t.Errorf("exit %d, want %d", code, exitFail)
			}
			var res struct {
				Error struct {
					Status int
					Reason string
				}
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			if res.Error.Status != tt.status || !strings.Contains(res.Error.Reason, tt.reason) {
				t.Errorf("got %+v, want %d %s", res.Error, tt.status, tt.reason)
			}
			code, out, _ = schedule(t, tt.args...)
			if code != exitFail || !strings.Contains(out, "rejected: ") {
				t.Errorf("text: exit %d\n%s", code, out)
			}
		})
	}
}

func TestScheduleBadInputFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, endpoints, want string
	}{
		{"unknown field", "endpoints:\n- name: a\n  address: 10.0.0.1\n  port: 80\n  metrics: {queue: 3}\n", "line 5: field queue not found"},
		{"missing port", "endpoints:\n- name: a\n  address: 10.0.0.1\n", "endpoints[0].port: want 1..65535, got 0"},
		{"missing address", "endpoints:\n- name: a\n  port: 80\n", "endpoints[0].address: missing"},
		{"duplicate name", "endpoints:\n- {name: a, address: 10.0.0.1, port: 80}\n- {name: a, address: 10.0.0.2, port: 80}\n", `endpoints[1].name: duplicate endpoint "a" (also endpoints[0])`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := schedule(t, "--endpoints", write("e.yaml", tt.endpoints))
			if code != exitFail || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant %q", code, errOut, tt.want)
			}
		})
	}
	if code, _, errOut := schedule(t, "--endpoints", td("equal-endpoints.yaml"), "--config", td("bad-config.yaml")); code != exitFail || !strings.Contains(errOut, "bad-config.yaml:12: ") {
		t.Errorf("bad config: %d %s", code, errOut)
	}
}

func TestScheduleEmbeddedDemo(t *testing.T) {
	code, out, errOut := eppkit(t, "schedule", "--explain", "--seed", "3")
	if code != exitOK || !strings.Contains(out, "x-gateway-destination-endpoint: 10.0.0.") || !strings.Contains(out, "queue-scorer") {
		t.Fatalf("demo: %d\n%s\n%s", code, out, errOut)
	}
}

func TestEndpointsWithoutMetricsAreNotScraped(t *testing.T) {
	data, err := os.ReadFile(td("endpoints.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	eps, err := loadEndpoints("endpoints.yaml", data, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !eps[0].Metrics.Usable() || eps[2].Metrics.Usable() {
		t.Errorf("metrics present → usable; absent → never scraped: %+v", eps)
	}
	if eps[2].HostPort() != "[fd00::3]:8000" {
		t.Errorf("IPv6: %s", eps[2].HostPort())
	}
}

func TestScheduleHistoryShowsPrefixAffinity(t *testing.T) {
	code, out, errOut := schedule(t, "--endpoints", td("equal-endpoints.yaml"), "--request", td("request-shared-prefix.json"),
		"--history", td("history.json"), "--explain", "--seed", "1")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	mustContain(t, "explain", out,
		"history: replayed 3 earlier requests",
		"10.0.0.1:8000                                1.0000                        0.7500                0.0000 | 3.5000",
		"10.0.0.2:8000                                1.0000                        0.7500                0.8333 | 6.0000",
		"picked 10.0.0.2:8000: highest total 6",
	)
	for seed := range 5 { // affinity, not luck
		_, out, _ := schedule(t, "--endpoints", td("equal-endpoints.yaml"), "--request", td("request-shared-prefix.json"),
			"--history", td("history.json"), "--seed", strconv.Itoa(seed))
		mustContain(t, "pick", out, "x-gateway-destination-endpoint: 10.0.0.2:8000")
	}
	// A history entry naming an unknown endpoint is a clear error.
	bad := filepath.Join(t.TempDir(), "h.json")
	os.WriteFile(bad, []byte(`[{"endpoint": "10.9.9.9:1", "body": {"model": "m", "messages": [{"role": "user", "content": "x"}]}}]`), 0o644)
	code, _, errOut = schedule(t, "--endpoints", td("equal-endpoints.yaml"), "--history", bad)
	if code == exitOK || !strings.Contains(errOut, `[0].endpoint: "10.9.9.9:1" is not in the endpoints file`) {
		t.Fatalf("bad history: %d %s", code, errOut)
	}
}
