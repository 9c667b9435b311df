package discovery_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/datalayer/discovery"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
)

func registry() *plugins.Registry {
	reg := plugins.NewRegistry()
	plugins.Register[*discovery.File](reg, "file-discovery")
	plugins.Register[*discovery.Static](reg, "static-discovery")
	return reg
}

func TestLifecycle(t *testing.T) {
	pluginstest.TestLifecycle(t, registry(), "file-discovery")
	pluginstest.TestLifecycle(t, registry(), "static-discovery")
}

const twoEndpoints = `endpoints:
- name: vllm-0
  address: 10.0.0.1
  port: 8000
  labels: {llm-d.ai/engine-type: vllm}
- name: vllm-1
  namespace: default
  address: "10.0.0.2"
  port: "8000"
`

func TestParseFile(t *testing.T) {
	ts, err := discovery.ParseFile([]byte(twoEndpoints))
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[1].Port != 8000 || ts[0].Labels["llm-d.ai/engine-type"] != "vllm" {
		t.Errorf("%+v", ts)
	}
	js, err := discovery.ParseFile([]byte(`{"endpoints": [{"name": "a", "address": "fd00::1", "port": 8000}]}`))
	if err != nil || len(js) != 1 || js[0].Address != "fd00::1" {
		t.Errorf("JSON: %+v %v", js, err)
	}
	for _, tt := range []struct{ in, want string }{
		{"", "empty file"},
		{"endpoints: [{name: a, address: 10.0.0.1, port: 8000, weight: 3}]", "field weight not found"},
		{"endpoints: [{name: a, address: vllm.local, port: 8000}]", "not an IP address"},
		{"endpoints: [{name: a, address: 10.0.0.1, port: 70000}]", "out of range"},
		{"endpoints: [{name: a, address: 10.0.0.1, port: eighty}]", `"eighty" is not a number`},
		{"endpoints: [{address: 10.0.0.1, port: 1}]", "missing name"},
		{"endpoints: [{name: a, address: 10.0.0.1, port: 1}, {name: a, address: 10.0.0.2, port: 1}]", `name "a" is also endpoints[0]`},
		{"endpoints: [{name: a", "invalid endpoints file"},
	} {
		if _, err := discovery.ParseFile([]byte(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got %v, want %q", tt.in, err, tt.want)
		}
	}
}

func build(t *testing.T, typ, params string) datalayer.Source {
	t.Helper()
	p, err := registry().Build(typ, typ, []byte(params))
	if err != nil {
		t.Fatal(err)
	}
	if err := plugins.Init(t.Context(), p, pluginstest.Deps(t)); err != nil {
		t.Fatal(err)
	}
	return p.(datalayer.Source)
}

func TestInitFailsOnBadFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("endpoints: [{name: a}]"), 0o644)
	big := filepath.Join(dir, "big.yaml")
	os.WriteFile(big, []byte(twoEndpoints+strings.Repeat("# padding\n", 200)), 0o644)
	for _, tt := range []struct{ params, want string }{
		{`{"path": "` + filepath.Join(dir, "missing.yaml") + `"}`, "the file is missing"},
		{`{"path": "` + bad + `"}`, "missing address"},
		{`{"path": "` + big + `", "maxBytes": 1024}`, "over the limit of 1024 bytes"},
	} {
		p, err := registry().Build("file-discovery", "f", []byte(tt.params))
		if err != nil {
			t.Fatal(err)
		}
		if err := plugins.Init(t.Context(), p, pluginstest.Deps(t)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.params, err, tt.want)
		}
	}
}

// run starts src feeding a store and returns it with the events its
// listener heard.
func run(t *testing.T, src datalayer.Source) (*datalayer.Store, *events) {
	t.Helper()
	ev := &events{}
	store, err := datalayer.NewStore(datalayer.Pool{}, ev)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- src.Run(ctx, func(ts []datalayer.Target) { store.Set(ts) })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	return store, ev
}

type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) EndpointAdded(ep *datalayer.Endpoint)   { e.add("+" + ep.Name + "@" + ep.HostPort()) }
func (e *events) EndpointRemoved(ep *datalayer.Endpoint) { e.add("-" + ep.Name + "@" + ep.HostPort()) }
func (e *events) add(s string) {
	e.mu.Lock()
	e.log = append(e.log, s)
	e.mu.Unlock()
}
func (e *events) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.log
	e.log = nil
	return out
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func endpointNames(s *datalayer.Store) string {
	var out []string
	for _, e := range s.Endpoints() {
		out = append(out, e.Name+"@"+e.HostPort()+labelString(e.Labels))
	}
	return strings.Join(out, " ")
}

