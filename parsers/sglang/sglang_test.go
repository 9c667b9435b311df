package sglang_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/parsers/parserstest"
	"github.com/eppkit/eppkit/parsers/sglang"
)

func parse(body string) (*parsers.Body, error) {
	return (&sglang.Parser{}).ParseRequest(sglang.Generate, []byte(body))
}

func TestGenerate(t *testing.T) {
	b, err := parse(`{"text":"hello","sampling_params":{"max_new_tokens":8},"stream":true,"lora_path":"adapter-a","extra_key":"salt"}`)
	if err != nil {
		t.Fatal(err)
	}
	if b.Prompt != "hello" || b.MaxTokens != 8 || !b.Stream || b.Model != "adapter-a" || b.CacheSalt != "salt" {
		t.Errorf("body %+v", b)
	}
	b, err = parse(`{"input_ids":[[1,2],[3]],"model":"base","lora_path":["x","y"],"sampling_params":[{"max_new_tokens":4},{"max_new_tokens":9}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b.TokenIDs, []uint32{1, 2}) || b.Model != "base" || b.MaxTokens != 4 {
		t.Errorf("batch body %+v", b)
	}
	b, err = parse(`{"text":["first","second"]}`)
	if err != nil || b.Prompt != "first" || b.Model != "" {
		t.Errorf("text batch %+v %v", b, err)
	}
}

func TestBadRequests(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"sampling_params":{}}`, "missing text or input_ids"},
		{`{"text":5}`, "text: want a string"},
		{`{"input_ids":[]}`, "input_ids: empty array"},
		{`{"input_ids":[-3]}`, "input_ids[0]: want an integer in 0..4294967295"},
	} {
		_, err := parse(c.body)
		if !errors.Is(err, parsers.ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.body, err, c.want)
		}
	}
	parserstest.TestMalformed(t, &sglang.Parser{}, sglang.Generate, `{"text":"x","model":"m"}`)
}

func TestParseResponse(t *testing.T) {
	p := &sglang.Parser{}
	var u parsers.Usage
	p.ParseResponse(sglang.Generate, []byte(`{"text":"hi","meta_info":{"id":"x","prompt_tokens":12,"completion_tokens":3,"cached_tokens":8,"finish_reason":null}}`), &u)
	if u != (parsers.Usage{PromptTokens: 12, CompletionTokens: 3, CachedTokens: 8}) {
		t.Errorf("usage %+v", u)
	}
	u = parsers.Usage{}
	p.ParseResponse(sglang.Generate, []byte(`[{"text":"a","meta_info":{"prompt_tokens":2,"completion_tokens":1}},{"text":"b","meta_info":{"prompt_tokens":9}}]`), &u)
	if u.PromptTokens != 2 {
		t.Errorf("batch usage %+v", u)
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add(`{"text":"x","input_ids":[[1]],"lora_path":["a"],"sampling_params":[{"max_new_tokens":1}]}`)
	for _, s := range parserstest.Seeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		_, err := parse(body)
		if err != nil && !errors.Is(err, parsers.ErrBadRequest) {
			t.Fatalf("error %v does not wrap ErrBadRequest", err)
		}
	})
}

func FuzzParseResponse(f *testing.F) {
	f.Add(`{"meta_info":{"prompt_tokens":12,"completion_tokens":3,"cached_tokens":8}}`)
	f.Add(`[{"meta_info":{"prompt_tokens":1}}]`)
	f.Fuzz(func(t *testing.T, doc string) {
		var u parsers.Usage
		(&sglang.Parser{}).ParseResponse(sglang.Generate, []byte(doc), &u)
	})
}
