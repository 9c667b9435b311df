package httpproxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/examples/fakeserver"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/requestcontrol/producers/inflight"
)

// leakCheck fails the test when goroutines started during it are still
// running shortly after its cleanups. Register it first: cleanups run last
// registered first. (The tests of this package do not run in parallel.)
func leakCheck(t *testing.T) {
	before, _ := goroutines()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			n, stacks := goroutines()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%d goroutines left running (had %d):\n%s", n, before, stacks)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// goroutines counts the running goroutines, except the writer goroutine
// zmq4 v0.17.0 leaves behind for every closed PUB socket (its Close does
// not stop it).
func goroutines() (int, string) {
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	n := 0
	for _, g := range strings.Split(stacks, "\n\n") {
		if strings.TrimSpace(g) != "" && !strings.Contains(g, "zmq4.(*pubMWriter).run") {
			n++
		}
	}
	return n, stacks
}

// testConfig is the picker configuration of the end-to-end tests: the
// default scorers plus LoRA affinity and the picker's own in-flight count,
// and two fallbacks per pick.
const testConfig = header + `
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: prefix-cache-scorer
- type: lora-affinity-scorer
- type: active-request-scorer
- type: max-score-picker
  parameters:
    maxNumOfEndpoints: 3
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
`

// header starts every test configuration.
const header = "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\n"

// env is a proxy in front of fake servers, all on 127.0.0.1.
type env struct {
	t      *testing.T
	fakes  []*fakeserver.Server
	rt     *config.Runtime
	proxy  *Proxy
	url    string
	client *http.Client
	rec    *recorder
}

type envConfig struct {
	fake    []fakeserver.Config // one per server
	extra   []string            // more endpoints (host:port) that are not fake servers
	yaml    string
	proxy   func(*Proxy)
	timeout time.Duration // client timeout (default 10s)
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
		targets = append(targets, target("fake-"+strconv.Itoa(i), s.Addr()))
	}
	for i, hp := range ec.extra {
		targets = append(targets, target("extra-"+strconv.Itoa(i), hp))
	}
	yaml := ec.yaml
	if yaml == "" {
		yaml = testConfig
	}
	cfg, err := config.Load([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = WithDiscovery(cfg, std.Registry(), Endpoints{Targets: targets})
	if err != nil {
		t.Fatal(err)
	}
	e.rt, err = config.Build(context.Background(), cfg, std.Registry(), config.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.rt.Close() })
	if err := e.rt.DataLayer.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.rt.Director.SetObjectives(requestcontrol.Objectives{"batch": -1, "interactive": 10})
	e.proxy = &Proxy{Director: e.rt.Director, Metrics: e.rec, Transport: NewTransport(Timeouts{})}
	if ec.proxy != nil {
		ec.proxy(e.proxy)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer("", e.proxy)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if tr, ok := e.proxy.Transport.(*http.Transport); ok {
			tr.CloseIdleConnections()
		}
	})
	e.url = "http://" + ln.Addr().String()
	timeout := ec.timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	e.client = &http.Client{Timeout: timeout, Transport: &http.Transport{}}
	t.Cleanup(e.client.CloseIdleConnections)
	e.waitFor("discovery", func() bool { return len(e.rt.DataLayer.Endpoints()) == len(targets) })
	e.waitMetrics(len(ec.fake))
	return e
}

func target(name, hostPort string) datalayer.Target {
	host, port, _ := net.SplitHostPort(hostPort)
	p, _ := strconv.Atoi(port)
	return datalayer.Target{Name: name, Address: host, Port: p}
}

// waitMetrics waits until n endpoints have usable metrics.
func (e *env) waitMetrics(n int) {
	e.waitFor("metrics of "+strconv.Itoa(n)+" endpoints", func() bool {
		usable := 0
		for _, ep := range e.rt.DataLayer.Endpoints() {
			if ep.Metrics.Usable() {
				usable++
			}
		}
		return usable >= n
	})
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

// post sends a request through the proxy and reads the whole response.
func (e *env) post(path, body string, headers ...string) (*http.Response, string) {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, string(b)
}

// inFlight returns the picker's in-flight request count over every endpoint
// (0 when the configuration does not count them).
func (e *env) inFlight() int64 {
	p, ok := e.rt.Plugin("inflight-load-producer")
	if !ok {
		return 0
	}
	var n int64
	for _, ep := range e.rt.DataLayer.Endpoints() {
		r, _ := p.(*inflight.Producer).Tracker().InFlight(ep)
		n += r
	}
	return n
}

// settled waits until no request is in flight in the picker or running in
// a fake server.
func (e *env) settled() {
	e.t.Helper()
	e.waitFor("in-flight requests to be released", func() bool {
		if e.inFlight() != 0 {
			return false
		}
		for _, f := range e.fakes {
			if st := f.Stats(); st.Running+st.Waiting != 0 {
				return false
			}
		}
		return true
	})
}

// recorder is a requestcontrol.Metrics keeping the request outcomes.
type recorder struct {
	mu       sync.Mutex
	requests []requestcontrol.RequestMetrics
	stages   map[requestcontrol.Stage]int
}

func (r *recorder) Request(m requestcontrol.RequestMetrics) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, m)
}

func (r *recorder) Stage(s requestcontrol.Stage, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stages == nil {
		r.stages = map[requestcontrol.Stage]int{}
	}
	r.stages[s]++
}

func (r *recorder) Plugin(requestcontrol.PluginCall, time.Duration) {}

func (r *recorder) PrefixMatch(string, float64) {}

// last returns the last request outcome, waiting briefly for it (the
// handler reports after the client has its response).
func (r *recorder) last(t *testing.T, n int) requestcontrol.RequestMetrics {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		if len(r.requests) >= n {
			m := r.requests[n-1]
			r.mu.Unlock()
			return m
		}
		r.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("request %d was not reported", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
