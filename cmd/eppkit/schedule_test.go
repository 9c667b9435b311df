package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// scheduleJSON runs eppkit schedule --output json and decodes the result.
func scheduleJSON(t *testing.T, args ...string) (int, scheduleResult) {
	t.Helper()
	code, out, errOut := eppkit(t, append([]string{"schedule", "--output", "json"}, args...)...)
	var res scheduleResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("exit %d, %v:\n%s\n%s", code, err, out, errOut)
	}
	return code, res
}

type scheduleResult struct {
	Endpoints     []string
	IncomingModel string
	TargetModel   string
	Body          struct {
		Model     string
		MaxTokens int `json:"max_tokens"`
	}
	Error struct {
		Status int
		Reason string
	}
}

func TestScheduleRewrites(t *testing.T) {
	seen := map[string]int{}
	for seed := range 40 {
		code, res := scheduleJSON(t, "--endpoints", td("equal-endpoints.yaml"), "--request", td("request-llama3.json"),
			"--rewrites", td("rewrites.yaml"), "--seed", itoa(seed))
		if code != exitOK {
			t.Fatalf("exit %d: %+v", code, res)
		}
		if res.IncomingModel != "llama3" || res.Body.Model != res.TargetModel || res.Body.MaxTokens != 32 {
			t.Fatalf("models %q → %q, body %+v", res.IncomingModel, res.TargetModel, res.Body)
		}
		seen[res.TargetModel]++
	}
	if seen["llama3-stable"] < 25 || seen["llama3-canary"] == 0 || len(seen) != 2 {
		t.Errorf("targets over 40 seeds: %v (want ≈90/10)", seen)
	}
	// The header sets a target when no rule matches.
	_, res := scheduleJSON(t, "--endpoints", td("equal-endpoints.yaml"), "--request", td("request.json"),
		"--header", "x-llm-d-model-name-rewrite: served-name")
	if res.TargetModel != "served-name" || res.Body.Model != "served-name" || res.IncomingModel != "meta-llama/Llama-3.1-8B-Instruct" {
		t.Errorf("header rewrite: %+v", res)
	}
	// Text output shows the rewrite.
	code, out, _ := eppkit(t, "schedule", "--endpoints", td("equal-endpoints.yaml"), "--request", td("request-llama3.json"),
		"--rewrites", td("rewrites.yaml"), "--seed", "1")
	if code != exitOK || !strings.Contains(out, "model: llama3 → llama3-") {
		t.Errorf("text: %d\n%s", code, out)
	}
}

// TestScheduleSheddableAtSaturation: with the default utilization detector
// a sheddable request is shed at a saturated pool; others still go through.
func TestScheduleSheddableAtSaturation(t *testing.T) {
	args := []string{"--endpoints", td("saturated-endpoints.yaml"), "--request", td("request.json"), "--objectives", td("objectives.yaml")}
	code, res := scheduleJSON(t, append(args, "--header", "x-llm-d-inference-objective: sheddable-batch")...)
	if code != exitFail || res.Error.Status != 429 || res.Error.Reason != "rejected-saturated" {
		t.Errorf("sheddable: exit %d %+v", code, res.Error)
	}
	code, out, _ := eppkit(t, append([]string{"schedule"}, append(args, "--header", "x-llm-d-inference-objective: sheddable-batch")...)...)
	if code != exitFail || !strings.Contains(out, "rejected: 429 rejected-saturated (system saturated, sheddable request dropped)") {
		t.Errorf("text: %d %s", code, out)
	}
	for _, obj := range []string{"critical", "unknown", ""} {
		a := args
		if obj != "" {
			a = append(a, "--header", "x-llm-d-inference-objective: "+obj)
		}
		if code, res := scheduleJSON(t, a...); code != exitOK || len(res.Endpoints) == 0 {
			t.Errorf("objective %q: exit %d %+v", obj, code, res)
		}
	}
	code, out, _ = eppkit(t, append([]string{"schedule"}, append(args, "--header", "x-llm-d-inference-objective: critical")...)...)
	if code != exitOK || !strings.Contains(out, "objective: critical (priority 10)") {
		t.Errorf("text: %d %s", code, out)
	}
	// Not saturated: the sheddable request passes.
	if code, _ := scheduleJSON(t, "--endpoints", td("equal-endpoints.yaml"), "--request", td("request.json"),
		"--objectives", td("objectives.yaml"), "--header", "x-llm-d-inference-objective: sheddable-batch"); code != exitOK {
		t.Errorf("sheddable below saturation: exit %d", code)
	}
}

func TestScheduleOtherAPIs(t *testing.T) {
	dir := t.TempDir()
	body := writeFile(t, dir, "m.json", `{"model":"claude","max_tokens":8,"system":"be brief","messages":[{"role":"user","content":"hi"}]}`)
	if code, res := scheduleJSON(t, "--endpoints", td("equal-endpoints.yaml"), "--request", body, "--path", "/v1/messages"); code != exitOK || res.IncomingModel != "claude" {
		t.Errorf("anthropic: %d %+v", code, res)
	}
	gen := writeFile(t, dir, "g.json", `{"model":"m","token_ids":[1,2,3]}`)
	if code, res := scheduleJSON(t, "--endpoints", td("equal-endpoints.yaml"), "--request", gen, "--path", "/inference/v1/generate"); code != exitOK || res.IncomingModel != "m" {
		t.Errorf("vllm generate: %d %+v", code, res)
	}
}

func TestScheduleBadResourceFiles(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "o.yaml", "apiVersion: llm-d.ai/v1alpha2\nkind: InferenceObjective\nmetadata: {name: x}\nspec:\n  priority: high\n")
	code, _, errOut := eppkit(t, "schedule", "--objectives", bad)
	if code != exitFail || !strings.Contains(errOut, "o.yaml:5: spec.priority: want an integer") {
		t.Errorf("bad objectives: %d %s", code, errOut)
	}
	bad = writeFile(t, dir, "r.yaml", "apiVersion: llm-d.ai/v1alpha2\nkind: InferenceModelRewrite\nmetadata: {name: x}\nspec:\n  rules:\n  - targets: [{modelRewrite: y, weight: -3}]\n")
	code, _, errOut = eppkit(t, "schedule", "--rewrites", bad)
	if code != exitFail || !strings.Contains(errOut, "r.yaml:6: spec.rules[0].targets[0].weight: must be ≥ 0") {
		t.Errorf("bad rewrites: %d %s", code, errOut)
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func itoa(n int) string { return strconv.Itoa(n) }
