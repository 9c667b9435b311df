package passthrough_test

import (
	"testing"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/parsers/openai"
	"github.com/eppkit/eppkit/parsers/parserstest"
	"github.com/eppkit/eppkit/parsers/passthrough"
)

func TestFallback(t *testing.T) {
	s := parsers.NewSelector(&openai.Parser{}, &passthrough.Parser{})
	p, suf, err := s.Select("/v1/models/custom:predict")
	if err != nil || suf != "" {
		t.Fatalf("fallback: %v %q %v", p, suf, err)
	}
	if _, ok := p.(*passthrough.Parser); !ok {
		t.Fatalf("fallback is %T", p)
	}
	if p, _, _ := s.Select("/v1/chat/completions"); p == nil || p == parsers.Parser(&passthrough.Parser{}) {
		t.Fatal("a claimed path went to the fallback")
	}
}

func TestNeverRejects(t *testing.T) {
	p := &passthrough.Parser{}
	b, err := p.ParseRequest("", []byte(`{"model":"m","stream":true,"prompt":{"weird":1}}`))
	if err != nil || b.Model != "m" || !b.Stream {
		t.Errorf("object body: %+v %v", b, err)
	}
	for _, c := range parserstest.Malformed(`{"model":"m","x":"y"}`) {
		b, err := p.ParseRequest("", c.Body)
		if err != nil || b == nil || string(b.Raw) != string(c.Body) {
			t.Errorf("%s: %+v %v", c.Name, b, err)
		}
		if b.Model != "" { // a model is trusted only from a well-formed body
			t.Errorf("%s: model %q from a malformed body", c.Name, b.Model)
		}
	}
}

func TestParseResponse(t *testing.T) {
	var u parsers.Usage
	(&passthrough.Parser{}).ParseResponse("", []byte(`{"usage":{"input_tokens":4,"output_tokens":2}}`), &u)
	if u != (parsers.Usage{PromptTokens: 4, CompletionTokens: 2}) {
		t.Errorf("usage %+v", u)
	}
}

func FuzzParseRequest(f *testing.F) {
	for _, s := range parserstest.Seeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		b, err := (&passthrough.Parser{}).ParseRequest("", []byte(body))
		if err != nil || b == nil {
			t.Fatalf("rejected %q: %v", body, err)
		}
	})
}
