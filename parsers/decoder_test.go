package parsers_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/eppkit/eppkit/parsers"
)

func TestDecoderWalk(t *testing.T) {
	var d parsers.Decoder
	d.Reset([]byte(` {"a": [1, -2.0, true, null, "s\u00e9"], "b": {"c": {}}, "d": [], "e\"k": 3} `))
	var got []string
	for d.Object(); d.More(); {
		switch k := string(d.Key()); k {
		case "a":
			d.Array()
			d.More()
			got = append(got, "int", itoa(d.Int()))
			d.More()
			got = append(got, itoa(d.Int()))
			d.More()
			got = append(got, map[bool]string{true: "true"}[d.Bool()])
			d.More()
			if !d.Null() {
				t.Error("null")
			}
			d.More()
			got = append(got, d.String())
			if d.More() {
				t.Error("array did not end")
			}
		case "b":
			got = append(got, string(d.Raw()))
		case `e"k`:
			got = append(got, "escaped key", itoa(d.Int()))
		default:
			got = append(got, "skip "+k)
			d.Skip()
		}
	}
	if err := d.End(); err != nil {
		t.Fatal(err)
	}
	want := `int 1 -2 true sé {"c": {}} skip d escaped key 3`
	if s := strings.Join(got, " "); s != want {
		t.Errorf("got  %s\nwant %s", s, want)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestDecoderErrorsNameThePath(t *testing.T) {
	cases := []struct{ doc, want string }{
		{`{"messages":[{"role":"user"},{"content":5}]}`, "messages[1].content: want a string, got a number"},
		{`{"a":[[1,2],[3,"x"]]}`, "a[1][1]: want a number, got a string"},
		{`{"a":1.5}`, "a: want an integer, got 1.5"},
		{`{"a":99999999999999999999}`, "a: integer 99999999999999999999 out of range"},
		{`{"a":1 "b":2}`, "invalid JSON at byte 7: want ',' or '}'"},
		{`{"a":"x`, "unterminated string"},
		{"{\"a\":\"\x00\"}", "control character"},
	}
	for _, c := range cases {
		var d parsers.Decoder
		d.Reset([]byte(c.doc))
		walk(&d)
		if err := d.End(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.doc, err, c.want)
		}
	}
}

// walk reads every value with the typed readers, guessing from the kind:
// objects of members named "content" or "b" are read as strings, numbers as
// integers.
func walk(d *parsers.Decoder) {
	switch d.Kind() {
	case parsers.Object:
		for d.Object(); d.More(); {
			if k := string(d.Key()); k == "content" {
				_ = d.String()
				continue
			}
			walk(d)
		}
	case parsers.Array:
		for d.Array(); d.More(); {
			if d.Kind() == parsers.String && strings.Contains(d.Path(), "a[1]") {
				_ = d.Int()
				continue
			}
			walk(d)
		}
	case parsers.Number:
		d.Int()
	default:
		d.Skip()
	}
}

func TestDecoderDepth(t *testing.T) {
	ok := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	var d parsers.Decoder
	d.Reset([]byte(ok))
	d.Skip()
	if err := d.End(); err != nil {
		t.Errorf("5000 levels: %v", err)
	}
	deep := strings.Repeat("[", parsers.MaxDepth+1) + strings.Repeat("]", parsers.MaxDepth+1)
	d.Reset([]byte(deep))
	d.Skip()
	if err := d.End(); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("too deep: %v", err)
	}
	// Levels opened by Object/Array count too.
	d.Reset([]byte(`{"a":` + deep[:parsers.MaxDepth] + `}`))
	d.Object()
	d.More()
	d.Key()
	d.Skip()
	if d.Err() == nil {
		t.Error("open levels do not count toward the depth")
	}
}

func TestDecoderNoAllocs(t *testing.T) {
	doc := []byte(`{"model":"m","n":3,"x":[1,{"y":"z"}],"ok":true}`)
	n := testing.AllocsPerRun(100, func() {
		var d parsers.Decoder
		d.Reset(doc)
		for d.Object(); d.More(); {
			switch string(d.Key()) {
			case "n":
				d.Int()
			case "ok":
				d.Bool()
			default:
				d.Skip()
			}
		}
		if d.End() != nil {
			t.Fatal(d.Err())
		}
	})
	if n != 0 {
		t.Errorf("allocs = %v", n)
	}
}

func TestAppendQuoteMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\`, "ctl\x00\x1f\n\r\t", "é😀", "\u2028"} {
		var d parsers.Decoder
		q := parsers.AppendQuote(nil, s)
		d.Reset(q)
		if got := d.String(); got != s || d.End() != nil {
			t.Errorf("%q → %s → %q", s, q, got)
		}
		var back string
		if err := json.Unmarshal(q, &back); err != nil || back != s {
			t.Errorf("encoding/json reads %s as %q (%v)", q, back, err)
		}
	}
}

// FuzzDecoder: the Decoder accepts a document exactly when encoding/json
// does and the document is valid UTF-8 (the Decoder also checks encoding).
func FuzzDecoder(f *testing.F) {
	for _, s := range []string{`{}`, `[1,2.5e3,-0]`, `{"a":"\u00e9\ud83d\ude00"}`, `"x"`, `{"a":[{"b":null}]}`, `{"a":01}`, `[1,]`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var d parsers.Decoder
		d.Reset(doc)
		d.Skip()
		err := d.End()
		want := json.Valid(doc) && utf8.Valid(doc)
		if (err == nil) != want {
			t.Fatalf("%q: decoder err %v, encoding/json valid %v", doc, err, want)
		}
		// Reading a string agrees with encoding/json.
		if d.Reset(doc); err == nil && d.Kind() == parsers.String {
			var s string
			_ = json.Unmarshal(doc, &s)
			if got := d.String(); got != s {
				t.Fatalf("%q: string %q, encoding/json %q", doc, got, s)
			}
		}
	})
}
