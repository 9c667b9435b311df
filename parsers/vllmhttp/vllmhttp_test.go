package vllmhttp_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/parsers/parserstest"
	"github.com/eppkit/eppkit/parsers/vllmhttp"
)

func TestGenerate(t *testing.T) {
	b, err := (&vllmhttp.Parser{}).ParseRequest(vllmhttp.Generate, []byte(`{"model":"llama","token_ids":[1,2,3],
		"sampling_params":{"max_tokens":16,"temperature":0},"stream":true,"stream_options":{"include_usage":true},"cache_salt":"s"}`))
	if err != nil {
		t.Fatal(err)
	}
	if b.Model != "llama" || !reflect.DeepEqual(b.TokenIDs, []uint32{1, 2, 3}) || b.MaxTokens != 16 || !b.Stream || !b.IncludeUsage || b.CacheSalt != "s" {
		t.Errorf("body %+v", b)
	}
	if b.TokenEstimate() != 3 {
		t.Errorf("token estimate %d", b.TokenEstimate())
	}
	if _, err := (&vllmhttp.Parser{}).ParseRequest(vllmhttp.Generate, []byte(`{"token_ids":[7]}`)); err != nil {
		t.Errorf("the model is optional: %v", err)
	}
}

func TestBadRequests(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"model":"m"}`, "missing token_ids"},
		{`{"model":"m","token_ids":[]}`, "missing token_ids"},
		{`{"model":"m","token_ids":["a"]}`, "token_ids[0]: want a number"},
		{`{"model":"m","token_ids":[4294967296]}`, "token_ids[0]: want an integer in 0..4294967295"},
	} {
		_, err := (&vllmhttp.Parser{}).ParseRequest(vllmhttp.Generate, []byte(c.body))
		if !errors.Is(err, parsers.ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.body, err, c.want)
		}
	}
	parserstest.TestMalformed(t, &vllmhttp.Parser{}, vllmhttp.Generate, `{"model":"m","token_ids":[1,2]}`)
}

func TestParseResponse(t *testing.T) {
	var u parsers.Usage
	(&vllmhttp.Parser{}).ParseResponse(vllmhttp.Generate, []byte(`{"request_id":"r","choices":[{"token_ids":[5]}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`), &u)
	if u != (parsers.Usage{PromptTokens: 3, CompletionTokens: 1}) {
		t.Errorf("usage %+v", u)
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add(`{"model":"m","token_ids":[1,2],"sampling_params":{"max_tokens":3}}`)
	for _, s := range parserstest.Seeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		b, err := (&vllmhttp.Parser{}).ParseRequest(vllmhttp.Generate, []byte(body))
		if err != nil {
			if !errors.Is(err, parsers.ErrBadRequest) {
				t.Fatalf("error %v does not wrap ErrBadRequest", err)
			}
			return
		}
		if len(b.TokenIDs) == 0 {
			t.Fatalf("accepted %q without token ids", body)
		}
	})
}

func FuzzParseResponse(f *testing.F) {
	f.Add(`{"usage":{"prompt_tokens":3,"completion_tokens":1}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		var u parsers.Usage
		(&vllmhttp.Parser{}).ParseResponse(vllmhttp.Generate, []byte(doc), &u)
	})
}
