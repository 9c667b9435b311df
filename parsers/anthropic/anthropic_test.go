package anthropic_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/parsers/anthropic"
	"github.com/eppkit/eppkit/parsers/parserstest"
)

func TestMessages(t *testing.T) {
	b, err := (&anthropic.Parser{}).ParseRequest("messages", []byte(`{
		"model": "claude", "max_tokens": 1024, "stream": true,
		"system": [{"type":"text","text":"you are "},{"type":"text","text":"terse","cache_control":{"type":"ephemeral"}}],
		"tools": [{"name":"get_weather","input_schema":{"type":"object"}}],
		"thinking": {"type":"enabled","budget_tokens":2000},
		"messages": [
			{"role":"user","content":"hi"},
			{"role":"assistant","content":[
				{"type":"thinking","thinking":"hmm","signature":"sig"},
				{"type":"redacted_thinking","data":"opaque"},
				{"type":"text","text":"calling"},
				{"type":"tool_use","id":"t1","name":"get_weather","input":{"city":"Paris"}}]},
			{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"sunny"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAA"}}]},
				{"type":"image","source":{"type":"url","url":"https://x/y.png"}},
				{"type":"document","source":{"type":"file","file_id":"f1"}}]}
		]}`))
	if err != nil {
		t.Fatal(err)
	}
	if b.Model != "claude" || b.MaxTokens != 1024 || !b.Stream || b.System != "you are terse" || !strings.Contains(string(b.Tools), "get_weather") {
		t.Errorf("body %+v", b)
	}
	want := []parsers.Message{
		{Role: "user", Content: "hi"},
		{Role: "assistant", Content: `hmmopaquecallingget_weather{"city":"Paris"}`},
		{Role: "user", Content: "sunny", Media: []parsers.Media{
			{Type: "image", Ref: "AAA"}, {Type: "image", Ref: "https://x/y.png"}, {Type: "document", Ref: "f1"}}},
	}
	if !reflect.DeepEqual(b.Messages, want) {
		t.Errorf("messages:\n got %+v\nwant %+v", b.Messages, want)
	}
}

func TestCountTokens(t *testing.T) {
	b, err := (&anthropic.Parser{}).ParseRequest("messages/count_tokens", []byte(`{"model":"claude","system":"s","messages":[{"role":"user","content":"x"}]}`))
	if err != nil || b.API != "messages/count_tokens" || b.System != "s" {
		t.Fatalf("%+v %v", b, err)
	}
}

func TestBadRequests(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"messages":[{"role":"user","content":"x"}]}`, "missing model"},
		{`{"model":"c"}`, "missing messages"},
		{`{"model":"c","messages":[]}`, "missing messages"},
		{`{"model":"c","messages":[{"role":"user","content":7}]}`, "messages[0].content: want a string or an array of content blocks"},
		{`{"model":"c","system":{},"messages":[{"role":"user","content":"x"}]}`, "system: want a string"},
		{`{"model":"c","max_tokens":"9","messages":[{"role":"user","content":"x"}]}`, "max_tokens: want a number"},
	} {
		_, err := (&anthropic.Parser{}).ParseRequest("messages", []byte(c.body))
		if !errors.Is(err, parsers.ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.body, err, c.want)
		}
	}
}

func TestMalformedCorpus(t *testing.T) {
	p := &anthropic.Parser{}
	for _, api := range p.Paths() {
		parserstest.TestMalformed(t, p, api, `{"model":"claude","messages":[{"role":"user","content":"x"}]}`)
	}
}

// TestSplitUsage: message_start carries input and cache tokens, message_delta
// the output tokens; the stream's usage adds up.
func TestSplitUsage(t *testing.T) {
	p := &anthropic.Parser{}
	var u parsers.Usage
	for _, ev := range []string{
		`{"type":"message_start","message":{"id":"m","model":"claude","usage":{"input_tokens":25,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"output_tokens":1}}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}`,
		`{"type":"message_stop"}`,
	} {
		p.ParseResponse("messages", []byte(ev), &u)
	}
	if want := (parsers.Usage{PromptTokens: 130, CompletionTokens: 15, CachedTokens: 100}); u != want {
		t.Errorf("usage %+v, want %+v", u, want)
	}
	u = parsers.Usage{}
	p.ParseResponse("messages", []byte(`{"id":"m","type":"message","content":[],"usage":{"input_tokens":10,"output_tokens":3}}`), &u)
	if u != (parsers.Usage{PromptTokens: 10, CompletionTokens: 3}) {
		t.Errorf("non-streaming usage %+v", u)
	}
	u = parsers.Usage{}
	p.ParseResponse("messages/count_tokens", []byte(`{"input_tokens":42}`), &u)
	if u.PromptTokens != 42 {
		t.Errorf("count_tokens usage %+v", u)
	}
}

func FuzzParseRequest(f *testing.F) {
	for _, s := range parserstest.Seeds() {
		f.Add(s)
	}
	f.Add(`{"model":"c","system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"x"}]}]}]}`)
	// Members without a value (the fuzzer found the like in the OpenAI parser).
	f.Add(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":}]}`)
	f.Add(`{"model":"m","max_tokens":1,"system":,"messages":[]}`)
	f.Fuzz(func(t *testing.T, body string) {
		b, err := (&anthropic.Parser{}).ParseRequest("messages", []byte(body))
		if err != nil {
			if !errors.Is(err, parsers.ErrBadRequest) {
				t.Fatalf("error %v does not wrap ErrBadRequest", err)
			}
			return
		}
		if b.Model == "" || len(b.Messages) == 0 {
			t.Fatalf("accepted %q", body)
		}
	})
}

func FuzzParseResponse(f *testing.F) {
	f.Add(`{"type":"message_start","message":{"usage":{"input_tokens":25,"cache_read_input_tokens":100}}}`)
	f.Add(`{"type":"message_delta","usage":{"output_tokens":15}}`)
	f.Add(`{"input_tokens":42}`)
	f.Fuzz(func(t *testing.T, doc string) {
		var u parsers.Usage
		(&anthropic.Parser{}).ParseResponse("messages/count_tokens", []byte(doc), &u)
		if u.PromptTokens < 0 || u.CompletionTokens < 0 || u.CachedTokens < 0 {
			t.Fatalf("negative usage %+v", u)
		}
	})
}
