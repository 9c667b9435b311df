package parsers_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/eppkit/eppkit/parsers"
)

func TestReplaceModel(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"id":"x","model":"llama-v2","choices":[]}`, `{"id":"x","model":"llama","choices":[]}`},
		{`{"model" : "llama-v2"}`, `{"model" : "llama"}`},
		{`data: {"type":"message_start","message":{"model":"llama-v2","usage":{}}}` + "\n", `data: {"type":"message_start","message":{"model":"llama","usage":{}}}` + "\n"},
		{`{"model":"llama-v2","x":{"model":"llama-v2"}}`, `{"model":"llama","x":{"model":"llama"}}`},
		{`{"model":"other"}`, `{"model":"other"}`},
		{`{"model":"llama-v2x"}`, `{"model":"llama-v2x"}`},
		{`{"content":"the \"model\":\"llama-v2\" text"}`, `{"content":"the \"model\":\"llama-v2\" text"}`},
		{`{"type":"model","name":"llama-v2"}`, `{"type":"model","name":"llama-v2"}`},
		{`{"model":"llama\u002dv2"}`, `{"model":"llama"}`},
		{`{"model":"llama-v2`, `{"model":"llama-v2`},
		{`not json at all "model"`, `not json at all "model"`},
	}
	for _, c := range cases {
		if got := string(parsers.ReplaceModel([]byte(c.in), "llama-v2", "llama")); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.in, got, c.want)
		}
	}
	in := []byte(`{"model":"a"}`)
	if out := parsers.ReplaceModel(in, "b", "c"); &out[0] != &in[0] {
		t.Error("no replacement must return the input itself")
	}
	if got := string(parsers.ReplaceModel([]byte(`{"model":"a"}`), "a", `q"uote`)); got != `{"model":"q\"uote"}` {
		t.Errorf("target is quoted: %s", got)
	}
}

func TestSetModel(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"model":"a","messages":[]}`, `{"model":"canary","messages":[]}`},
		{`{ "x": {"model":"inner"}, "model" : "a" }`, `{ "x": {"model":"inner"}, "model" : "canary" }`},
		{`{"prompt":"x"}`, `{"model":"canary","prompt":"x"}`},
		{`{}`, `{"model":"canary"}`},
		{` { } `, ` {"model":"canary" } `},
		{`{"model":null,"p":1}`, `{"model":"canary","p":1}`},
	}
	for _, c := range cases {
		raw := []byte(c.in)
		b := &parsers.Body{Raw: raw, Model: "a"}
		if err := b.SetModel("canary"); err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if string(b.Raw) != c.want || b.Model != "canary" {
			t.Errorf("%s: got %s (%q), want %s", c.in, b.Raw, b.Model, c.want)
		}
		if string(raw) != c.in {
			t.Errorf("%s: the original bytes changed", c.in)
		}
		if !json.Valid(b.Raw) {
			t.Errorf("%s: result is not JSON", c.in)
		}
	}
	for _, bad := range []string{`[]`, `{"model":`, ``} {
		b := &parsers.Body{Raw: []byte(bad)}
		if err := b.SetModel("x"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestReadUsageShapes(t *testing.T) {
	cases := []struct {
		doc  string
		want parsers.Usage
	}{
		{`{"prompt_tokens":7,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4}}`, parsers.Usage{7, 2, 4}},
		{`{"input_tokens":7,"output_tokens":2,"input_tokens_details":{"cached_tokens":4}}`, parsers.Usage{7, 2, 4}},
		{`{"input_tokens":7,"cache_read_input_tokens":10,"cache_creation_input_tokens":3,"output_tokens":2}`, parsers.Usage{20, 2, 10}},
		{`{"prompt_tokens":7,"completion_tokens":2,"cached_tokens":5}`, parsers.Usage{7, 2, 5}},
		{`{"prompt_tokens":null,"prompt_tokens_details":null}`, parsers.Usage{}},
		{`null`, parsers.Usage{}},
	}
	for _, c := range cases {
		var d parsers.Decoder
		d.Reset([]byte(c.doc))
		var u parsers.Usage
		parsers.ReadUsage(&d, &u)
		if err := d.End(); err != nil || u != c.want {
			t.Errorf("%s: %+v %v, want %+v", c.doc, u, err, c.want)
		}
	}
}

func TestSSEData(t *testing.T) {
	for _, c := range []struct {
		line, data string
		ok         bool
	}{
		{"data: {\"a\":1}\n", `{"a":1}`, true},
		{"data:{\"a\":1}\r\n", `{"a":1}`, true},
		{"data: [DONE]\n", "[DONE]", true},
		{"event: message_start\n", "", false},
		{": keep-alive\n", "", false},
	} {
		data, ok := parsers.SSEData([]byte(c.line))
		if ok != c.ok || string(data) != c.data {
			t.Errorf("%q: %q %v", c.line, data, ok)
		}
	}
}

func TestTokenEstimate(t *testing.T) {
	b := &parsers.Body{Messages: []parsers.Message{{Role: "user", Content: "hello"}}} // 9 bytes
	if b.TokenEstimate() != 3 {
		t.Errorf("estimate %d", b.TokenEstimate())
	}
	b.TokenIDs = []uint32{1, 2}
	if b.TokenEstimate() != 2 {
		t.Errorf("token ids estimate %d", b.TokenEstimate())
	}
}

func TestConcat(t *testing.T) {
	var c parsers.Concat
	c.Add("")
	c.Add("a")
	if c.String() != "a" {
		t.Fatal(c.String())
	}
	c.Add("b")
	c.Add("c")
	if c.String() != "abc" {
		t.Fatal(c.String())
	}
}

// FuzzReplaceModel: never panics; rewriting a JSON document keeps it JSON,
// and rewriting back restores it when the new name does not occur already.
func FuzzReplaceModel(f *testing.F) {
	f.Add(`{"model":"t","x":{"model":"t"}}`, "t", "incoming")
	f.Add(`data: {"model":"t"}`+"\n", "t", "i")
	f.Add(`{"model":"\u0074"}`, "t", "x")
	f.Fuzz(func(t *testing.T, doc, from, to string) {
		out := parsers.ReplaceModel([]byte(doc), from, to)
		valid := json.Valid([]byte(doc))
		if valid && !json.Valid(out) {
			t.Fatalf("%s → %s is not JSON", doc, out)
		}
		if valid && simpleName(from) && simpleName(to) && !strings.Contains(doc, to) && !strings.Contains(doc, `\`) {
			if back := parsers.ReplaceModel(out, to, from); string(back) != doc {
				t.Fatalf("%s → %s → %s", doc, out, back)
			}
		}
	})
}

func simpleName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func FuzzSetModel(f *testing.F) {
	f.Add(`{"model":"a","m":[1]}`, "b")
	f.Add(`{}`, "x")
	f.Add(`{"x":{"model":"a"}}`, "q\"")
	f.Fuzz(func(t *testing.T, doc, name string) {
		b := &parsers.Body{Raw: []byte(doc)}
		if err := b.SetModel(name); err != nil {
			return
		}
		var v map[string]any
		if err := json.Unmarshal(b.Raw, &v); err != nil {
			t.Fatalf("%s → %s: %v", doc, b.Raw, err)
		}
		if s, _ := v["model"].(string); s != name && utf8.ValidString(name) {
			t.Fatalf("%s → %s: model %q, want %q", doc, b.Raw, s, name)
		}
	})
}
