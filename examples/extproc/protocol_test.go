package extproc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/examples/extproc"
	"github.com/eppkit/eppkit/examples/extproc/envoytest"
	"github.com/eppkit/eppkit/examples/fakeserver"
	"github.com/eppkit/eppkit/requestcontrol"
	rt "github.com/eppkit/eppkit/requestcontrol/requestcontroltest"
)

func chatBody(model, text string, extra ...string) []byte {
	b, _ := json.Marshal(map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": text}}})
	s := string(b)
	for _, e := range extra {
		s = s[:len(s)-1] + "," + e + "}"
	}
	return []byte(s)
}

func start(t *testing.T, e *env, req *envoytest.Request) *envoytest.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	st, err := e.client.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Abort)
	return st
}

func set(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(v)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
}

func metadata(t *testing.T, dest string) *structpb.Struct {
	md, err := structpb.NewStruct(map[string]any{"envoy.lb": map[string]any{"x-gateway-destination-endpoint": dest}})
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// TestRequestPathExact checks every answer of the request path byte for
// byte: the headers response (mutation, clear_route_cache), the metadata,
// and the body chunks, for an 8 KB body sent in two chunks with a model
// rewrite and an untrusted header the client tried to set.
func TestRequestPathExact(t *testing.T) {
	e := newEnv(t, envConfig{fake: []fakeserver.Config{{}, {}, {}}})
	body := chatBody("my-alias", strings.Repeat("eight kilobytes of prompt ", 315))
	st := start(t, e, &envoytest.Request{Path: "/v1/chat/completions", Body: body, Chunks: 2, Headers: envoytest.H(
		requestcontrol.HeaderModelRewrite, "fake-model",
		requestcontrol.HeaderDestination, "10.6.6.6:80",
		requestcontrol.HeaderPrefiller, "10.6.6.6:81",
	)})
	dests := st.Destinations()
	if len(dests) != 3 {
		t.Fatalf("destinations %v, want the pick and two fallbacks", dests)
	}
	dest := strings.Join(dests, ",")
	want := bytes.Replace(body, []byte(`"my-alias"`), []byte(`"fake-model"`), 1)
	wantHeaders := &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{
		ClearRouteCache: true,
		HeaderMutation: &extprocv3.HeaderMutation{
			SetHeaders:    []*corev3.HeaderValueOption{set("content-length", fmt.Sprint(len(want))), set("x-gateway-destination-endpoint", dest)},
			RemoveHeaders: []string{requestcontrol.HeaderPrefiller},
		},
	}}
	if !proto.Equal(st.HeadersResponse, wantHeaders) {
		t.Errorf("headers response\n%v\nwant\n%v", st.HeadersResponse, wantHeaders)
	}
	if !proto.Equal(st.DynamicMetadata, metadata(t, dest)) {
		t.Errorf("dynamic metadata %v", st.DynamicMetadata)
	}
	if len(st.BodyChunks) != 1 || !bytes.Equal(st.Body, want) {
		t.Errorf("body in %d chunks:\n%s\nwant\n%s", len(st.BodyChunks), st.Body, want)
	}
	if st.Headers[requestcontrol.HeaderPrefiller] != "" || st.Headers["content-length"] != fmt.Sprint(len(want)) {
		t.Errorf("upstream headers %v", st.Headers)
	}
	if err := st.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	e.settled() // closing before a response releases the request
}

// TestLargeBodyChunks: a body over 64 KiB goes back in 64 KiB chunks, the
// last one marked end of stream; the request trailers are answered after
// the body.
func TestLargeBodyChunks(t *testing.T) {
	e := newEnv(t, envConfig{fake: []fakeserver.Config{{}}})
	body := chatBody("fake-model", strings.Repeat("x", 200<<10))
	st := start(t, e, &envoytest.Request{Path: "/v1/chat/completions", Body: body, Chunks: 7,
		Trailers: envoytest.H("x-checksum", "abc")})
	if len(st.BodyChunks) != 4 || len(st.BodyChunks[0]) != 64<<10 || !bytes.Equal(st.Body, body) || !st.TrailersAnswered {
		t.Errorf("%d chunks of %d bytes, trailers answered %v", len(st.BodyChunks), len(st.Body), st.TrailersAnswered)
	}
	a, err := st.Respond(&envoytest.Response{Status: 200, Headers: envoytest.H("content-type", "application/json"),
		Chunks:   [][]byte{[]byte(`{"model":"fake-model",`), []byte(`"usage":{"prompt_tokens":7}}`)},
		Trailers: envoytest.H("grpc-status", "0")})
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Body) != `{"model":"fake-model","usage":{"prompt_tokens":7}}` || !a.TrailersAnswered || len(a.Chunks) != 1 {
		t.Errorf("response %q in %d chunks, trailers answered %v", a.Body, len(a.Chunks), a.TrailersAnswered)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if m := e.rec.wait(t, 1); m.Status != 200 || m.Usage.PromptTokens != 7 || m.RequestBytes != int64(len(body)) {
		t.Errorf("metrics %+v", m)
	}
	e.settled()
}

