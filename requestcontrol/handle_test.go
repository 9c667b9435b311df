package requestcontrol_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/requestcontrol/producers/inflight"
	rt "github.com/eppkit/eppkit/requestcontrol/requestcontroltest"
	"github.com/eppkit/eppkit/requestcontrol/saturation"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/schedulingtest"
)

var ctx = context.Background()

func wantRejection(t *testing.T, res rt.Result, status int, reason, msg string) {
	t.Helper()
	r := res.Rejection
	if r == nil {
		t.Fatalf("admitted to %v, want %d %s", res.Exchange.Decision.Endpoints, status, reason)
	}
	if r.Status != status || r.Reason != reason || !strings.Contains(r.Error(), msg) {
		t.Fatalf("rejection %v (status %d, reason %q), want %d %q mentioning %q", r, r.Status, r.Reason, status, reason, msg)
	}
	if reason != "" && r.Headers()[requestcontrol.HeaderDroppedReason] != reason {
		t.Errorf("headers %v", r.Headers())
	}
}

// TestStatusCodes walks every status-code path of HandleRequest.
func TestStatusCodes(t *testing.T) {
	det := &rt.Detector{}
	det.Set(1.5)
	denier := requestcontrol.AdmitterFunc(func(_ context.Context, req *scheduling.Request, _ []*scheduling.Endpoint) error {
		switch req.Headers["x-deny"] {
		case "plain":
			return errors.New("quota exceeded")
		case "own":
			return requestcontrol.Deny("rejected-quota", errors.New("tenant over quota"))
		}
		return nil
	})
	d := rt.NewDirector(t, rt.Config{
		Admission:  &requestcontrol.SaturationAdmitter{Detector: det},
		Objectives: requestcontrol.Objectives{"sheddable-batch": -1},
		Plugins:    []any{rt.Named{Name: "quota", Plugin: denier}},
		Limits:     requestcontrol.Limits{MaxRequestBytes: 1 << 10},
	})
	empty := rt.NewDirector(t, rt.Config{Endpoints: []*scheduling.Endpoint{}})
	allFiltered := rt.NewDirector(t, rt.Config{Filters: []scheduling.Filter{schedulingtest.DropFilter{"ep-0", "ep-1", "ep-2"}}})

	cases := []struct {
		name           string
		d              *requestcontrol.Director
		in             *requestcontrol.Inbound
		status         int
		reason, errMsg string
	}{
		{"no parser", d, rt.Request("/v1/models", `{}`), 400, "", "no parser"},
		{"bad JSON", d, rt.Request("/v1/chat/completions", `{"model":`), 400, "", "invalid JSON"},
		{"missing model", d, rt.Request("/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`), 400, "", "missing model"},
		{"too large", d, rt.Chat("m", strings.Repeat("x", 2000)), 413, "", "larger than the limit of 1024 bytes"},
		{"sheddable at saturation", d, rt.Chat("m", "x", requestcontrol.HeaderObjective, "sheddable-batch"), 429, requestcontrol.ReasonSaturated, "system saturated, sheddable request dropped"},
		{"custom admitter", d, rt.Chat("m", "x", "x-deny", "plain"), 429, requestcontrol.ReasonDenied, `admitter "quota": quota exceeded`},
		{"custom admitter with its reason", d, rt.Chat("m", "x", "x-deny", "own"), 429, "rejected-quota", "tenant over quota"},
		{"all filtered", allFiltered, rt.Chat("m", "x"), 429, requestcontrol.ReasonSaturated, "filters removed every endpoint"},
		{"no endpoints", empty, rt.Chat("m", "x"), 503, requestcontrol.ReasonNoEndpoints, "no candidate endpoints"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantRejection(t, rt.Do(ctx, c.d, c.in, rt.Response{}), c.status, c.reason, c.errMsg)
		})
	}
	// Priority ≥ 0 always passes the saturated gate.
	if res := rt.Do(ctx, d, rt.Chat("m", "x"), rt.Response{}); res.Rejection != nil {
		t.Errorf("priority 0 at saturation: %v", res.Rejection)
	}
	if s := d.Stats(); s.Rejected != 7 {
		t.Errorf("stats %+v", s)
	}
}

// TestSeedRejectionLogLines reproduces the seed's two log lines for a
// sheddable request at saturation (SPEC §3.4): the admission's
// "Request rejected: system saturated and request is sheddable" with the
// request id, objective and priority, then "Error handling request" with the
// error.
func TestSeedRejectionLogLines(t *testing.T) {
	var logs rt.LogBuffer
	det := &rt.Detector{}
	det.Set(1)
	d := rt.NewDirector(t, rt.Config{Objectives: requestcontrol.Objectives{"sheddable-batch": -1}})
	d.Logger = logs.Logger()
	d.Admission = &requestcontrol.SaturationAdmitter{Detector: det, Logger: d.Logger}
	in := rt.Chat("m", "x", requestcontrol.HeaderObjective, "sheddable-batch")
	in.ID = "98bbfafe"
	res := rt.Do(ctx, d, in, rt.Response{})
	wantRejection(t, res, 429, requestcontrol.ReasonSaturated, "sheddable")
	var got []string
	for _, l := range logs.Lines() {
		if strings.Contains(l, "rejected") || strings.Contains(l, "Error handling") {
			got = append(got, l)
		}
	}
	want := []string{
		`"msg":"Request rejected: system saturated and request is sheddable","x-request-id":"98bbfafe","objectiveKey":"sheddable-batch","priority":-1`,
		`"msg":"Error handling request","x-request-id":"98bbfafe","error":"429 rejected-saturated: system saturated, sheddable request dropped"`,
	}
	if len(got) != 2 {
		t.Fatalf("log lines:\n%s", strings.Join(logs.Lines(), "\n"))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("line %d:\n got %s\nwant …%s…", i, got[i], w)
		}
	}
	// And the accepted request logs its models and priority.
	rt.Do(ctx, d, rt.Chat("meta-llama/Llama-3.2-1B-Instruct", "x"), rt.Response{})
	if !slices.ContainsFunc(logs.Lines(), func(l string) bool {
		return strings.Contains(l, `"msg":"LLM request assembled"`) &&
			strings.Contains(l, `"incomingModelName":"meta-llama/Llama-3.2-1B-Instruct","targetModelName":"meta-llama/Llama-3.2-1B-Instruct"`) &&
			strings.Contains(l, `"priority":0`)
	}) {
		t.Errorf("no assembled line:\n%s", strings.Join(logs.Lines(), "\n"))
	}
}

