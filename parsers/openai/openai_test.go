package openai_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/parsers/openai"
)

func parse(t *testing.T, api, body string) (*parsers.Body, error) {
	t.Helper()
	return (&openai.Parser{}).ParseRequest(api, []byte(body))
}

func TestChat(t *testing.T) {
	b, err := parse(t, "chat/completions", `{
		"model": "llama", "stream": true, "stream_options": {"include_usage": true},
		"max_tokens": 7, "cache_salt": "s1",
		"tools": [{"type":"function","function":{"name":"f"}}],
		"messages": [
			{"role": "system", "content": "be brief"},
			{"role": "user", "content": [{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]},
			{"role": "assistant", "content": null, "tool_calls": []}
		]}`)
	if err != nil {
		t.Fatal(err)
	}
	want := []parsers.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "ab"}, {Role: "assistant", Content: ""}}
	if !reflect.DeepEqual(b.Messages, want) {
		t.Fatalf("messages = %+v", b.Messages)
	}
	if b.Model != "llama" || !b.Stream || !b.IncludeUsage || b.MaxTokens != 7 || b.CacheSalt != "s1" {
		t.Fatalf("body = %+v", b)
	}
	if !strings.Contains(string(b.Tools), `"name":"f"`) {
		t.Fatalf("tools = %s", b.Tools)
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
	}
	for _, c := range cases {
		b, err := parse(t, "completions", c.body)
		if err != nil {
			t.Errorf("%s: %v", c.body, err)
			continue
		}
		if b.Prompt != c.prompt || !reflect.DeepEqual(b.TokenIDs, c.tokens) {
			t.Errorf("%s: prompt %q tokens %v", c.body, b.Prompt, b.TokenIDs)
		}
	}
}

func TestBadRequests(t *testing.T) {
	cases := []struct{ api, body, want string }{
		{"completions", `{"model":`, "invalid JSON"},
		{"completions", `{"prompt":"x"}`, "missing model"},
		{"completions", `{"model":"m"}`, "missing prompt"},
		{"completions", `{"model":"m","prompt":{}}`, "string or an array"},
		{"completions", `{"model":"m","prompt":[]}`, "empty prompt"},
		{"completions", `{"model":"m","prompt":["a",1]}`, "mixed"},
		{"completions", `{"model":"m","prompt":[-1]}`, "prompt"},
		{"completions", `{"model":5,"prompt":"x"}`, "invalid JSON"},
		{"chat/completions", `{"model":"m"}`, "missing messages"},
		{"chat/completions", `{"model":"m","messages":[{"role":"user","content":5}]}`, "messages[0].content"},
		{"chat/completions", `[]`, "invalid JSON"},
	}
	for _, c := range cases {
		_, err := parse(t, c.api, c.body)
		if !errors.Is(err, parsers.ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: err = %v, want ErrBadRequest mentioning %q", c.api, c.body, err, c.want)
		}
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add("chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`)
	f.Add("completions", `{"model":"m","prompt":[[1,2],[3]]}`)
	f.Add("completions", `{"model":"m","prompt":["a","b"],"stream_options":{"include_usage":true}}`)
	f.Fuzz(func(t *testing.T, api, body string) {
		if api != "completions" {
			api = "chat/completions"
		}
		b, err := (&openai.Parser{}).ParseRequest(api, []byte(body))
		if err != nil {
			if !errors.Is(err, parsers.ErrBadRequest) {
				t.Fatalf("error %v does not wrap ErrBadRequest", err)
			}
			return
		}
		if b.Model == "" {
			t.Fatal("accepted a body without model")
		}
	})
}