// TestHeadersOnly: a request without a body is decided at its headers; an
// empty body ending the stream gets one empty final chunk.
func TestHeadersOnly(t *testing.T) {
	e := newEnv(t, envConfig{fake: []fakeserver.Config{{}}})
	st := start(t, e, &envoytest.Request{Method: "GET", Path: "/v1/models"})
	if st.HeadersResponse == nil || len(st.Destinations()) != 1 || len(st.BodyChunks) != 0 {
		t.Fatalf("headers-only request: %v, chunks %d", st.HeadersResponse, len(st.BodyChunks))
	}
	for _, o := range st.HeadersResponse.GetResponse().GetHeaderMutation().GetSetHeaders() {
		if o.GetHeader().GetKey() == "content-length" {
			t.Errorf("content-length set on a request without a body")
		}
	}
	a, err := st.Respond(&envoytest.Response{Status: 200, Headers: envoytest.H("content-type", "application/json")})
	if err != nil || a.Status != 200 {
		t.Fatalf("%v %v", a, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// Headers without end_of_stream, then one empty chunk with it: the
	// body goes back as one empty final chunk.
	st2 := start(t, e, &envoytest.Request{Path: "/custom/predict", Body: []byte{}})
	if len(st2.BodyChunks) != 1 || len(st2.BodyChunks[0]) != 0 {
		t.Errorf("empty body: %d chunks %q", len(st2.BodyChunks), st2.BodyChunks)
	}
	st2.Abort()
	// An empty body ended by trailers: one empty chunk, then the trailers.
	st3 := start(t, e, &envoytest.Request{Path: "/custom/predict", Body: []byte{}, Trailers: envoytest.H("x-t", "1")})
	if len(st3.BodyChunks) != 1 || len(st3.BodyChunks[0]) != 0 || !st3.TrailersAnswered {
		t.Errorf("empty body with trailers: %d chunks %q, trailers answered %v", len(st3.BodyChunks), st3.BodyChunks, st3.TrailersAnswered)
	}
	st3.Abort()
	e.settled()
}

// TestRejectionsImmediate maps pipeline rejections to immediate responses.
func TestRejectionsImmediate(t *testing.T) {
	e := newEnv(t, envConfig{fake: []fakeserver.Config{{}}, before: func(r *config.Runtime) {
		r.Director.Limits.MaxRequestBytes = 1 << 20
	}})
	for _, c := range []struct {
		name   string
		req    *envoytest.Request
		status int
		reason string
		msg    string
	}{
		{"bad JSON", &envoytest.Request{Path: "/v1/chat/completions", Body: []byte(`{"model":`)}, 400, "", "invalid JSON"},
		{"subset matches nothing", &envoytest.Request{Path: "/v1/chat/completions", Body: chatBody("m", "x"), Subset: []string{"10.1.2.3:8000"}},
			503, requestcontrol.ReasonNoEndpoints, "subset hint"},
		{"too large", &envoytest.Request{Path: "/v1/chat/completions", Body: chatBody("m", strings.Repeat("x", 2<<20)), Chunks: 8},
			413, "", "larger than the limit of 1048576 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := start(t, e, c.req)
			im := st.Immediate
			if im == nil {
				t.Fatalf("no immediate response: %v", st.HeadersResponse)
			}
			hs := map[string]string{}
			for _, o := range im.GetHeaders().GetSetHeaders() {
				hs[o.GetHeader().GetKey()] = string(o.GetHeader().GetRawValue())
			}
			if int(im.GetStatus().GetCode()) != c.status || hs[requestcontrol.HeaderDroppedReason] != c.reason ||
				hs["content-type"] != "application/json" || !strings.Contains(string(im.GetBody()), c.msg) {
				t.Errorf("immediate response %v", im)
			}
			if err := st.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
	// The subset hint narrows the pick when it matches.
	st := start(t, e, &envoytest.Request{Path: "/v1/chat/completions", Body: chatBody("m", "x"), Subset: []string{e.fakes[0].Addr()}})
	if d := st.Destinations(); len(d) != 1 || d[0] != e.fakes[0].Addr() {
		t.Errorf("destinations %v", d)
	}
	st.Abort()
	e.settled()
}

// TestResponsePath: a non-streaming JSON body is held until its end and
// comes back whole with the model name restored and content-length
// removed; response headers added by a hook come back as a mutation.
func TestResponsePath(t *testing.T) {
	hook := &rt.Recorder{}
	e := newEnv(t, envConfig{fake: []fakeserver.Config{{}, {}}, before: func(r *config.Runtime) {
		r.Director.Use("recorder", hook)
	}, server: func(s *extproc.Server) { s.ServedEndpointMetadata = true }})
	st := start(t, e, &envoytest.Request{Path: "/v1/completions", Body: []byte(`{"model":"alias","prompt":"hi"}`),
		Headers: envoytest.H(requestcontrol.HeaderModelRewrite, "fake-model")})
	served := e.fakes[0].Addr()
	if st.Destinations()[0] == served {
		served = e.fakes[1].Addr() // a fallback served
	}
	a, err := st.ResponseHeaders(&envoytest.Response{Status: 200, Served: served, Chunks: [][]byte{nil},
		Headers: envoytest.H("content-type", "application/json", "content-length", "52")})
	if err != nil {
		t.Fatal(err)
	}
	mut := a.HeadersResponse.GetResponse().GetHeaderMutation()
	if len(mut.GetRemoveHeaders()) != 1 || mut.GetRemoveHeaders()[0] != "content-length" || len(mut.GetSetHeaders()) != 0 {
		t.Errorf("response header mutation %v", mut)
	}
	body := `{"model":"fake-model","usage":{"prompt_tokens":2}}`
	for i, part := range []string{body[:10], body[10:30], body[30:]} {
		if err := st.SendResponseChunk([]byte(part), i == 2); err != nil {
			t.Fatal(err)
		}
	}
	chunk, end, _, err := st.NextResponseChunk()
	if err != nil || !end || string(chunk) != `{"model":"alias","usage":{"prompt_tokens":2}}` {
		t.Fatalf("response chunk %q end %v: %v", chunk, end, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	ep, usage, cerr := hook.Last()
	if ep == nil || ep.HostPort() != served || usage.PromptTokens != 2 || cerr != nil {
		t.Errorf("hooks saw served %v usage %+v err %v; want %s", ep, usage, cerr, served)
	}
	e.settled()
}
