package datalayer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/plugins"
)

// eventually polls cond every few milliseconds until it holds or timeout
// passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// checkGoroutines fails the test if goroutines started after it was called
// are still running at cleanup.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Errorf("%d goroutines left running (had %d):\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// fakeSource collects a per-endpoint counter; behaviour per endpoint name.
type fakeSource struct {
	poll  datalayer.Polling
	mu    sync.Mutex
	calls map[string]int
	fail  map[string]error
	slow  map[string]bool          // block until ctx is done
	hold  map[string]chan struct{} // block until the channel is closed
}

func newFake(interval time.Duration) *fakeSource {
	return &fakeSource{
		poll:  datalayer.Polling{Interval: interval, Timeout: 50 * time.Millisecond, Workers: 4},
		calls: map[string]int{}, fail: map[string]error{}, slow: map[string]bool{}, hold: map[string]chan struct{}{},
	}
}

func (f *fakeSource) Polling() datalayer.Polling { return f.poll }
func (f *fakeSource) DataType() reflect.Type     { return reflect.TypeFor[int]() }

func (f *fakeSource) Collect(ctx context.Context, e *datalayer.Endpoint) (any, error) {
	f.mu.Lock()
	f.calls[e.Name]++
	n, err, slow, hold := f.calls[e.Name], f.fail[e.Name], f.slow[e.Name], f.hold[e.Name]
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	if slow {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return n, err
}

func (f *fakeSource) set(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

// waitingExtractor writes the collected count into Metrics.Waiting and marks
// failures stale, like the core metrics extractor.
type waitingExtractor struct{}

func (waitingExtractor) DataType() reflect.Type { return reflect.TypeFor[int]() }
func (waitingExtractor) Extract(data any, e *datalayer.Endpoint) error {
	n := data.(int)
	if n < 0 {
		return errors.New("negative")
	}
	e.Metrics = datalayer.Metrics{Waiting: n, UpdateTime: time.Now()}
	plugins.Set(&e.Attrs, countKey, n)
	return nil
}
func (waitingExtractor) RecordFailure(err error, e *datalayer.Endpoint) {
	e.Metrics.Stale, e.Metrics.LastError = true, err.Error()
	e.Metrics.Failures++
}

var countKey = plugins.NewKey[int]("test/count")

func targets(names ...string) []datalayer.Target {
	var out []datalayer.Target
	for i, n := range names {
		out = append(out, datalayer.Target{Name: n, Address: fmt.Sprintf("10.0.0.%d", i+1), Port: 8000})
	}
	return out
}

func startRuntime(t *testing.T, cfg datalayer.Config) *datalayer.Runtime {
	t.Helper()
	rt, err := datalayer.NewRuntime(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

func waiting(rt *datalayer.Runtime, name string) int {
	e, ok := rt.Store().Get(name)
	if !ok {
		return -1
	}
	return e.Metrics.Waiting
}

func TestRuntimeCollects(t *testing.T) {
	checkGoroutines(t)
	src := newFake(5 * time.Millisecond)
	var logs bytes.Buffer
	rt := startRuntime(t, datalayer.Config{
		Discovery: &staticSource{targets: targets("a", "b", "c")},
		Sources:   []datalayer.DataSourceConfig{{Name: "fake", Source: src, Extractors: []datalayer.NamedExtractor{{Name: "w", Extractor: waitingExtractor{}}}}},
		Logger:    slog.New(slog.NewTextHandler(&lockedWriter{w: &logs}, nil)),
	})
	eventually(t, 5*time.Second, "every endpoint collected 3 times", func() bool {
		return waiting(rt, "a") >= 3 && waiting(rt, "b") >= 3 && waiting(rt, "c") >= 3
	})
	e, _ := rt.Store().Get("a")
	if v, ok := plugins.Get(&e.Attrs, countKey); !ok || v < 3 || !e.Metrics.Usable() {
		t.Errorf("attrs %v %v, metrics %+v", v, ok, e.Metrics)
	}

	// b fails: its last value stays, marked stale; the others go on.
	src.set(func() { src.fail["b"] = errors.New("connection refused") })
	eventually(t, 5*time.Second, "b stale", func() bool {
		e, _ := rt.Store().Get("b")
		return e.Metrics.Stale && e.Metrics.Failures >= 2
	})
	b, _ := rt.Store().Get("b")
	if b.Metrics.Waiting < 3 || b.Metrics.LastError != "connection refused" || b.Metrics.Usable() {
		t.Errorf("b %+v", b.Metrics)
	}
	a := waiting(rt, "a")
	eventually(t, 5*time.Second, "a still collected", func() bool { return waiting(rt, "a") > a+2 })
	src.set(func() { delete(src.fail, "b") })
	eventually(t, 5*time.Second, "b recovered", func() bool {
		e, _ := rt.Store().Get("b")
		return !e.Metrics.Stale && e.Metrics.Usable()
	})
	st := rt.Stats()[0]
	if st.Name != "fake" || st.Failures < 2 || st.Collections < 9 {
		t.Errorf("stats %+v", st)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	l := logs.String()
	if n := strings.Count(l, "collection failed"); n != 1 {
		t.Errorf("failure logged %d times (want once per run of failures):\n%s", n, l)
	}
	if !strings.Contains(l, "collection recovered") || !strings.Contains(l, "endpoints changed") {
		t.Errorf("logs:\n%s", l)
	}
}

// TestSlowEndpointDoesNotDelayOthers: one endpoint that never answers holds
// one worker until its timeout and is skipped meanwhile; the others are
// collected at the interval.
func TestSlowEndpointDoesNotDelayOthers(t *testing.T) {
	checkGoroutines(t)
	src := newFake(10 * time.Millisecond)
	src.poll.Timeout = time.Second
	src.poll.Workers = 2
	src.slow["slow"] = true
	rt := startRuntime(t, datalayer.Config{
		Discovery: &staticSource{targets: targets("slow", "a", "b", "c")},
		Sources:   []datalayer.DataSourceConfig{{Name: "fake", Source: src, Extractors: []datalayer.NamedExtractor{{Name: "w", Extractor: waitingExtractor{}}}}},
	})
	eventually(t, 5*time.Second, "endpoints", func() bool { return len(rt.Endpoints()) == 4 })
	start := time.Now()
	eventually(t, 5*time.Second, "fast endpoints collected 10 times", func() bool {
		return waiting(rt, "a") >= 10 && waiting(rt, "b") >= 10 && waiting(rt, "c") >= 10
	})
	if d := time.Since(start); d > 900*time.Millisecond {
		t.Errorf("the fast endpoints waited for the slow one: %v", d)
	}
	eventually(t, 5*time.Second, "slow endpoint timed out", func() bool {
		e, _ := rt.Store().Get("slow")
		return e.Metrics.Stale && strings.Contains(e.Metrics.LastError, "no answer within 1s")
	})
	if st := rt.Stats()[0]; st.Skipped == 0 {
		t.Errorf("the slow endpoint was never skipped: %+v", st)
	}
}

// TestChurnDuringCollection: a result whose endpoint left or moved while it
// was collected is dropped.
func TestChurnDuringCollection(t *testing.T) {
	checkGoroutines(t)
	src := newFake(5 * time.Millisecond)
	holdA, holdB := make(chan struct{}), make(chan struct{})
	src.hold["a"], src.hold["b"] = holdA, holdB
	disc := &pushSource{ch: make(chan []datalayer.Target)}
	rt := startRuntime(t, datalayer.Config{
		Discovery: disc,
		Sources:   []datalayer.DataSourceConfig{{Name: "fake", Source: src, Extractors: []datalayer.NamedExtractor{{Name: "w", Extractor: waitingExtractor{}}}}},
	})
	disc.ch <- targets("a", "b", "c")
	eventually(t, 5*time.Second, "a and b being collected", func() bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		return src.calls["a"] > 0 && src.calls["b"] > 0
	})
	// a leaves, b moves to another address, while their collections hang.
	moved := targets("x", "b", "c")
	moved[1].Address = "10.9.9.9"
	disc.ch <- moved[1:]
	eventually(t, 5*time.Second, "discovery applied", func() bool {
		e, ok := rt.Store().Get("b")
		_, aOK := rt.Store().Get("a")
		return ok && e.Address == "10.9.9.9" && !aOK
	})
	src.set(func() { delete(src.hold, "a"); delete(src.hold, "b") })
	close(holdA)
	close(holdB)
	eventually(t, 5*time.Second, "two results discarded", func() bool { return rt.Stats()[0].Discarded >= 2 })
	eventually(t, 5*time.Second, "the moved b collected afresh", func() bool { return waiting(rt, "b") >= 2 })
}

func TestRuntimeLifecycle(t *testing.T) {
	checkGoroutines(t)
	rt, err := datalayer.NewRuntime(datalayer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil { // never started
		t.Fatal(err)
	}
	if err := rt.Start(t.Context()); !errors.Is(err, datalayer.ErrStarted) {
		t.Errorf("start after close: %v", err)
	}
	rt, _ = datalayer.NewRuntime(datalayer.Config{Sources: []datalayer.DataSourceConfig{{Name: "f", Source: newFake(time.Millisecond)}}})
	ctx, cancel := context.WithCancel(t.Context())
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); !errors.Is(err, datalayer.ErrStarted) {
		t.Errorf("second start: %v", err)
	}
	cancel() // the context ends the runtime too; Close still waits
	_ = rt.Close()
	_ = rt.Close()
}

func TestNewRuntimeChecks(t *testing.T) {
	str := datalayer.ExtractorFunc(func(any, *datalayer.Endpoint) error { return nil })
	_, err := datalayer.NewRuntime(datalayer.Config{Sources: []datalayer.DataSourceConfig{
		{Name: "s", Source: newFake(time.Millisecond), Extractors: []datalayer.NamedExtractor{{Name: "bad", Extractor: typedExtractor{str}}, {Name: "nil"}}},
		{Name: "none"},
	}})
	for _, want := range []string{`data source "s": extractor "bad" reads string, but the source produces int`, `extractor "nil": missing`, `data source "none": no source`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	if _, err := datalayer.NewRuntime(datalayer.Config{Pool: datalayer.Pool{TargetPorts: []int{0}}}); err == nil {
		t.Error("bad pool accepted")
	}
	// Bind sees the extractors; a Bind error is reported.
	b := &binder{err: errors.New("cannot read that")}
	_, err = datalayer.NewRuntime(datalayer.Config{Sources: []datalayer.DataSourceConfig{{Name: "b", Source: b, Extractors: []datalayer.NamedExtractor{{Name: "x", Extractor: str}}}}})
	if err == nil || !strings.Contains(err.Error(), "cannot read that") || len(b.got) != 1 {
		t.Errorf("bind: %v %v", err, b.got)
	}
}

type typedExtractor struct{ datalayer.ExtractorFunc }

func (typedExtractor) DataType() reflect.Type { return reflect.TypeFor[string]() }

type binder struct {
	datalayer.DataSourceFunc
	err error
	got []datalayer.Extractor
}

func (b *binder) Bind(x []datalayer.Extractor) error { b.got = x; return b.err }

// TestSelfExtractingSourceAndListeners: a source that is an Extractor
// extracts its own data; sources that are listeners hear of membership.
func TestSelfExtractingSourceAndListeners(t *testing.T) {
	checkGoroutines(t)
	src := &selfSource{}
	rec := &recorder{}
	rt := startRuntime(t, datalayer.Config{
		Discovery: &staticSource{targets: targets("a")},
		Sources:   []datalayer.DataSourceConfig{{Name: "self", Source: src}},
		Listeners: []datalayer.EndpointListener{rec, src}, // src also found as a source: told once
	})
	eventually(t, 5*time.Second, "self-extracted", func() bool {
		e, ok := rt.Store().Get("a")
		if !ok {
			return false
		}
		v, _ := plugins.Get(&e.Attrs, countKey)
		return v == 42
	})
	if got := src.added.Load(); got != 1 {
		t.Errorf("source told %d times", got)
	}
	if ev := rec.take(); len(ev) != 1 || ev[0] != "+a@10.0.0.1:8000" {
		t.Errorf("listener: %v", ev)
	}
}

type selfSource struct{ added atomic.Int32 }

func (s *selfSource) Collect(context.Context, *datalayer.Endpoint) (any, error) { return 42, nil }
func (s *selfSource) Extract(data any, e *datalayer.Endpoint) error {
	plugins.Set(&e.Attrs, countKey, data.(int))
	return nil
}
func (s *selfSource) EndpointAdded(*datalayer.Endpoint)   { s.added.Add(1) }
func (s *selfSource) EndpointRemoved(*datalayer.Endpoint) {}

// staticSource reports a fixed list.
type staticSource struct{ targets []datalayer.Target }

func (s *staticSource) Run(ctx context.Context, update func([]datalayer.Target)) error {
	update(s.targets)
	<-ctx.Done()
	return nil
}

// pushSource reports what the test sends.
type pushSource struct{ ch chan []datalayer.Target }

func (s *pushSource) Run(ctx context.Context, update func([]datalayer.Target)) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ts := <-s.ch:
			update(ts)
		}
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
