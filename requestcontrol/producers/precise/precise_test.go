package precise_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/requestcontrol/producers/precise"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/schedulingtest"
)

var ctx = context.Background()

// build creates the producer as a configuration would and returns it with
// its clock.
func build(t *testing.T, params string) (*precise.Producer, *pluginstest.Clock) {
	t.Helper()
	v, err := std.Registry().Build(precise.TypeName, precise.TypeName, []byte(params))
	if err != nil {
		t.Fatal(err)
	}
	p := v.(*precise.Producer)
	deps := pluginstest.Deps(t)
	deps.Name = precise.TypeName
	if err := p.Init(ctx, deps); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, deps.Clock.(*pluginstest.Clock)
}

func tokens(start, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(start + 7*i)
	}
	return out
}

// stored is a BlockStored of blocks [from, to) of toks with hashes salted by
// seed (an engine's hash seed).
func stored(seed uint64, toks []uint32, from, to int, medium string) kvindex.Event {
	ev := kvindex.Event{Kind: kvindex.BlockStored, TokenIDs: toks[16*from : 16*to], BlockSize: 16, Medium: medium}
	for i := from; i < to; i++ {
		ev.BlockHashes = append(ev.BlockHashes, seed<<32|uint64(i+1))
	}
	if from > 0 {
		ev.ParentHash, ev.HasParent = seed<<32|uint64(from), true
	}
	return ev
}

func apply(p *precise.Producer, endpoint string, evs ...kvindex.Event) {
	p.Index().Apply(endpoint, &kvindex.Batch{Model: "m", Events: evs})
}

func request(toks []uint32) *scheduling.Request {
	return schedulingtest.Req("m").Body(&parsers.Body{Model: "m", TokenIDs: toks}).Build()
}

func produce(t *testing.T, p *precise.Producer, req *scheduling.Request, eps []*scheduling.Endpoint) *scheduling.PrefixMatch {
	t.Helper()
	if err := p.Produce(ctx, req, eps); err != nil {
		t.Fatal(err)
	}
	m, ok := plugins.Get(&req.Data, scheduling.PrefixMatchKey(precise.TypeName))
	if !ok {
		t.Fatal("no prefix match")
	}
	return m
}

func near(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if d := a[i] - b[i]; d > 1e-9 || d < -1e-9 {
			return false
		}
	}
	return true
}

func TestProduceFromTokenIDs(t *testing.T) {
	p, _ := build(t, "")
	eps := schedulingtest.Eps(schedulingtest.Ep("a"), schedulingtest.Ep("b"), schedulingtest.Ep("c"))
	toks := tokens(1, 16*4+3)
	apply(p, eps[0].HostPort(), stored(1, toks, 0, 4, "GPU"))
	apply(p, eps[1].HostPort(), stored(2, toks, 0, 2, "GPU"), stored(2, toks, 2, 3, "CPU"))
	m := produce(t, p, request(toks), eps)
	if m.TotalBlocks != 4 || m.BlockTokens != 16 || len(m.Blocks) != 4 || !near(m.Matched, []float64{4, 2.8, 0}) {
		t.Fatalf("match %+v", m)
	}

	// prefix-cache-scorer reads it when pointed at the precise producer.
	sc := pluginstest.Build[scheduling.Scorer](t, std.Registry(), "prefix-cache-scorer",
		`{"prefixMatchInfoProducerName": "precise-prefix-cache-producer"}`)
	req := request(toks)
	produce(t, p, req, eps)
	scores := make([]float64, len(eps))
	sc.Score(ctx, req, eps, scores)
	if !near(scores, []float64{1, 0.7, 0}) {
		t.Fatalf("scores %v", scores)
	}
}

func TestNoTokensMeansNoData(t *testing.T) {
	p, _ := build(t, "")
	eps := schedulingtest.Eps(schedulingtest.Ep("a"))
	req := schedulingtest.Req("m").Body(&parsers.Body{Model: "m", Prompt: "hello"}).Build()
	err := p.Produce(ctx, req, eps)
	if !errors.Is(err, precise.ErrNoTokens) || !strings.Contains(err.Error(), "render is disabled") {
		t.Fatalf("err %v", err)
	}
	if _, ok := plugins.Get(&req.Data, scheduling.PrefixMatchKey(precise.TypeName)); ok {
		t.Fatal("a prefix match was written without token ids")
	}
}

