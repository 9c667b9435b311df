package datalayer_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eppkit/eppkit/datalayer"
)

// recorder is an EndpointListener that records what it hears, and checks
// that an added endpoint is not yet published and a removed one no longer
// is.
type recorder struct {
	mu     sync.Mutex
	store  *datalayer.Store
	events []string
	errs   []string
	moving map[string]bool // names whose removal precedes a re-addition
}

func (r *recorder) EndpointAdded(e *datalayer.Endpoint) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "+"+e.Name+"@"+e.HostPort())
	if r.store != nil {
		if cur, ok := r.store.Get(e.Name); ok && cur == e {
			r.errs = append(r.errs, e.Name+" published before EndpointAdded")
		}
	}
}

func (r *recorder) EndpointRemoved(e *datalayer.Endpoint) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "-"+e.Name+"@"+e.HostPort())
	if r.store != nil && !r.moving[e.Name] {
		if cur, ok := r.store.Get(e.Name); ok && cur.HostPort() == e.HostPort() {
			r.errs = append(r.errs, e.Name+" still published at EndpointRemoved")
		}
	}
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

func names(eps []*datalayer.Endpoint) string {
	var out []string
	for _, e := range eps {
		out = append(out, fmt.Sprintf("%s@%s/r%d", e.Name, e.HostPort(), e.Rank))
	}
	return strings.Join(out, " ")
}

