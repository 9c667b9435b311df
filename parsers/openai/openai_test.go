package openai_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/parsers/openai"
	"github.com/eppkit/eppkit/parsers/parserstest"
)

func parse(t *testing.T, api, body string) (*parsers.Body, error) {
	t.Helper()
	return (&openai.Parser{}).ParseRequest(api, []byte(body))
}

func mustParse(t *testing.T, api, body string) *parsers.Body {
	t.Helper()
	b, err := parse(t, api, body)
	if err != nil {
		t.Fatalf("%s %s: %v", api, body, err)
	}
	return b
}

func TestChat(t *testing.T) {
	b := mustParse(t, "chat/completions", `{
		"model": "llama", "stream": true, "stream_options": {"include_usage": true},
		"max_tokens": 7, "cache_salt": "s1",
		"tools": [{"type":"function","function":{"name":"f"}}],
		"messages": [
			{"role": "system", "content": "be brief"},
			{"role": "user", "content": [{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]},
			{"role": "assistant", "content": null, "tool_calls": []}
		]}`)
	want := []parsers.Message{
		{Role: "system", Content: "be brief"},
		{Role: "user", Content: "ab", Media: []parsers.Media{{Type: "image_url", Ref: "x"}}},
		{Role: "assistant"},
	}
	if !reflect.DeepEqual(b.Messages, want) {
		t.Fatalf("messages = %+v", b.Messages)
	}
	if b.Model != "llama" || !b.Stream || !b.IncludeUsage || b.MaxTokens != 7 || b.CacheSalt != "s1" {
		t.Fatalf("body = %+v", b)
	}
	if string(b.Tools) != `[{"type":"function","function":{"name":"f"}}]` {
		t.Fatalf("tools = %s", b.Tools)
	}
}

func TestChatMultimodalAndTools(t *testing.T) {
	b := mustParse(t, "chat/completions", `{"model":"m","messages":[
		{"role":"user","content":[
			{"image_url":{"url":"data:image/png;base64,AAAA","detail":"high"},"type":"image_url"},
			{"type":"input_audio","input_audio":{"data":"UklGR","format":"wav"}},
			{"type":"video_url","video_url":{"url":"https://v/1.mp4"}},
			{"type":"file","file":{"file_id":"file-9","filename":"a.pdf"}},
			{"type":"text","text":"what is this?"}]},
		{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{\"q\":1}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"42"},
		{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]}
	],"max_completion_tokens":5,"max_tokens":9}`)
	if b.MaxTokens != 5 {
		t.Errorf("max tokens %d: max_completion_tokens wins", b.MaxTokens)
	}
	u := b.Messages[0]
	wantMedia := []parsers.Media{
		{Type: "image_url", Ref: "data:image/png;base64,AAAA"},
		{Type: "input_audio", Ref: "UklGR"},
		{Type: "video_url", Ref: "https://v/1.mp4"},
		{Type: "file", Ref: "file-9"},
	}
	if u.Content != "what is this?" || !reflect.DeepEqual(u.Media, wantMedia) {
		t.Errorf("user = %+v", u)
	}
	if got := b.Messages[1].Content; got != `lookup{"q":1}` {
		t.Errorf("tool call content %q", got)
	}
	if got := b.Messages[2]; got.Role != "tool" || got.Content != "42" {
		t.Errorf("tool result %+v", got)
	}
	if got := b.Messages[3].Content; got != "no" {
		t.Errorf("refusal %q", got)
	}
}

func TestCompletionsPromptForms(t *testing.T) {
	cases := []struct {
		body   string
		prompt string
		tokens []uint32
	}{
		{`{"model":"m","prompt":"hello"}`, "hello", nil},
		{`{"model":"m","prompt":["he","llo"]}`, "hello", nil},
		{`{"model":"m","prompt":[1,2,3]}`, "", []uint32{1, 2, 3}},
		{`{"model":"m","prompt":[[4,5],[6]]}`, "", []uint32{4, 5}},
		{`{"model":"m","prompt":"x","max_completion_tokens":3,"max_tokens":9}`, "x", nil},
		{`{"model":"m","prompt":"esc\"aped\u00e9\ud83d\ude00"}`, "esc\"apedé😀", nil},
	}
	for _, c := range cases {
		for _, api := range []string{"completions", "completions/render"} {
			b, err := parse(t, api, c.body)
			if err != nil {
				t.Errorf("%s: %v", c.body, err)
				continue
			}
			if b.Prompt != c.prompt || !reflect.DeepEqual(b.TokenIDs, c.tokens) {
				t.Errorf("%s: prompt %q tokens %v", c.body, b.Prompt, b.TokenIDs)
			}
		}
	}
}

