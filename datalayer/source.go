package datalayer

import (
	"context"
	"reflect"
	"time"
)

// Source discovers the targets of the pool: a static list, a file, or a
// build's own (a Kubernetes informer lives in the user's build, not here).
//
// Run reports the complete current set of targets through update: once at
// start, then again whenever it changes, until ctx is done; then it returns
// nil. The Runtime calls Run on a goroutine of its own; update diffs each set
// against the previous one (see Store.Set) and tells the EndpointListeners.
// Calls to update must not overlap. Run returns an error only when it cannot
// go on; the Runtime logs it and keeps the last set. A Source that cannot read
// its input on a later attempt should keep quiet about it in update (report
// nothing) rather than report an empty set, so a transient failure does not
// empty the pool.
type Source interface {
	Run(ctx context.Context, update func([]Target)) error
}

// SourceFunc adapts a function to Source.
type SourceFunc func(ctx context.Context, update func([]Target)) error

// Run calls f.
func (f SourceFunc) Run(ctx context.Context, update func([]Target)) error { return f(ctx, update) }

// DataSource collects one kind of data from endpoints, e.g. the Prometheus
// metrics or the served models.
//
// The Runtime calls Collect for every endpoint on the source's Polling
// interval, from a bounded pool of workers: concurrently for different
// endpoints, never concurrently for the same one, and never while the same
// endpoint's previous collection is still running. ctx carries the
// per-collection deadline; Collect must return when it is done. e is a
// read-only snapshot. The value returned is handed to the source's
// extractors; an error marks the collection failed (see FailureRecorder).
type DataSource interface {
	Collect(ctx context.Context, e *Endpoint) (any, error)
}

// DataSourceFunc adapts a function to DataSource.
type DataSourceFunc func(ctx context.Context, e *Endpoint) (any, error)

// Collect calls f.
func (f DataSourceFunc) Collect(ctx context.Context, e *Endpoint) (any, error) { return f(ctx, e) }

// Extractor turns the data a DataSource collected into endpoint state:
// Metrics fields and typed Attrs.
//
// Extract is called once per collection, from one goroutine, with e a
// private copy of the endpoint's current snapshot (its Attrs already
// cloned): set the fields and attributes it owns on e and leave the others
// alone. When every extractor of the source succeeded, e is published as the
// endpoint's next snapshot; if one returns an error, the copy is discarded
// and the collection counts as failed. Extract must not keep e or data, and
// must not block: it runs while the endpoint list is being published.
type Extractor interface {
	Extract(data any, e *Endpoint) error
}

// ExtractorFunc adapts a function to Extractor.
type ExtractorFunc func(data any, e *Endpoint) error

// Extract calls f.
func (f ExtractorFunc) Extract(data any, e *Endpoint) error { return f(data, e) }

// FailureRecorder is implemented by extractors that record a failed
// collection on the endpoint: the core metrics extractor keeps the last good
// metrics and marks them Stale. RecordFailure is called, like Extract, with a
// private copy that is then published; err says what failed (the collection,
// or another extractor).
type FailureRecorder interface {
	RecordFailure(err error, e *Endpoint)
}

// Polling says how a DataSource is collected: each endpoint every Interval,
// each collection bounded by Timeout, at most Workers collections at once.
// One slow endpoint occupies one worker for at most Timeout and is skipped
// by later ticks until it answers, so it never delays the others while
// Workers exceeds the number of endpoints hanging at once.
type Polling struct {
	Interval time.Duration
	Timeout  time.Duration
	Workers  int
}

// DefaultPolling is used for a source that is not a Poller, and for the zero
// fields of a Poller's Polling.
var DefaultPolling = Polling{Interval: 50 * time.Millisecond, Timeout: time.Second, Workers: 32}

// Poller is implemented by data sources that choose their own Polling.
type Poller interface {
	Polling() Polling
}

// Typed is implemented by data sources and extractors that declare the Go
// type of the data they produce or read. NewRuntime rejects an extractor
// whose type differs from its source's.
type Typed interface {
	DataType() reflect.Type
}

// Binder is implemented by data sources that want to know their extractors
// before collection starts, e.g. to parse only what they read. NewRuntime
// calls Bind once; an error rejects the configuration.
type Binder interface {
	Bind(extractors []Extractor) error
}
