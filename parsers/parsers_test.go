package parsers_test

import (
	"errors"
	"testing"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/parsers/openai"
)

type fake struct{ paths []string }

func (f *fake) Paths() []string { return f.paths }
func (f *fake) ParseRequest(s string, b []byte) (*parsers.Body, error) {
	return &parsers.Body{API: s}, nil
}

func TestSelectLongestSuffixOnSegmentBoundary(t *testing.T) {
	a := &fake{[]string{"completions", "chat/completions"}}
	m := &fake{[]string{"messages", "messages/count_tokens"}}
	g := &fake{[]string{"inference/v1/generate", "generate"}}
	s := parsers.NewSelector(a, m, g)
	cases := []struct {
		path string
		want parsers.Parser
		suf  string
	}{
		{"/v1/chat/completions", a, "chat/completions"},
		{"/v1/completions", a, "completions"},
		{"/v1/completions/", a, "completions"},
		{"/v1/chat/completions?x=1", a, "chat/completions"},
		{"completions", a, "completions"},
		{"/v1/messages/count_tokens", m, "messages/count_tokens"},
		{"/inference/v1/generate", g, "inference/v1/generate"},
		{"/generate", g, "generate"},
	}
	for _, c := range cases {
		p, suf, err := s.Select(c.path)
		if err != nil || p != c.want || suf != c.suf {
			t.Errorf("Select(%q) = %v %q %v, want %q", c.path, p, suf, err, c.suf)
		}
	}
	for _, bad := range []string{"/v1/xcompletions", "/v1/models", "", "/"} {
		if _, _, err := s.Select(bad); !errors.Is(err, parsers.ErrNoParser) {
			t.Errorf("Select(%q) err = %v, want ErrNoParser", bad, err)
		}
	}
}

func TestFirstParserWinsSameSuffix(t *testing.T) {
	a, b := &fake{[]string{"completions"}}, &fake{[]string{"completions"}}
	p, _, _ := parsers.NewSelector(a, b).Select("/v1/completions")
	if p != a {
		t.Fatal("second parser won a shared suffix")
	}
}

func TestSelectorParse(t *testing.T) {
	s := parsers.NewSelector(&openai.Parser{})
	b, err := s.Parse("/v1/chat/completions", []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil || b.Model != "m" || b.API != "chat/completions" || b.PromptLen() != len("user")+len("hi") {
		t.Fatalf("body %+v err %v", b, err)
	}
}