func TestTokenizer(t *testing.T) {
	p, _ := build(t, "")
	toks := tokens(5, 32)
	var gotModel string
	p.Tokenizer = precise.TokenizerFunc(func(_ context.Context, model string, b *parsers.Body) ([]uint32, error) {
		gotModel = model
		if b.Prompt == "fail" {
			return nil, errors.New("boom")
		}
		return toks, nil
	})
	eps := schedulingtest.Eps(schedulingtest.Ep("a"))
	apply(p, eps[0].HostPort(), stored(1, toks, 0, 2, "GPU"))
	req := schedulingtest.Req("m").Target("m").Body(&parsers.Body{Model: "alias", Prompt: "hi"}).Build()
	if m := produce(t, p, req, eps); !near(m.Matched, []float64{2}) || gotModel != "m" {
		t.Fatalf("match %+v, model %q", m, gotModel)
	}
	req = schedulingtest.Req("m").Body(&parsers.Body{Model: "m", Prompt: "fail"}).Build()
	if err := p.Produce(ctx, req, eps); !errors.Is(err, precise.ErrNoTokens) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err %v", err)
	}
}

func hostPort(t *testing.T, url string) (string, int) {
	h, ps, err := net.SplitHostPort(strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(ps)
	return h, port
}

func TestRenderEndpoints(t *testing.T) {
	chatToks, complToks := tokens(100, 32), tokens(200, 16)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body) //nolint:errcheck // test
		switch {
		case body["slow"] != nil:
			time.Sleep(300 * time.Millisecond)
		case body["fail"] != nil:
			http.Error(w, "no", http.StatusInternalServerError)
		case r.URL.Path == precise.ChatRenderPath: // newer vLLM
			json.NewEncoder(w).Encode(map[string]any{"request_id": "x", "token_ids": chatToks}) //nolint:errcheck // test
		case r.URL.Path == precise.CompletionRenderPath: // older: [conversation, [engine prompts]]
			json.NewEncoder(w).Encode([]any{[]any{}, []any{map[string]any{"prompt_token_ids": complToks}}}) //nolint:errcheck // test
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	p, _ := build(t, `{"render": {"enabled": true, "timeout": "100ms"}}`)
	host, port := hostPort(t, srv.URL)
	eps := schedulingtest.Eps(schedulingtest.Ep("a").Addr(host, port))
	apply(p, eps[0].HostPort(), stored(1, chatToks, 0, 2, "GPU"), stored(2, complToks, 0, 1, "GPU"))

	chat := func(raw string) *scheduling.Request {
		return schedulingtest.Req("m").Body(&parsers.Body{API: "chat/completions", Model: "m", Raw: []byte(raw)}).Build()
	}
	for range 3 { // rendered once, then cached
		if m := produce(t, p, chat(`{"model":"m","messages":[]}`), eps); !near(m.Matched, []float64{2}) {
			t.Fatalf("chat match %+v", m)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("%d render calls, want 1 (cached)", calls.Load())
	}
	compl := schedulingtest.Req("m").Body(&parsers.Body{API: "completions", Model: "m", Raw: []byte(`{"prompt":"x"}`)}).Build()
	if m := produce(t, p, compl, eps); !near(m.Matched, []float64{1}) {
		t.Fatalf("completions match %+v", m)
	}
	for _, raw := range []string{`{"slow":1}`, `{"fail":1}`} {
		if err := p.Produce(ctx, chat(raw), eps); !errors.Is(err, precise.ErrNoTokens) {
			t.Errorf("%s: err %v", raw, err)
		}
	}
	emb := schedulingtest.Req("m").Body(&parsers.Body{API: "embeddings", Model: "m", Raw: []byte(`{}`)}).Build()
	if err := p.Produce(ctx, emb, eps); !errors.Is(err, precise.ErrNoTokens) {
		t.Errorf("embeddings: err %v", err)
	}
}

func TestSpeculativeIndexing(t *testing.T) {
	p, clock := build(t, `{"speculativeIndexing": true, "speculativeTTL": "2s"}`)
	eps := schedulingtest.Eps(schedulingtest.Ep("a"), schedulingtest.Ep("b"))
	toks := tokens(9, 16*3)
	req := request(toks)
	if m := produce(t, p, req, eps); !m.Cold() {
		t.Fatalf("cold request matched %v", m.Matched)
	}
	p.PreRequest(ctx, req, &scheduling.Result{Primary: "default",
		Profiles: []scheduling.ProfileResult{{Profile: "default", Endpoints: eps[1:]}}})
	// Until the engine reports, b is credited with the request's blocks.
	if m := produce(t, p, request(toks), eps); !near(m.Matched, []float64{0, 3}) {
		t.Fatalf("speculative match %v", m.Matched)
	}
	// The engine confirms part of it; the credit still covers the rest.
	apply(p, eps[1].HostPort(), stored(1, toks, 0, 2, "GPU"))
	clock.Advance(time.Second)
	if m := produce(t, p, request(toks), eps); !near(m.Matched, []float64{0, 3}) {
		t.Fatalf("match %v", m.Matched)
	}
	// After the TTL only what the engine reported counts.
	clock.Advance(2 * time.Second)
	if m := produce(t, p, request(toks), eps); !near(m.Matched, []float64{0, 2}) {
		t.Fatalf("match after TTL %v", m.Matched)
	}
}

func TestValidate(t *testing.T) {
	reg := std.Registry()
	for _, params := range []string{
		`{"blockSizeTokens": 0}`,
		`{"hashAlgorithm": "md5"}`,
		`{"maxPrefixBlocksToMatch": -1}`,
		`{"kvEventsConfig": {"mode": "multicast"}}`,
		`{"kvEventsConfig": {"mode": "bind", "zmqEndpoint": ""}}`,
		`{"kvEventsConfig": {"socketPort": 70000}}`,
		`{"kvEventsConfig": {"replayPort": -1}}`,
		`{"speculativeIndexing": true, "speculativeTTL": "0s"}`,
		`{"render": {"enabled": true, "scheme": "ftp"}}`,
	} {
		if _, err := reg.Build(precise.TypeName, "p", []byte(params)); err == nil {
			t.Errorf("%s: accepted", params)
		}
	}
}

func TestLifecycle(t *testing.T) {
	pluginstest.TestLifecycle(t, std.Registry(), precise.TypeName)
}

// TestEndToEndConnect follows an engine's real ZeroMQ publisher as the data
// layer adds and removes its endpoint.
func TestEndToEndConnect(t *testing.T) {
	pub := zmq4.NewPub(ctx)
	defer pub.Close()
	if err := pub.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	_, ps, _ := net.SplitHostPort(pub.Addr().String())
	p, _ := build(t, fmt.Sprintf(`{"kvEventsConfig": {"mode": "connect", "socketPort": %s}}`, ps))
	ep := datalayer.New("engine-0", "127.0.0.1", 8000, nil)
	eps := []*scheduling.Endpoint{ep}
	p.EndpointAdded(ep)

	toks := tokens(3, 32)
	ev := stored(1, toks, 0, 2, "GPU")
	payload, err := msgpack.Marshal([]any{1.0, []any{[]any{"BlockStored", ev.BlockHashes, nil, ev.TokenIDs, 16, nil, "GPU", nil}}, 0})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		msg := zmq4.NewMsgFrom([]byte("kv@127.0.0.1@m"), binary.BigEndian.AppendUint64(nil, 0), payload)
		if err := pub.Send(msg); err != nil {
			t.Fatal(err)
		}
		if m := produce(t, p, request(toks), eps); near(m.Matched, []float64{2}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the engine's events never arrived: %+v", p.Subscriber().Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.EndpointRemoved(ep)
	if m := produce(t, p, request(toks), eps); !m.Cold() {
		t.Fatalf("a removed endpoint still matches: %v", m.Matched)
	}
}
