package datalayer_test

import (
	"context"
	"fmt"
	"time"

	"github.com/eppkit/eppkit/datalayer"
)

type printListener struct{}

func (printListener) EndpointAdded(e *datalayer.Endpoint)   { fmt.Println("added", e.Name, e.HostPort()) }
func (printListener) EndpointRemoved(e *datalayer.Endpoint) { fmt.Println("removed", e.Name) }

// A Store turns the targets discovery reports into endpoints: one per target
// port, diffed against the current ones, with listeners told.
func ExampleStore() {
	store, _ := datalayer.NewStore(datalayer.Pool{
		Selector:    map[string]string{"app": "vllm"},
		TargetPorts: []int{8000, 8001},
	}, printListener{})
	diff, _ := store.Set([]datalayer.Target{
		{Name: "pod-a", Address: "10.0.0.1", Labels: map[string]string{"app": "vllm"}},
		{Name: "pod-b", Address: "10.0.0.2", Labels: map[string]string{"app": "other"}},
	})
	fmt.Println(diff.Added)

	// Publish metrics: a new snapshot, never a modified one.
	e, _ := store.Get("pod-a-rank-1")
	store.Replace(e.WithMetrics(datalayer.Metrics{Waiting: 2, UpdateTime: time.Now()}))
	for _, e := range store.Endpoints() {
		fmt.Println(e.Name, e.Rank, e.Metrics.Waiting)
	}

	store.Set(nil)
	// Output:
	// added pod-a-rank-0 10.0.0.1:8000
	// added pod-a-rank-1 10.0.0.1:8001
	// [pod-a-rank-0 pod-a-rank-1]
	// pod-a-rank-0 0 0
	// pod-a-rank-1 1 2
	// removed pod-a-rank-0
	// removed pod-a-rank-1
}

// A Runtime runs discovery and data sources; here a source of the
// endpoint's own port number and an extractor writing it as the queue.
func ExampleRuntime() {
	rt, err := datalayer.NewRuntime(datalayer.Config{
		Discovery: datalayer.SourceFunc(func(ctx context.Context, update func([]datalayer.Target)) error {
			update([]datalayer.Target{{Name: "a", Address: "10.0.0.1", Port: 8000}})
			<-ctx.Done()
			return nil
		}),
		Sources: []datalayer.DataSourceConfig{{
			Name: "port",
			Source: datalayer.DataSourceFunc(func(ctx context.Context, e *datalayer.Endpoint) (any, error) {
				return e.Port, nil
			}),
			Extractors: []datalayer.NamedExtractor{{Name: "queue", Extractor: datalayer.ExtractorFunc(func(data any, e *datalayer.Endpoint) error {
				e.Metrics = datalayer.Metrics{Waiting: data.(int), UpdateTime: time.Now()}
				return nil
			})}},
		}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	rt.Start(context.Background())
	defer rt.Close()
	for len(rt.Endpoints()) == 0 || !rt.Endpoints()[0].Metrics.Usable() {
		time.Sleep(time.Millisecond)
	}
	e := rt.Endpoints()[0]
	fmt.Println(e.Name, e.Metrics.Waiting)
	// Output:
	// a 8000
}

// Metrics keep the last good values when a collection fails, marked stale.
func ExampleMetrics_Age() {
	read := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	m := datalayer.Metrics{Waiting: 3, UpdateTime: read}
	fmt.Println(m.Usable(), m.Age(read.Add(50*time.Millisecond)))
	m.Stale, m.LastError, m.Failures = true, "connection refused", 1
	fmt.Println(m.Usable(), m.Waiting, m.Age(read.Add(time.Second)))
	// Output:
	// true 50ms
	// false 3 1s
}