func TestEmbeddings(t *testing.T) {
	b := mustParse(t, "embeddings", `{"model":"e5","input":["a","b"],"encoding_format":"float"}`)
	if b.Prompt != "ab" || b.Model != "e5" {
		t.Errorf("body %+v", b)
	}
	b = mustParse(t, "embeddings", `{"model":"e5","input":[[1,2],[3]]}`)
	if !reflect.DeepEqual(b.TokenIDs, []uint32{1, 2}) {
		t.Errorf("tokens %v", b.TokenIDs)
	}
	b = mustParse(t, "embeddings", `{"model":"e5","messages":[{"role":"user","content":"x"}]}`)
	if len(b.Messages) != 1 {
		t.Errorf("chat-style embeddings %+v", b)
	}
}

func TestResponses(t *testing.T) {
	b := mustParse(t, "responses", `{"model":"gpt","instructions":"sys","input":"hi","max_output_tokens":11,"stream":true,
		"tools":[{"type":"function","name":"f"}]}`)
	if b.System != "sys" || b.MaxTokens != 11 || !b.Stream || len(b.Messages) != 1 ||
		!reflect.DeepEqual(b.Messages[0], parsers.Message{Role: "user", Content: "hi"}) || len(b.Tools) == 0 {
		t.Errorf("string input: %+v", b)
	}
	b = mustParse(t, "responses", `{"model":"gpt","input":[
		{"role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"https://i/1.png"}]},
		{"type":"reasoning","summary":[{"type":"summary_text","text":"thinking"}]},
		{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},
		{"type":"function_call_output","call_id":"c","output":"done"},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}
	]}`)
	want := []parsers.Message{
		{Role: "user", Content: "look", Media: []parsers.Media{{Type: "input_image", Ref: "https://i/1.png"}}},
		{Role: "assistant", Content: "thinking"},
		{Role: "assistant", Content: "f{}"},
		{Role: "tool", Content: "done"},
		{Role: "assistant", Content: "ok"},
	}
	if !reflect.DeepEqual(b.Messages, want) {
		t.Errorf("items:\n got %+v\nwant %+v", b.Messages, want)
	}
}

func TestConversations(t *testing.T) {
	b := mustParse(t, "conversations", `{"items":[{"type":"message","role":"user","content":"hello"}],"metadata":{"k":"v"}}`)
	if b.Model != "" || len(b.Messages) != 1 || b.Messages[0].Content != "hello" {
		t.Errorf("conversation %+v", b)
	}
	if _, err := parse(t, "conversations", `{}`); err != nil {
		t.Errorf("an empty conversation is valid: %v", err)
	}
}

func TestRender(t *testing.T) {
	b := mustParse(t, "chat/completions/render", `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	if b.API != "chat/completions/render" || len(b.Messages) != 1 {
		t.Errorf("render %+v", b)
	}
}

func TestNullsAreAbsent(t *testing.T) {
	b := mustParse(t, "chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],
		"tools":null,"functions":null,"stream":null,"stream_options":null,"max_tokens":null,"cache_salt":null}`)
	if b.Tools != nil || b.Stream || b.MaxTokens != 0 {
		t.Errorf("nulls: %+v", b)
	}
}