func TestReadBodyLimit(t *testing.T) {
	d := &requestcontrol.Director{}
	// A 100 MB body is refused after reading just over the 16 MiB default.
	r := &countingReader{r: io.LimitReader(zeros{}, 100<<20)}
	_, err := d.ReadBody(r)
	var rej *requestcontrol.Rejection
	if !errors.As(err, &rej) || rej.Status != 413 {
		t.Fatalf("100 MB body: %v", err)
	}
	if r.n > requestcontrol.DefaultMaxRequestBytes+64<<10 {
		t.Errorf("read %d bytes of a 100 MB body", r.n)
	}
	b, err := d.ReadBody(strings.NewReader("small"))
	if err != nil || string(b) != "small" {
		t.Errorf("small body: %q %v", b, err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) { n, err := c.r.Read(p); c.n += n; return n, err }

func TestSubsetHintMatchesAddressAndPort(t *testing.T) {
	eps := []*scheduling.Endpoint{
		schedulingtest.Ep("a-8000").Addr("10.0.0.1", 8000).Build(),
		schedulingtest.Ep("a-8001").Addr("10.0.0.1", 8001).Waiting(9).Build(),
		schedulingtest.Ep("b").Addr("fd00::2", 8000).Waiting(5).Build(),
	}
	names := func(hint []string) []string { return schedulingtest.Names(requestcontrol.Subset(eps, hint)) }
	if got := names([]string{"10.0.0.1:8001"}); !slices.Equal(got, []string{"a-8001"}) {
		t.Errorf("ip and port: %v", got)
	}
	if got := names([]string{"10.0.0.1"}); !slices.Equal(got, []string{"a-8000", "a-8001"}) {
		t.Errorf("ip only: %v", got)
	}
	if got := names([]string{"[fd00:0::2]:8000"}); !slices.Equal(got, []string{"b"}) {
		t.Errorf("ipv6: %v", got)
	}
	if got := names([]string{"10.0.0.9:8000", "bogus:port"}); len(got) != 0 {
		t.Errorf("no match: %v", got)
	}
	if got := requestcontrol.Subset(eps, nil); len(got) != 3 {
		t.Errorf("nil hint: %v", got)
	}
	d := rt.NewDirector(t, rt.Config{Endpoints: eps})
	in := rt.Chat("m", "x")
	in.Subset = []string{"10.0.0.1:8001"}
	res := rt.Do(ctx, d, in, rt.Response{})
	if res.Rejection != nil || res.Exchange.Decision.Header() != "10.0.0.1:8001" {
		t.Fatalf("subset pick: %+v", res)
	}
	in = rt.Chat("m", "x")
	in.Subset = []string{"10.0.0.7:8000"}
	wantRejection(t, rt.Do(ctx, d, in, rt.Response{}), 503, requestcontrol.ReasonNoEndpoints, "subset hint")
}

// TestInboundDestinationNeverTrusted: a client cannot choose its endpoint.
func TestInboundDestinationNeverTrusted(t *testing.T) {
	var seen string
	spy := requestcontrol.PreRequestFunc(func(_ context.Context, req *scheduling.Request, _ *scheduling.Result) {
		seen = req.Headers[requestcontrol.HeaderDestination] + req.Headers[requestcontrol.HeaderPrefiller]
	})
	d := rt.NewDirector(t, rt.Config{Plugins: []any{spy}})
	in := rt.Chat("m", "x", requestcontrol.HeaderDestination, "6.6.6.6:1", requestcontrol.HeaderPrefiller, "6.6.6.6:2")
	res := rt.Do(ctx, d, in, rt.Response{})
	if res.Rejection != nil {
		t.Fatal(res.Rejection)
	}
	if seen != "" || in.Headers[requestcontrol.HeaderDestination] != "" {
		t.Errorf("inbound destination survived: plugin saw %q", seen)
	}
	if got := res.Exchange.Headers[requestcontrol.HeaderDestination]; got != "10.0.0.1:8000" {
		t.Errorf("destination %q", got)
	}
}

func TestObjectivesAndFairness(t *testing.T) {
	var prio []int
	var fair []string
	spy := requestcontrol.PreRequestFunc(func(_ context.Context, req *scheduling.Request, _ *scheduling.Result) {
		prio = append(prio, req.Priority)
		fair = append(fair, requestcontrol.FairnessID(req)+"/"+requestcontrol.Objective(req))
	})
	d := rt.NewDirector(t, rt.Config{Plugins: []any{spy}, Objectives: requestcontrol.Objectives{"critical": 10, "batch": -1}})
	for _, in := range []*requestcontrol.Inbound{
		rt.Chat("m", "x", requestcontrol.HeaderObjective, "critical", requestcontrol.HeaderFairnessID, "tenant-a"),
		rt.Chat("m", "x", requestcontrol.HeaderObjectiveAlias, "batch", requestcontrol.HeaderFairnessAlias, "tenant-b"),
		rt.Chat("m", "x", requestcontrol.HeaderObjective, "unknown"),
		rt.Chat("m", "x"),
	} {
		if res := rt.Do(ctx, d, in, rt.Response{}); res.Rejection != nil {
			t.Fatal(res.Rejection)
		}
	}
	if !slices.Equal(prio, []int{10, -1, 0, 0}) {
		t.Errorf("priorities %v", prio)
	}
	if want := []string{"tenant-a/critical", "tenant-b/batch", "default-flow/unknown", "default-flow/"}; !slices.Equal(fair, want) {
		t.Errorf("fairness/objective %v", fair)
	}
	// Objectives can change while serving.
	d.SetObjectives(requestcontrol.Objectives{"critical": 3})
	rt.Do(ctx, d, rt.Chat("m", "x", requestcontrol.HeaderObjective, "critical"), rt.Response{})
	if prio[len(prio)-1] != 3 {
		t.Errorf("after SetObjectives: %v", prio)
	}
}

func TestAdmissionUnderSaturation(t *testing.T) {
	det := &rt.Detector{}
	d := rt.NewDirector(t, rt.Config{
		Admission:  &requestcontrol.SaturationAdmitter{Detector: det},
		Objectives: requestcontrol.Objectives{"low": -5, "high": 5},
	})
	admitted := func(obj string) bool {
		return rt.Do(ctx, d, rt.Chat("m", "x", requestcontrol.HeaderObjective, obj), rt.Response{}).Rejection == nil
	}
	for _, c := range []struct {
		sat             float64
		low, none, high bool
	}{
		{0.2, true, true, true},
		{0.999, true, true, true},
		{1.0, false, true, true},
		{3.0, false, true, true},
	} {
		det.Set(c.sat)
		if got := [3]bool{admitted("low"), admitted(""), admitted("high")}; got != [3]bool{c.low, c.none, c.high} {
			t.Errorf("saturation %v: admitted low/none/high = %v", c.sat, got)
		}
	}
}

// TestCountersReleasedOnEveryPath: whatever ends a request, every plugin
// that counted it in PreRequest sees it complete, and the in-flight counters
// of the producer and the concurrency detector return to zero.
func TestCountersReleasedOnEveryPath(t *testing.T) {
	sse := rt.SSE(`{"model":"m","choices":[{"delta":{"content":"hi"}}]}`, `{"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`)
	upstreamDown := errors.New("upstream reset")
	cases := []struct {
		name    string
		panicAt string
		resp    rt.Response
		// rejected: the request fails before forwarding (500).
		rejected bool
		wantErr  error
	}{
		{name: "completed", resp: rt.Response{Stream: true, Chunks: rt.Split(sse, 10)}},
		{name: "completed, no body", resp: rt.Response{}},
		{name: "upstream error", resp: rt.Response{Stream: true, Chunks: rt.Split(sse, 10)[:2], Err: upstreamDown}, wantErr: upstreamDown},
		{name: "client cancel", resp: rt.Response{Stream: true, Chunks: rt.Split(sse, 10), CancelAfter: 2}, wantErr: context.Canceled},
		{name: "adapter closes early", resp: rt.Response{Stream: true, Chunks: rt.Split(sse, 10)[:1], Err: requestcontrol.ErrIncomplete}, wantErr: requestcontrol.ErrIncomplete},
		{name: "panic in pre-request", panicAt: "prerequest", rejected: true},
		{name: "panic in response header", panicAt: "header", resp: rt.Response{Stream: true, Chunks: rt.Split(sse, 10)}},
		{name: "panic in chunk", panicAt: "chunk", resp: rt.Response{Stream: true, Chunks: rt.Split(sse, 10)}},
		{name: "panic in complete", panicAt: "complete", resp: rt.Response{Stream: true, Chunks: rt.Split(sse, 10)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &rt.Recorder{}
			prod := &inflight.Producer{}
			prod.SetDefaults()
			conc := &saturation.Concurrency{}
			conc.SetDefaults()
			d := rt.NewDirector(t, rt.Config{Plugins: []any{
				rt.Named{Name: "inflight", Plugin: prod}, rec, rt.Panic{Stage: c.panicAt},
				rt.Named{Name: "concurrency", Plugin: conc}}})
			res := rt.Do(ctx, d, rt.Chat("m", "x"), c.resp)
			if c.rejected {
				wantRejection(t, res, 500, "", "panicked")
			} else if res.Rejection != nil {
				t.Fatal(res.Rejection)
			}
			if rec.Open() != 0 {
				t.Errorf("open requests: %d", rec.Open())
			}
			_, _, _, completes := rec.Counts()
			if completes != 1 {
				t.Errorf("completions %d, want exactly 1", completes)
			}
			_, _, err := rec.Last()
			if c.wantErr != nil && !errors.Is(err, c.wantErr) || c.wantErr == nil && !c.rejected && err != nil {
				t.Errorf("completion error %v, want %v", err, c.wantErr)
			}
			for _, e := range rt.Endpoints(3) {
				if r, tok := prod.Tracker().InFlight(e); r != 0 || tok != 0 {
					t.Errorf("producer in flight on %s: %d requests, %d tokens", e.Name, r, tok)
				}
				if r, _ := conc.Tracker().InFlight(e); r != 0 {
					t.Errorf("detector in flight on %s: %d", e.Name, r)
				}
			}
			if c.panicAt != "" && d.Stats().Panics == 0 {
				t.Error("panic not counted")
			}
		})
	}
}

// TestInFlightTokensReleasedOnFirstChunk: the producer counts the request's
// prompt tokens until the first chunk, the request until the end.
func TestInFlightTokensReleasedOnFirstChunk(t *testing.T) {
	prod := &inflight.Producer{}
	prod.SetDefaults()
	d := rt.NewDirector(t, rt.Config{Plugins: []any{prod}})
	x, err := d.HandleRequest(ctx, rt.Chat("m", strings.Repeat("word ", 100)))
	if err != nil {
		t.Fatal(err)
	}
	ep := rt.Endpoints(1)[0]
	if r, tok := prod.Tracker().InFlight(ep); r != 1 || tok != int64(x.Request.Body.TokenEstimate()) || tok == 0 {
		t.Errorf("after pick: %d requests, %d tokens", r, tok)
	}
	x.ResponseHeaders("", 200, http.Header{"Content-Type": {"text/event-stream"}})
	x.ResponseBody([]byte("data: {}\n\n"), false)
	if r, tok := prod.Tracker().InFlight(ep); r != 1 || tok != 0 {
		t.Errorf("after first chunk: %d requests, %d tokens", r, tok)
	}
	x.ResponseBody(nil, true)
	if r, _ := prod.Tracker().InFlight(ep); r != 0 {
		t.Errorf("after end: %d requests", r)
	}
}

func TestUsage(t *testing.T) {
	rec := &rt.Recorder{}
	d := rt.NewDirector(t, rt.Config{Plugins: []any{rec}})
	cases := []struct {
		name string
		in   *requestcontrol.Inbound
		resp rt.Response
		want string
	}{
		{"openai stream with include_usage", rt.Chat("m", "x"), rt.Response{Stream: true, Chunks: rt.Split(rt.SSE(
			`{"choices":[{"delta":{"content":"a"}}],"usage":null}`,
			`{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":8}}}`), 5)},
			"{PromptTokens:10 CompletionTokens:2 CachedTokens:8}"},
		{"openai body", rt.Chat("m", "x"), rt.Response{Chunks: rt.Split(`{"id":"c","usage":{"prompt_tokens":4,"completion_tokens":6}}`, 9)},
			"{PromptTokens:4 CompletionTokens:6 CachedTokens:0}"},
		{"anthropic split usage", rt.Request("/v1/messages", `{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":"x"}]}`),
			rt.Response{Stream: true, Chunks: rt.Split("event: message_start\n"+
				`data: {"type":"message_start","message":{"model":"claude","usage":{"input_tokens":25,"cache_read_input_tokens":100,"output_tokens":1}}}`+"\n\n"+
				"event: message_delta\n"+`data: {"type":"message_delta","delta":{},"usage":{"output_tokens":15}}`+"\n\n"+
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", 7)},
			"{PromptTokens:125 CompletionTokens:15 CachedTokens:100}"},
	}
	for _, c := range cases {
		res := rt.Do(ctx, d, c.in, c.resp)
		if res.Rejection != nil {
			t.Fatalf("%s: %v", c.name, res.Rejection)
		}
		_, u, err := rec.Last()
		if got := fmt.Sprintf("%+v", u); got != c.want || err != nil {
			t.Errorf("%s: usage %s (%v), want %s", c.name, got, err, c.want)
		}
	}
}

// TestResponseTooLargePassesThrough: a non-streaming response over the
// buffer limit is forwarded as is, without rewrite, and counted.
func TestResponseTooLargePassesThrough(t *testing.T) {
	d := rt.NewDirector(t, rt.Config{
		Limits:   requestcontrol.Limits{MaxResponseBytes: 64},
		Rewrites: []requestcontrol.ModelRewrite{{Rules: []requestcontrol.RewriteRule{{Targets: []requestcontrol.RewriteTarget{{Model: "v2"}}}}}},
	})
	body := `{"model":"v2","data":"` + strings.Repeat("x", 200) + `"}`
	res := rt.Do(ctx, d, rt.Chat("m", "x"), rt.Response{Chunks: rt.Split(body, 50)})
	if string(res.Body) != body {
		t.Errorf("body changed: %s", res.Body)
	}
	if len(res.Writes[0]) != 0 || len(res.Writes[1]) == 0 {
		t.Errorf("writes %q: buffered until the limit, then passed through", res.Writes)
	}
	if d.Stats().ResponsesTooLarge != 1 {
		t.Errorf("stats %+v", d.Stats())
	}
}

func TestLongStreamLinePassesThrough(t *testing.T) {
	d := rt.NewDirector(t, rt.Config{
		Limits:   requestcontrol.Limits{MaxLineBytes: 32},
		Rewrites: []requestcontrol.ModelRewrite{{Rules: []requestcontrol.RewriteRule{{Targets: []requestcontrol.RewriteTarget{{Model: "v2"}}}}}},
	})
	long := `data: {"model":"v2","text":"` + strings.Repeat("y", 100) + `"}` + "\n\n"
	short := `data: {"model":"v2"}` + "\n\n"
	res := rt.Do(ctx, d, rt.Chat("m", "x"), rt.Response{Stream: true, Chunks: rt.Split(long+short, 20)})
	if want := long + `data: {"model":"m"}` + "\n\n"; string(res.Body) != want {
		t.Errorf("body:\n%s\nwant\n%s", res.Body, want)
	}
}

func TestUseWiresEveryExtensionPoint(t *testing.T) {
	d := &requestcontrol.Director{}
	d.Use("p", rt.Panic{})
	if len(d.Producers) != 1 || len(d.Admitters) != 1 || len(d.PreRequests) != 1 ||
		len(d.ResponseHeaders) != 1 || len(d.ResponseChunks) != 1 || len(d.ResponseCompletes) != 1 {
		t.Errorf("director %+v", d)
	}
	if d.Producers[0].Name != "p" {
		t.Error(d.Producers[0].Name)
	}
}

func TestForwardedHeadersAndBody(t *testing.T) {
	d := rt.NewDirector(t, rt.Config{Plugins: []any{requestcontrol.PreRequestFunc(
		func(_ context.Context, req *scheduling.Request, _ *scheduling.Result) { req.SetHeader("x-extra", "1") })}})
	in := rt.Chat("m", "x")
	res := rt.Do(ctx, d, in, rt.Response{})
	x := res.Exchange
	if !bytes.Equal(x.Body, in.Body) || x.Headers["content-length"] != "" {
		t.Errorf("unchanged body must be forwarded as is: %s %v", x.Body, x.Headers)
	}
	if x.Headers["x-extra"] != "1" || x.Headers[requestcontrol.HeaderDestination] == "" {
		t.Errorf("headers %v", x.Headers)
	}
}
