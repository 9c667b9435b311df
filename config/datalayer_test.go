package config_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/std"
)

func TestDefaultDataLayer(t *testing.T) {
	rt, err := config.Build(context.Background(), nil, std.Registry(), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	srcs := rt.DataLayer.Sources()
	if len(srcs) != 1 || srcs[0].Name != "metrics-data-source" || len(srcs[0].Extractors) != 1 || srcs[0].Extractors[0].Name != "core-metrics-extractor" {
		t.Errorf("sources %+v", srcs)
	}
	if rt.DataLayer.Discovery() != nil || rt.Director.Pool != nil {
		t.Error("no discovery is configured: the pool is the caller's")
	}
}

// listener is a test plugin keeping per-endpoint state.
type listener struct {
	mu    sync.Mutex
	added []string
}

func (l *listener) EndpointAdded(e *datalayer.Endpoint) {
	l.mu.Lock()
	l.added = append(l.added, e.Name)
	l.mu.Unlock()
}
func (l *listener) EndpointRemoved(*datalayer.Endpoint) {}

// TestDataLayerEndToEnd: file discovery and metrics scraping configured in
// YAML; after Start, the Director's pool holds the endpoints with metrics and
// listeners heard of them.
func TestDataLayerEndToEnd(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("vllm:num_requests_waiting 4\nvllm:num_requests_running 2\nvllm:kv_cache_usage_perc 0.5\n"))
	}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	file := filepath.Join(t.TempDir(), "endpoints.yaml")
	os.WriteFile(file, []byte("endpoints:\n- {name: vllm-0, address: "+host+", port: "+port+"}\n"), 0o644)

	reg := testRegistry()
	plugins.Register[*listener](reg, "test-listener")
	rt, err := config.Build(context.Background(), load(t, header+`plugins:
- type: queue-scorer
- type: test-listener
- name: scrape
  type: metrics-data-source
  parameters: {interval: 10ms}
- name: core
  type: core-metrics-extractor
- name: files
  type: file-discovery
  parameters: {path: `+file+`}
dataLayer:
  sources:
  - pluginRef: scrape
    extractors: [{pluginRef: core}]
  discovery: {pluginRef: files}
`), reg, config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if rt.Director.Pool == nil {
		t.Fatal("the data layer is not the Director's pool")
	}
	if err := rt.DataLayer.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		eps := rt.Director.Pool.Endpoints()
		if len(eps) == 1 && eps[0].Metrics.Usable() {
			if eps[0].Metrics.Waiting != 4 || eps[0].HostPort() != host+":"+port {
				t.Errorf("endpoint %+v", eps[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no scraped endpoint: %+v", eps)
		}
		time.Sleep(5 * time.Millisecond)
	}
	p, _ := rt.Plugin("test-listener")
	l := p.(*listener)
	l.mu.Lock()
	if strings.Join(l.added, ",") != "vllm-0" {
		t.Errorf("listener heard %v", l.added)
	}
	l.mu.Unlock()
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDataLayerBadInput(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"discovery is not a discovery source", `plugins: [{type: queue-scorer}]
dataLayer: {discovery: {pluginRef: queue-scorer}}
`, `dataLayer.discovery.pluginRef: plugin "queue-scorer" (type queue-scorer) is not a discovery source (line 4)`},
		{"source is not a data source", `plugins: [{type: queue-scorer}, {type: core-metrics-extractor}]
dataLayer:
  sources:
  - pluginRef: queue-scorer
    extractors: [{pluginRef: core-metrics-extractor}]
`, `dataLayer.sources[0].pluginRef: plugin "queue-scorer" (type queue-scorer) is not a data source (line 6)`},
		{"extractor is not an extractor", `plugins: [{type: queue-scorer}, {type: metrics-data-source}]
dataLayer:
  sources:
  - pluginRef: metrics-data-source
    extractors: [{pluginRef: queue-scorer}]
`, `dataLayer.sources[0].extractors[0].pluginRef: plugin "queue-scorer" (type queue-scorer) is not an extractor`},
		{"extractor of another source's data", `plugins: [{type: queue-scorer}, {type: metrics-data-source}, {type: models-data-extractor}]
dataLayer:
  sources:
  - pluginRef: metrics-data-source
    extractors: [{pluginRef: models-data-extractor}]
`, `dataLayer: datalayer: data source "metrics-data-source": extractor "models-data-extractor" reads []models.Model, but the source produces metrics.Families`},
		{"bad discovery file", `plugins: [{type: queue-scorer}, {name: f, type: file-discovery, parameters: {path: /no/such/endpoints.yaml}}]
dataLayer: {discovery: {pluginRef: f}}
`, `plugin "f" (type file-discovery): init: file-discovery: /no/such/endpoints.yaml: the file is missing`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Build(context.Background(), load(t, header+tt.in), std.Registry(), config.Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v\nwant %s", err, tt.want)
			}
		})
	}
	if _, err := config.Build(context.Background(), nil, std.Registry(), config.Options{Pool: datalayer.Pool{TargetPorts: []int{0}}}); err == nil {
		t.Error("an invalid pool was accepted")
	}
}
