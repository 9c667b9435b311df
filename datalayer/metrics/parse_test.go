package metrics_test

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/datalayer/metrics"
)

func TestParseHistogramSeries(t *testing.T) {
	text := readFile(t, "vllm.prom")
	all, err := metrics.Parse(text, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := all["vllm:time_to_first_token_seconds"]
	if f == nil || f.Type != "histogram" {
		t.Fatalf("family: %+v", f)
	}
	count := all.Series("vllm:time_to_first_token_seconds_count")
	if len(count) != 1 || count[0].Value != 13331 {
		t.Errorf("count: %+v", count)
	}
	if b := all.Series("vllm:time_to_first_token_seconds_bucket"); len(b) != 23 {
		t.Errorf("buckets: %d", len(b))
	}
	// A filter naming a series of a histogram keeps it, and Series finds it
	// the same way whether the family was parsed whole or not.
	some, err := metrics.Parse(text, metrics.NewFilter("vllm:time_to_first_token_seconds_count"))
	if err != nil {
		t.Fatal(err)
	}
	if got := some.Series("vllm:time_to_first_token_seconds_count"); !reflect.DeepEqual(got, count) {
		t.Errorf("filtered: %+v, want %+v", got, count)
	}
	if len(some) != 1 {
		t.Errorf("filtered families: %v", keys(some))
	}
	if all.Series("nope") != nil || all.Series("nope_sum") != nil {
		t.Error("series of a missing family")
	}
}

func keys(f metrics.Families) []string {
	var out []string
	for k := range f {
		out = append(out, k)
	}
	return out
}

func TestParseFilterKeepsOnlyWanted(t *testing.T) {
	fams, err := metrics.Parse(readFile(t, "vllm.prom"), metrics.NewFilter("vllm:num_requests_running", "vllm:cache_config_info"))
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) != 2 || fams["vllm:num_requests_running"].Samples[0].Value != 23 {
		t.Errorf("got %v", keys(fams))
	}
	if fams["vllm:num_requests_running"].Type != "gauge" {
		t.Errorf("type %q: the TYPE line must be kept", fams["vllm:num_requests_running"].Type)
	}
	v, _ := fams["vllm:cache_config_info"].Samples[0].Labels.Get("num_gpu_blocks")
	if v != "71372" {
		t.Errorf("num_gpu_blocks %q", v)
	}
}

func TestParseMalformed(t *testing.T) {
	filter := metrics.NewFilter("a", "b")
	tests := []struct{ name, text, want string }{
		{"garbage value", "a 1\nb{x=\"1\"} notanumber\n", "line 2"},
		{"unterminated labels", "# HELP zz skipped\nzz 1\na{x=\"1\" 1\n", "line 3"},
		{"duplicate series", "a{x=\"1\",y=\"2\"} 1\na{y=\"2\",x=\"1\"} 2\n", "duplicate series a{x=\"1\",y=\"2\"}"},
		{"duplicate label", "a{x=\"1\",x=\"2\"} 1\n", "duplicate label"},
		{"two TYPE lines", "# TYPE a gauge\na 1\n# TYPE a gauge\na 2\n", "malformed"},
		{"html", "<html><body>502 Bad Gateway</body></html>\n", "malformed"},
		{"binary", "\x00\x01\x02\xff\xfe", "malformed"},
	}
	for _, tt := range tests {
		for _, f := range []*metrics.Filter{nil, filter} {
			// The filter cannot name the lines of the html and binary
			// bodies, so it hands them to the parser, which rejects them.
			_, err := metrics.Parse([]byte(tt.text), f)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s (filter %v): got %v, want %q", tt.name, f != nil, err, tt.want)
			}
		}
	}
}