func newStore(t *testing.T, pool datalayer.Pool) (*datalayer.Store, *recorder) {
	t.Helper()
	rec := &recorder{}
	s, err := datalayer.NewStore(pool, rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.store = s
	t.Cleanup(func() {
		if len(rec.errs) > 0 {
			t.Errorf("listener saw: %v", rec.errs)
		}
	})
	return s, rec
}

func TestStoreSetDiffs(t *testing.T) {
	s, rec := newStore(t, datalayer.Pool{})
	d, err := s.Set([]datalayer.Target{
		{Name: "b", Address: "10.0.0.2", Port: 8000},
		{Name: "a", Address: "10.0.0.1", Port: 8000, Labels: map[string]string{"k": "v"}},
	})
	if err != nil || !slices.Equal(d.Added, []string{"a", "b"}) || len(d.Removed)+len(d.Updated) > 0 {
		t.Fatalf("diff %+v %v", d, err)
	}
	if got := names(s.Endpoints()); got != "a@10.0.0.1:8000/r0 b@10.0.0.2:8000/r0" {
		t.Errorf("endpoints %s", got)
	}
	if ev := rec.take(); !slices.Equal(ev, []string{"+a@10.0.0.1:8000", "+b@10.0.0.2:8000"}) {
		t.Errorf("events %v", ev)
	}

	// Metrics published on a, then a relabel keeps them; b moves; c joins.
	a, _ := s.Get("a")
	m := datalayer.Metrics{Waiting: 3, UpdateTime: time.Unix(1, 0)}
	if n := s.Replace(a.WithMetrics(m)); n != 1 {
		t.Fatalf("replaced %d", n)
	}
	before := s.Endpoints()
	rec.moving = map[string]bool{"b": true}
	d, err = s.Set([]datalayer.Target{
		{Name: "a", Address: "10.0.0.1", Port: 8000, Labels: map[string]string{"k": "w"}},
		{Name: "b", Address: "10.0.0.9", Port: 8000},
		{Name: "c", Address: "10.0.0.3", Port: 8000},
	})
	if err != nil || !slices.Equal(d.Added, []string{"b", "c"}) || !slices.Equal(d.Updated, []string{"a"}) || !slices.Equal(d.Removed, []string{"b"}) {
		t.Fatalf("diff %+v %v", d, err)
	}
	a2, _ := s.Get("a")
	if a2.Metrics.Waiting != 3 || a2.Labels["k"] != "w" {
		t.Errorf("relabelled a lost its metrics or labels: %+v", a2)
	}
	if ev := rec.take(); !slices.Equal(ev, []string{"-b@10.0.0.2:8000", "+b@10.0.0.9:8000", "+c@10.0.0.3:8000"}) {
		t.Errorf("events %v", ev)
	}
	// The list a reader held is untouched.
	if got := names(before); got != "a@10.0.0.1:8000/r0 b@10.0.0.2:8000/r0" || before[0].Labels["k"] != "v" {
		t.Errorf("a published list changed: %s", got)
	}

	// Removal; an unchanged set publishes nothing.
	rec.moving = nil
	d, _ = s.Set([]datalayer.Target{{Name: "c", Address: "10.0.0.3", Port: 8000}})
	if !slices.Equal(d.Removed, []string{"a", "b"}) {
		t.Errorf("diff %+v", d)
	}
	cur := s.Endpoints()
	d, _ = s.Set([]datalayer.Target{{Name: "c", Address: "10.0.0.3", Port: 8000}})
	if !d.Empty() || &s.Endpoints()[0] != &cur[0] {
		t.Errorf("no-op Set published: %+v", d)
	}
	// Replace ignores unknown and moved endpoints.
	if n := s.Replace(datalayer.New("zz", "10.0.0.3", 8000, nil), datalayer.New("c", "10.9.9.9", 8000, nil)); n != 0 {
		t.Errorf("replaced %d", n)
	}
}

func TestPoolExpansion(t *testing.T) {
	s, _ := newStore(t, datalayer.Pool{Selector: map[string]string{"app": "vllm"}, TargetPorts: []int{8000, 8001}})
	d, err := s.Set([]datalayer.Target{
		{Name: "p", Address: "10.0.0.1", Labels: map[string]string{"app": "vllm"}},
		{Name: "q", Address: "fd00::2", Port: 8001, Labels: map[string]string{"app": "vllm"}},
		{Name: "r", Address: "10.0.0.3", Port: 9000, Labels: map[string]string{"app": "vllm"}}, // not a target port
		{Name: "s", Address: "10.0.0.4", Labels: map[string]string{"app": "other"}},            // not selected
		{Name: "bad", Address: "vllm-0.local", Port: 8000, Labels: map[string]string{"app": "vllm"}},
		{Name: "p", Address: "10.0.0.5", Labels: map[string]string{"app": "vllm"}}, // duplicate
	})
	if err == nil || !strings.Contains(err.Error(), "not an IP address") || !strings.Contains(err.Error(), "p-rank-0: duplicate") {
		t.Errorf("err %v", err)
	}
	if got := names(s.Endpoints()); got != "p-rank-0@10.0.0.1:8000/r0 p-rank-1@10.0.0.1:8001/r1 q@[fd00::2]:8001/r1" {
		t.Errorf("endpoints %s (diff %+v)", got, d)
	}
	// One target port: the endpoint keeps the target's name.
	s1, _ := newStore(t, datalayer.Pool{TargetPorts: []int{8000}})
	s1.Set([]datalayer.Target{{Name: "p", Address: "10.0.0.1"}})
	if got := names(s1.Endpoints()); got != "p@10.0.0.1:8000/r0" {
		t.Errorf("endpoints %s", got)
	}
	// No target ports and no port: skipped.
	s2, _ := newStore(t, datalayer.Pool{})
	if _, err := s2.Set([]datalayer.Target{{Name: "p", Address: "10.0.0.1"}}); err == nil || len(s2.Endpoints()) != 0 {
		t.Errorf("err %v, endpoints %d", err, len(s2.Endpoints()))
	}
}

func TestPoolValidate(t *testing.T) {
	for _, p := range []datalayer.Pool{
		{TargetPorts: []int{1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{TargetPorts: []int{0}},
		{TargetPorts: []int{8000, 8000}},
	} {
		if _, err := datalayer.NewStore(p); err == nil {
			t.Errorf("%v accepted", p.TargetPorts)
		}
	}
}

// TestStoreConcurrentReaders: readers never see a torn or modified list
// while writers publish (run with -race).
func TestStoreConcurrentReaders(t *testing.T) {
	s, _ := newStore(t, datalayer.Pool{})
	var targets []datalayer.Target
	for i := range 16 {
		targets = append(targets, datalayer.Target{Name: fmt.Sprintf("e%02d", i), Address: fmt.Sprintf("10.0.0.%d", i+1), Port: 8000})
	}
	s.Set(targets)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				eps := s.Endpoints()
				snap := slices.Clone(eps)
				w := eps[0].Metrics.Waiting
				for i := range eps {
					if eps[i].Metrics.Waiting < 0 {
						t.Error("bad value")
					}
				}
				if !reflect.DeepEqual(snap, eps) || eps[0].Metrics.Waiting != w {
					t.Error("a published list changed under a reader")
					return
				}
			}
		})
	}
	for i := range 2000 {
		eps := s.Endpoints()
		e := eps[i%len(eps)]
		s.Replace(e.WithMetrics(datalayer.Metrics{Waiting: i, UpdateTime: time.Unix(int64(i), 0)}))
		if i%100 == 0 {
			s.Set(targets[:8+i%8])
		}
	}
	close(done)
	wg.Wait()
}

// TestEndpointsAllocFree: the request path reads the list without
// allocating.
func TestEndpointsAllocFree(t *testing.T) {
	s, _ := newStore(t, datalayer.Pool{})
	s.Set([]datalayer.Target{{Name: "a", Address: "10.0.0.1", Port: 1}})
	if n := testing.AllocsPerRun(1000, func() { _ = s.Endpoints(); _, _ = s.Get("a") }); n != 0 {
		t.Errorf("%v allocs", n)
	}
}

func BenchmarkEndpoints(b *testing.B) {
	s, err := datalayer.NewStore(datalayer.Pool{})
	if err != nil {
		b.Fatal(err)
	}
	var targets []datalayer.Target
	for i := range 256 {
		targets = append(targets, datalayer.Target{Name: fmt.Sprint(i), Address: "10.0.0.1", Port: 1000 + i})
	}
	s.Set(targets)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if len(s.Endpoints()) != 256 {
				b.Fatal("len")
			}
		}
	})
}