func labelString(l map[string]string) string {
	if v, ok := l["tier"]; ok {
		return "/" + v
	}
	return ""
}

// writeAtomic replaces path as a ConfigMap update does: write a new file and
// rename it over the old one.
func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestFileReload: adds, updates and removes are applied; an invalid or
// vanished file keeps the last endpoints, is counted, and recovers.
func TestFileReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "endpoints.yaml")
	writeAtomic(t, path, twoEndpoints)
	f := build(t, "file-discovery", `{"path": "`+path+`", "watchFile": true, "watchInterval": "5ms"}`).(*discovery.File)
	store, ev := run(t, f)
	eventually(t, "initial load", func() bool { return len(store.Endpoints()) == 2 })
	if got := ev.take(); !slices.Equal(got, []string{"+vllm-0@10.0.0.1:8000", "+vllm-1@10.0.0.2:8000"}) {
		t.Errorf("events %v", got)
	}

	// Update vllm-0's labels, move vllm-1, add vllm-2.
	writeAtomic(t, path, `endpoints:
- {name: vllm-0, address: 10.0.0.1, port: 8000, labels: {tier: gold}}
- {name: vllm-1, address: 10.0.0.12, port: 8000}
- {name: vllm-2, address: 10.0.0.3, port: 8000}
`)
	want := "vllm-0@10.0.0.1:8000/gold vllm-1@10.0.0.12:8000 vllm-2@10.0.0.3:8000"
	eventually(t, "reload", func() bool { return endpointNames(store) == want })
	if got := ev.take(); !slices.Equal(got, []string{"-vllm-1@10.0.0.2:8000", "+vllm-1@10.0.0.12:8000", "+vllm-2@10.0.0.3:8000"}) {
		t.Errorf("events %v", got)
	}

	// An invalid file: the last endpoints stay; the error is counted once.
	writeAtomic(t, path, "endpoints: [{name: vllm-0, address: not-an-ip, port: 8000}]")
	eventually(t, "error counted", func() bool { return f.Stats().Errors == 1 })
	time.Sleep(30 * time.Millisecond) // several more checks of the same bad file
	if f.Stats().Errors != 1 || endpointNames(store) != want {
		t.Errorf("after an invalid file: %+v, %s", f.Stats(), endpointNames(store))
	}

	// The file vanishes: the last endpoints stay.
	os.Remove(path)
	eventually(t, "vanish counted", func() bool { return f.Stats().Errors == 2 })
	if endpointNames(store) != want {
		t.Errorf("after the file vanished: %s", endpointNames(store))
	}

	// It comes back with one endpoint removed.
	writeAtomic(t, path, "endpoints: [{name: vllm-0, address: 10.0.0.1, port: 8000, labels: {tier: gold}}]")
	eventually(t, "removal", func() bool { return endpointNames(store) == "vllm-0@10.0.0.1:8000/gold" })
	if got := ev.take(); !slices.Equal(got, []string{"-vllm-1@10.0.0.12:8000", "-vllm-2@10.0.0.3:8000"}) {
		t.Errorf("events %v", got)
	}
	if st := f.Stats(); st.Loads != 3 || st.Errors != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestFileWithoutWatchReadsOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "endpoints.json")
	writeAtomic(t, path, `{"endpoints": [{"name": "a", "address": "10.0.0.1", "port": 8000}]}`)
	f := build(t, "file-discovery", `{"path": "`+path+`", "watchInterval": "1ms"}`).(*discovery.File)
	store, _ := run(t, f)
	eventually(t, "load", func() bool { return len(store.Endpoints()) == 1 })
	writeAtomic(t, path, `{"endpoints": []}`)
	time.Sleep(20 * time.Millisecond)
	if len(store.Endpoints()) != 1 || f.Stats().Loads != 1 {
		t.Error("an unwatched file was reloaded")
	}
}

func TestFileWithoutPath(t *testing.T) {
	store, _ := run(t, build(t, "file-discovery", ""))
	time.Sleep(10 * time.Millisecond)
	if len(store.Endpoints()) != 0 {
		t.Error("endpoints from nowhere")
	}
}

func TestStatic(t *testing.T) {
	s := build(t, "static-discovery", `{"endpoints": [{"name": "a", "address": "10.0.0.1", "port": 8000, "labels": {"x": "y"}}]}`)
	store, _ := run(t, s)
	eventually(t, "static", func() bool { return len(store.Endpoints()) == 1 })
	if _, err := registry().Build("static-discovery", "s", []byte(`{"endpoints": [{"name": "a", "address": "nope"}]}`)); err == nil {
		t.Error("invalid static endpoint accepted")
	}
}
