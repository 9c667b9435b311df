package parserstest

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/parsers"
)

// Case is one malformed body.
type Case struct {
	Name string
	Body []byte
}

// Malformed returns the corpus for a parser that accepts valid (a minimal
// body it parses without error): every truncation of valid, wrong top-level
// kinds, syntax errors (trailing commas, comments, single quotes, bad
// escapes, bad numbers, trailing data), invalid UTF-8 and control characters
// inside valid's strings, and nesting deeper than parsers.MaxDepth.
func Malformed(valid string) []Case {
	valid = strings.TrimSpace(valid)
	var cs []Case
	add := func(name string, body []byte) { cs = append(cs, Case{name, body}) }
	for i := 0; i < len(valid); i++ {
		add("truncated", []byte(valid[:i]))
	}
	for _, s := range []string{`[]`, `"body"`, `42`, `null`, `true`, `{}garbage`, `{"model":"m",}`, `{,}`,
		`{"model":'m'}`, `{/*c*/}`, `{"model":"m"`, `{"model" "m"}`, `{"model":"m"]`, `{"a":01}`, `{"a":1.}`,
		`{"a":-}`, `{"a":1e}`, `{"a":NaN}`, `{"a":tru}`, `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":[1,]}`, `{"a":[1 2]}`} {
		add("syntax "+s, []byte(s))
	}
	add("trailing data", []byte(valid+` {}`))
	if i := strings.Index(valid, `":"`); i >= 0 {
		at := i + 3 // inside the first string value
		add("invalid UTF-8", []byte(valid[:at]+"\xff\xfe"+valid[at:]))
		add("truncated UTF-8", []byte(valid[:at]+"\xe2\x82"+valid[at:]))
		add("surrogate as UTF-8", []byte(valid[:at]+"\xed\xa0\x80"+valid[at:]))
		add("control character", []byte(valid[:at]+"\x01"+valid[at:]))
		add("raw newline", []byte(valid[:at]+"\n"+valid[at:]))
	}
	deep := 100_000
	add("deeply nested arrays", []byte(`{"model":"m","x":`+strings.Repeat("[", deep)+strings.Repeat("]", deep)+`}`))
	add("deeply nested objects", []byte(strings.Repeat(`{"a":`, deep)+`1`+strings.Repeat("}", deep)))
	add("unbalanced", []byte(`{"model":"m","x":`+strings.Repeat("[", 1000)+`}`))
	return cs
}

// TestMalformed checks that p rejects every body of Malformed(valid) parsed
// as api with an error wrapping parsers.ErrBadRequest, and that it accepts
// valid itself.
func TestMalformed(t *testing.T, p parsers.Parser, api, valid string) {
	t.Helper()
	if _, err := p.ParseRequest(api, []byte(valid)); err != nil {
		t.Fatalf("%s: the valid body %s is rejected: %v", api, valid, err)
	}
	for _, c := range Malformed(valid) {
		b, err := parse(p, api, c.Body)
		switch {
		case err == nil:
			t.Errorf("%s: %s %q: accepted (%+v)", api, c.Name, abbrev(c.Body), b)
		case !errors.Is(err, parsers.ErrBadRequest):
			t.Errorf("%s: %s %q: error %v does not wrap ErrBadRequest", api, c.Name, abbrev(c.Body), err)
		case len(err.Error()) < len("x: bad request: ")+5:
			t.Errorf("%s: %s: error %q says too little", api, c.Name, err)
		}
	}
}

// parse calls p, turning a panic into an error that is not ErrBadRequest.
func parse(p parsers.Parser, api string, body []byte) (b *parsers.Body, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError{r}
		}
	}()
	return p.ParseRequest(api, body)
}

type panicError struct{ v any }

func (e panicError) Error() string { return "panic: " + toString(e.v) }

func toString(v any) string {
	if e, ok := v.(error); ok {
		return e.Error()
	}
	if s, ok := v.(string); ok {
		return s
	}
	return "non-error panic"
}

func abbrev(b []byte) []byte {
	if len(b) > 60 {
		return append(bytes.Clone(b[:57]), "..."...)
	}
	return b
}

// Seeds returns a few bodies, valid and not, for fuzz corpora.
func Seeds() []string {
	return []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","prompt":"x","stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a\u00e9\ud83d\ude00"}]}]}`,
		`{"model":"m","x":[[[[{}]]]],"y":-1.5e+3}`,
		`{"model":`,
		"{\"model\":\"\xff\"}",
		`[1,2,3]`,
	}
}
