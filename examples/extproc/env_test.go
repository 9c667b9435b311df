package extproc_test

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/examples/extproc"
	"github.com/eppkit/eppkit/examples/extproc/envoytest"
	"github.com/eppkit/eppkit/examples/fakeserver"
	"github.com/eppkit/eppkit/examples/httpproxy"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/requestcontrol/producers/inflight"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testConfig: the default scorers, LoRA affinity and in-flight counts, two
// fallbacks per pick, and the passthrough parser for paths the OpenAI
// parser does not claim.
const testConfig = `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: prefix-cache-scorer
- type: lora-affinity-scorer
- type: active-request-scorer
- type: max-score-picker
  parameters:
    maxNumOfEndpoints: 3
- type: openai-parser
- type: passthrough-parser
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
    weight: 2
  - pluginRef: prefix-cache-scorer
    weight: 3
  - pluginRef: lora-affinity-scorer
    weight: 2
  - pluginRef: active-request-scorer
    weight: 1
  - pluginRef: max-score-picker
requestHandler:
  parsers:
  - pluginRef: openai-parser
  - pluginRef: passthrough-parser
`

// env is an ext-proc server in front of fake servers, with an Envoy-side
// client, all on 127.0.0.1.
type env struct {
	t      *testing.T
	fakes  []*fakeserver.Server
	rt     *config.Runtime
	srv    *extproc.Server
	addr   string
	client *envoytest.Client
	http   *http.Client
	rec    *recorder
	stop   context.CancelFunc
	served chan error
}

type envConfig struct {
	fake   []fakeserver.Config
	extra  []datalayer.Target
	server func(*extproc.Server)
	before func(*config.Runtime) // before serving
}

func newEnv(t *testing.T, ec envConfig) *env {
	t.Helper()
	e := &env{t: t, rec: &recorder{}}
	var targets []datalayer.Target
	for i, fc := range ec.fake {
		s, err := fakeserver.Start(fc, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		e.fakes = append(e.fakes, s)
		host, port, _ := net.SplitHostPort(s.Addr())
		p, _ := strconv.Atoi(port)
		targets = append(targets, datalayer.Target{Name: "fake-" + strconv.Itoa(i), Address: host, Port: p})
	}
	targets = append(targets, ec.extra...)
	cfg, err := config.Load([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = httpproxy.WithDiscovery(cfg, std.Registry(), httpproxy.Endpoints{Targets: targets}); err != nil {
		t.Fatal(err)
	}
	if e.rt, err = config.Build(context.Background(), cfg, std.Registry(), config.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.rt.Close() })
	if err := e.rt.DataLayer.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.rt.Director.SetObjectives(requestcontrol.Objectives{"batch": -1})
	if ec.before != nil {
		ec.before(e.rt)
	}
	e.srv = &extproc.Server{Director: e.rt.Director, Metrics: e.rec, DrainTimeout: 2 * time.Second}
	if ec.server != nil {
		ec.server(e.srv)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = lis.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	e.stop = cancel
	e.served = make(chan error, 1)
	go func() { e.served <- e.srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-e.served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	if e.client, err = envoytest.Dial(e.addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.client.Close() })
	e.http = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	t.Cleanup(e.http.CloseIdleConnections)
	e.waitFor("discovery", func() bool { return len(e.rt.DataLayer.Endpoints()) == len(targets) })
	e.waitFor("metrics", func() bool {
		n := 0
		for _, ep := range e.rt.DataLayer.Endpoints() {
			if ep.Metrics.Usable() {
				n++
			}
		}
		return n >= len(ec.fake)
	})
	return e
}

func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *env) inFlight() int64 {
	p, ok := e.rt.Plugin("inflight-load-producer")
	if !ok {
		e.t.Fatal("no inflight-load-producer")
	}
	var n int64
	for _, ep := range e.rt.DataLayer.Endpoints() {
		r, _ := p.(*inflight.Producer).Tracker().InFlight(ep)
		n += r
	}
	return n
}

// settled waits until the picker counts nothing in flight and no stream is
// open.
func (e *env) settled() {
	e.t.Helper()
	e.waitFor("in-flight release", func() bool { return e.inFlight() == 0 && e.srv.Streams() == 0 })
}

// do runs one request through the processor and the picked fake server.
func (e *env) do(req *envoytest.Request, onChunk func([]byte)) *envoytest.Answer {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := e.client.Do(ctx, req, e.http, onChunk)
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

// recorder keeps the request outcomes reported to Metrics.
type recorder struct {
	mu       sync.Mutex
	requests []requestcontrol.RequestMetrics
}

func (r *recorder) Request(m requestcontrol.RequestMetrics) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, m)
}

func (r *recorder) Stage(requestcontrol.Stage, time.Duration)       {}
func (r *recorder) Plugin(requestcontrol.PluginCall, time.Duration) {}
func (r *recorder) PrefixMatch(string, float64)                     {}
func (r *recorder) count() int                                      { r.mu.Lock(); defer r.mu.Unlock(); return len(r.requests) }
func (r *recorder) at(i int) requestcontrol.RequestMetrics {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[i]
}
func (r *recorder) wait(t *testing.T, n int) requestcontrol.RequestMetrics {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for r.count() < n {
		if time.Now().After(deadline) {
			t.Fatalf("request %d was not reported", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return r.at(n - 1)
}
