package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dump returns the path of a recorded /metrics dump of the data layer's tests.
func dump(name string) string {
	return filepath.Join("..", "..", "datalayer", "metrics", "testdata", name)
}

func TestMetricsParse(t *testing.T) {
	code, out, errOut := eppkit(t, "metrics", "parse", dump("vllm.prom"))
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// The exact shape of SPEC §10.
	want := `{
  "waiting": 7,
  "running": 23,
  "kvUsage": 0.6218371204536327,
  "blockSize": 16,
  "gpuBlocks": 71372,
  "lora": {
    "active": [
      "sql-lora",
      "tweet-summary"
    ],
    "waiting": [
      "chat-lora"
    ],
    "max": 4
  }
}
`
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}

	for _, tt := range []struct{ engine, file, contains string }{
		{"sglang", "sglang.prom", `"gpuBlocks": 412930`},
		{"trtllm-serve", "trtllm-serve.prom", `"kvUsage": 0.4375`},
		{"triton-tensorrt-llm", "triton-tensorrt-llm.prom", `"running": 6`},
	} {
		code, out, errOut := eppkit(t, "metrics", "parse", "--engine", tt.engine, dump(tt.file))
		if code != exitOK || !strings.Contains(out, tt.contains) {
			t.Errorf("%s: exit %d %s %s", tt.engine, code, out, errOut)
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		lora := doc["lora"].(map[string]any)
		if lora["active"] == nil || lora["waiting"] == nil { // [] never null
			t.Errorf("%s: lora %v", tt.engine, lora)
		}
	}
}

func TestMetricsParseStdin(t *testing.T) {
	text, err := os.ReadFile(dump("vllm-v0.prom"))
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	c := &cli{stdin: bytes.NewReader(text), stdout: &out, stderr: &errOut}
	if code := c.run([]string{"metrics", "parse", "-"}); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), `"kvUsage": 0.125`) || !strings.Contains(out.String(), `"active": []`) {
		t.Errorf("out %s", out.String())
	}
}

func TestMetricsParseErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"metrics"}, exitUsage, "usage: eppkit metrics parse"},
		{[]string{"metrics", "parse"}, exitUsage, "want one FILE"},
		{[]string{"metrics", "parse", "--engine", "tgi", dump("vllm.prom")}, exitUsage, `unknown engine "tgi"`},
		{[]string{"metrics", "parse", filepath.Join(dir, "missing.prom")}, exitFail, "no such file"},
		{[]string{"metrics", "parse", write("nan.prom", "vllm:num_requests_waiting NaN\nvllm:num_requests_running 1\nvllm:kv_cache_usage_perc 0\n")}, exitFail, "not a finite number"},
		{[]string{"metrics", "parse", write("bad.prom", "vllm:num_requests_waiting{ 1\n")}, exitFail, "malformed exposition"},
		{[]string{"metrics", "parse", "--engine", "sglang", dump("vllm.prom")}, exitFail, "sglang:num_queue_reqs: missing"},
	}
	for _, tt := range tests {
		code, _, errOut := eppkit(t, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q, want %d and %q", tt.args, code, errOut, tt.code, tt.want)
		}
	}
	if code, out, _ := eppkit(t, "metrics", "parse", "-h"); code != exitOK {
		t.Errorf("-h: %d %s", code, out)
	}
	if code, out, _ := eppkit(t, "help"); code != exitOK || !strings.Contains(out, "metrics parse FILE|-") {
		t.Errorf("help does not list metrics parse: %s", out)
	}
}