func TestBadRequests(t *testing.T) {
	cases := []struct{ api, body, want string }{
		{"completions", `{"model":`, "invalid JSON"},
		{"completions", `{"prompt":"x"}`, "missing model"},
		{"completions", `{"model":"m"}`, "missing prompt"},
		{"completions", `{"model":"m","prompt":{}}`, "prompt: want a string or an array"},
		{"completions", `{"model":"m","prompt":[]}`, "prompt: empty array"},
		{"completions", `{"model":"m","prompt":["a",1]}`, "mixed array"},
		{"completions", `{"model":"m","prompt":[-1]}`, "prompt[0]: want an integer in 0..4294967295"},
		{"completions", `{"model":"m","prompt":[1.5]}`, "prompt[0]: want an integer"},
		{"completions", `{"model":"m","prompt":[[1],["x"]]}`, "prompt[1][0]: want a number, got a string"},
		{"completions", `{"model":"m","prompt":[[1],[2,"x"]]}`, "prompt[1][1]: want a number"},
		{"completions", `{"model":5,"prompt":"x"}`, "model: want a string, got a number"},
		{"completions", `{"model":"m","prompt":"x","max_tokens":-1}`, "max_tokens: want a count"},
		{"completions", `{"model":"m","prompt":"x","stream":"yes"}`, "stream: want a boolean"},
		{"chat/completions", `{"model":"m"}`, "missing messages"},
		{"chat/completions", `{"model":"m","messages":[]}`, "missing messages"},
		{"chat/completions", `{"model":"m","messages":[{"role":"user","content":5}]}`, "messages[0].content: want a string or an array of content parts"},
		{"chat/completions", `{"model":"m","messages":{}}`, "messages: want an array, got an object"},
		{"chat/completions", `[]`, "want an object, got an array"},
		{"chat/completions", ``, "unexpected end of input"},
		{"chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]} x`, "after the value"},
		{"embeddings", `{"model":"m"}`, "missing input"},
		{"responses", `{"model":"m"}`, "missing input"},
	}
	for _, c := range cases {
		_, err := parse(t, c.api, c.body)
		if !errors.Is(err, parsers.ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: err = %v, want ErrBadRequest mentioning %q", c.api, c.body, err, c.want)
		}
	}
}

// TestMalformedCorpus runs the shared corpus of bad bodies through every API
// the parser claims.
func TestMalformedCorpus(t *testing.T) {
	p := &openai.Parser{}
	for _, api := range p.Paths() {
		parserstest.TestMalformed(t, p, api, `{"model":"m","messages":[{"role":"user","content":"x"}],"prompt":"x","input":"x"}`)
	}
}

func TestParseResponse(t *testing.T) {
	cases := []struct {
		doc  string
		want parsers.Usage
	}{
		{`{"id":"x","model":"m","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":10,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":4}}}`,
			parsers.Usage{PromptTokens: 7, CompletionTokens: 10, CachedTokens: 4}},
		{`{"type":"response.completed","response":{"id":"r","usage":{"input_tokens":31,"output_tokens":9,"input_tokens_details":{"cached_tokens":16}}}}`,
			parsers.Usage{PromptTokens: 31, CompletionTokens: 9, CachedTokens: 16}},
		{`{"object":"list","data":[],"usage":{"prompt_tokens":3,"total_tokens":3}}`, parsers.Usage{PromptTokens: 3}},
		{`{"choices":[{"delta":{"content":"hi"}}],"usage":null}`, parsers.Usage{}},
		{`{"choices":[{"delta":{"content":"the \"usage\" of words"}}]}`, parsers.Usage{}},
		{`not json "usage"`, parsers.Usage{}},
	}
	for _, c := range cases {
		var u parsers.Usage
		(&openai.Parser{}).ParseResponse("chat/completions", []byte(c.doc), &u)
		if u != c.want {
			t.Errorf("%s: usage %+v, want %+v", c.doc, u, c.want)
		}
	}
}

func TestParseMatchesEncodingJSON(t *testing.T) {
	// Strings with every kind of escape decode as encoding/json decodes them.
	for _, s := range []string{"plain", "tab\there", "quote\"back\\slash/", "\u2028\u00e9", "emoji 😀", "\x7f"} {
		j, _ := json.Marshal(s)
		b := mustParse(t, "completions", `{"model":"m","prompt":`+string(j)+`}`)
		if b.Prompt != s {
			t.Errorf("prompt %q, want %q", b.Prompt, s)
		}
	}
	// Lone surrogates become U+FFFD.
	b := mustParse(t, "completions", `{"model":"m","prompt":"a\ud800b"}`)
	var want string
	_ = json.Unmarshal([]byte(`"a\ud800b"`), &want)
	if b.Prompt != want {
		t.Errorf("lone surrogate: %q, want %q", b.Prompt, want)
	}
}

func FuzzParseRequest(f *testing.F) {
	for _, s := range parserstest.Seeds() {
		f.Add("chat/completions", s)
	}
	f.Add("chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`)
	f.Add("completions", `{"model":"m","prompt":[[1,2],[3]]}`)
	f.Add("completions", `{"model":"m","prompt":["a","b"],"stream_options":{"include_usage":true}}`)
	f.Add("responses", `{"model":"m","input":[{"type":"function_call","name":"f","arguments":"{}"}]}`)
	f.Add("embeddings", `{"model":"m","input":[[1]]}`)
	f.Add("chat/completions", `{"model":"0","messages":[{"content":}]}`) // once accepted: a member without a value
	f.Fuzz(func(t *testing.T, api, body string) {
		p := &openai.Parser{}
		if !slicesContains(p.Paths(), api) {
			api = "chat/completions"
		}
		b, err := p.ParseRequest(api, []byte(body))
		if err != nil {
			if !errors.Is(err, parsers.ErrBadRequest) {
				t.Fatalf("error %v does not wrap ErrBadRequest", err)
			}
			return
		}
		if b.Model == "" && api != "conversations" {
			t.Fatal("accepted a body without model")
		}
		// Whatever we accept, encoding/json accepts.
		if !json.Valid([]byte(body)) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
	})
}

func FuzzParseResponse(f *testing.F) {
	f.Add(`{"usage":{"prompt_tokens":7,"completion_tokens":10,"prompt_tokens_details":{"cached_tokens":4}}}`)
	f.Add(`{"type":"response.completed","response":{"usage":{"input_tokens":31}}}`)
	f.Add(`{"usage":{"prompt_tokens":-1}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		var u parsers.Usage
		(&openai.Parser{}).ParseResponse("chat/completions", []byte(doc), &u)
		if u.PromptTokens < 0 || u.CompletionTokens < 0 || u.CachedTokens < 0 {
			t.Fatalf("negative usage %+v", u)
		}
	})
}

func slicesContains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// chatBody returns a chat body like the pinned W1 workload: a 6,000-character
// system prompt and a 1,000-character user message of lowercase words.
func chatBody(seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	words := func(n int) string {
		var sb strings.Builder
		for sb.Len() < n {
			if sb.Len() > 0 {
				sb.WriteByte(' ')
			}
			for range 2 + r.IntN(9) {
				sb.WriteByte(byte('a' + r.IntN(26)))
			}
		}
		return sb.String()[:n]
	}
	b, _ := json.Marshal(map[string]any{
		"model": "m",
		"messages": []map[string]string{
			{"role": "system", "content": words(6000)},
			{"role": "user", "content": words(1000)},
		},
	})
	return b
}

func TestParseAllocs(t *testing.T) {
	body := chatBody(1)
	p := &openai.Parser{}
	n := testing.AllocsPerRun(100, func() {
		if _, err := p.ParseRequest("chat/completions", body); err != nil {
			t.Fatal(err)
		}
	})
	if n > 3 { // the Body, one string copy of the input, the messages
		t.Errorf("allocs per parse = %v", n)
	}
}

// BenchmarkParseChat parses a 7 KB chat body (the W1 workload's shape).
func BenchmarkParseChat(b *testing.B) {
	body := chatBody(1)
	p := &openai.Parser{}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.ParseRequest("chat/completions", body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseChatEncodingJSON is the same parse with encoding/json into
// typed structs, for comparison.
func BenchmarkParseChatEncodingJSON(b *testing.B) {
	body := chatBody(1)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var r struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			b.Fatal(err)
		}
	}
}