func TestParseValues(t *testing.T) {
	fams, err := metrics.Parse([]byte("a NaN\nb +Inf\nc -1\nd 1e3 1700000000000\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(fams["a"].Samples[0].Value) || !math.IsInf(fams["b"].Samples[0].Value, 1) ||
		fams["c"].Samples[0].Value != -1 || fams["d"].Samples[0].Value != 1000 {
		t.Errorf("values: %v", fams)
	}
}

// TestParserReuse: a Parser reuses unchanged families, reparses changed
// ones and forgets vanished ones.
func TestParserReuse(t *testing.T) {
	p := metrics.NewParser(metrics.NewFilter("a", "info"))
	page := func(a string, withInfo bool) []byte {
		s := "# TYPE a gauge\na " + a + "\n"
		if withInfo {
			s += "# TYPE info gauge\ninfo{x=\"1\"} 1\n"
		}
		return []byte(s)
	}
	f1, err := p.Parse(page("1", true))
	if err != nil {
		t.Fatal(err)
	}
	f2, err := p.Parse(page("2", true))
	if err != nil {
		t.Fatal(err)
	}
	if f2["a"].Samples[0].Value != 2 || f1["a"].Samples[0].Value != 1 {
		t.Error("changed family not reparsed, or the earlier result was modified")
	}
	if f1["info"] != f2["info"] {
		t.Error("unchanged family not reused")
	}
	f3, err := p.Parse(page("2", false))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f3["info"]; ok {
		t.Error("vanished family still reported")
	}
	f4, err := p.Parse(page("2", true))
	if err != nil {
		t.Fatal(err)
	}
	if f4["info"] == f2["info"] || f4["info"].Samples[0].Value != 1 {
		t.Error("a family that came back must be parsed again")
	}
	// A family whose lines are not grouped is merged, and checked for
	// duplicates across its parts.
	f5, err := p.Parse([]byte("a{x=\"1\"} 1\ninfo 1\na{x=\"2\"} 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(f5["a"].Samples) != 2 {
		t.Errorf("merged: %+v", f5["a"])
	}
	if _, err := p.Parse([]byte("a{x=\"1\"} 1\ninfo 1\na{x=\"1\"} 2\n")); err == nil || !strings.Contains(err.Error(), "duplicate series") {
		t.Errorf("duplicate across parts: %v", err)
	}
	// An error in a reused page does not poison the parser.
	if _, err := p.Parse([]byte("a{ 1\n")); err == nil {
		t.Error("malformed accepted")
	}
	if f, err := p.Parse(page("3", true)); err != nil || f["a"].Samples[0].Value != 3 {
		t.Errorf("after an error: %v %v", f, err)
	}
}

func TestSelector(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{"vllm:num_requests_waiting", "vllm:num_requests_waiting", ""},
		{` a{b="c"} `, `a{b="c"}`, ""},
		{`a{b=c, d = "e,f}" ,}`, `a{b="c",d="e,f}"}`, ""},
		{`a{z="1",b="2"}`, `a{b="2",z="1"}`, ""},
		{`a{b="\"q\""}`, `a{b="\"q\""}`, ""},
		{"", "", "want a metric name"},
		{"{b=c}", "", "want a metric name"},
		{"a{b!=c}", "", "only = matchers"},
		{`a{b=~"c"}`, "", "only = matchers"},
		{"a{b=c", "", "missing }"},
		{"a{b=}", "", "empty value"},
		{"a{b=c,b=d}", "", "appears twice"},
		{"a b", "", "unexpected"},
		{"a{b=c} x", "", "after }"},
		{`a{b="c}`, "", "bad quoted value"},
	}
	for _, tt := range tests {
		sel, err := metrics.ParseSelector(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: got %v, want error %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || sel.String() != tt.want {
			t.Errorf("%q: got %q %v, want %q", tt.in, sel.String(), err, tt.want)
		}
	}
	sel, _ := metrics.ParseSelector(`m{a="1"}`)
	if !sel.Matches(metrics.Labels{{"a", "1"}, {"b", "2"}}) || sel.Matches(metrics.Labels{{"a", "2"}}) || sel.Matches(nil) {
		t.Error("Matches")
	}
}
