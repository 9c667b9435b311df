package datalayer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Config describes a data layer: the pool, where its targets come from,
// what is collected from its endpoints, and who hears about membership.
type Config struct {
	Pool Pool
	// Discovery reports the targets. Nil means the caller sets them with
	// Store().Set.
	Discovery Source
	// Sources are the data sources, each with the extractors it feeds, in
	// order.
	Sources []DataSourceConfig
	// Listeners hear when endpoints join and leave (see EndpointListener).
	// Sources, extractors and the discovery source that are listeners are
	// added to them.
	Listeners []EndpointListener
	// Logger receives discovery changes, collection failures (the first of a
	// run, then the recovery) and source errors. Nil discards.
	Logger *slog.Logger
}

// DataSourceConfig is one data source and the extractors its data feeds.
// A source that is itself an Extractor extracts its own data first.
type DataSourceConfig struct {
	Name       string
	Source     DataSource
	Extractors []NamedExtractor
}

// NamedExtractor is an extractor with its instance name, for logs and errors.
type NamedExtractor struct {
	Name      string
	Extractor Extractor
}

// SourceStats counts what happened to a data source's collections.
type SourceStats struct {
	Name string
	// Collections is the number of collections that completed, failed or not.
	Collections uint64
	// Failures counts failed collections, extractor errors included.
	Failures uint64
	// Skipped counts endpoints left out of a tick because their previous
	// collection was still running (or the queue was full).
	Skipped uint64
	// Discarded counts results dropped because their endpoint left the pool,
	// or moved, during the collection.
	Discarded uint64
}

// Runtime runs a data layer: discovery on one goroutine, and for each data
// source a ticker feeding a bounded pool of workers; one publisher goroutine
// applies the extractors and publishes the new snapshots in batches. Build it
// with NewRuntime, call Start, read Endpoints on the request path, and Close
// it at shutdown; Close stops every goroutine it started and waits for them.
// Closing the plugins (sources, extractors, discovery) is their owner's job.
type Runtime struct {
	cfg     Config
	store   *Store
	log     *slog.Logger
	cols    []*collector
	results chan result

	mu      sync.Mutex
	state   int // 0 new, 1 started, 2 closed
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	failing map[failKey]int // owned by the publisher goroutine
}

type failKey struct{ col, endpoint string }

// NewRuntime checks cfg and builds a runtime: pool target ports, every source
// and extractor present, extractor data types that match their source's
// (Typed), and each Binder's Bind.
func NewRuntime(cfg Config) (*Runtime, error) {
	store, err := NewStore(cfg.Pool, listeners(cfg)...)
	if err != nil {
		return nil, err
	}
	r := &Runtime{cfg: cfg, store: store, log: cfg.Logger, results: make(chan result, 256), failing: map[failKey]int{}}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var errs []error
	for i, sc := range cfg.Sources {
		if sc.Name == "" {
			sc.Name = "sources[" + strconv.Itoa(i) + "]"
		}
		c, err := newCollector(sc)
		if err != nil {
			errs = append(errs, fmt.Errorf("data source %q: %w", sc.Name, err))
			continue
		}
		r.cols = append(r.cols, c)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("datalayer: %w", err)
	}
	return r, nil
}

// listeners returns cfg.Listeners, then the data sources, extractors and
// discovery source that are EndpointListeners too, each once.
func listeners(cfg Config) []EndpointListener {
	out := slices.Clone(cfg.Listeners)
	add := func(v any) {
		l, ok := v.(EndpointListener)
		if !ok || !isComparable(v) || slices.ContainsFunc(out, func(x EndpointListener) bool { return isComparable(x) && any(x) == v }) {
			return
		}
		out = append(out, l)
	}
	add(cfg.Discovery)
	for _, sc := range cfg.Sources {
		add(sc.Source)
		for _, x := range sc.Extractors {
			add(x.Extractor)
		}
	}
	return out
}

// isComparable reports whether v can be compared with == without a panic.
func isComparable(v any) bool { return v != nil && reflect.TypeOf(v).Comparable() }

// Store returns the store holding the current endpoints.
func (r *Runtime) Store() *Store { return r.store }

// Endpoints returns the current endpoints: Store().Endpoints().
func (r *Runtime) Endpoints() []*Endpoint { return r.store.Endpoints() }

// Discovery returns the discovery source (nil when there is none).
func (r *Runtime) Discovery() Source { return r.cfg.Discovery }

// Sources returns the data sources with their extractors, as configured.
func (r *Runtime) Sources() []DataSourceConfig { return slices.Clone(r.cfg.Sources) }

// Stats returns the counters of every data source, in configuration order.
func (r *Runtime) Stats() []SourceStats {
	out := make([]SourceStats, len(r.cols))
	for i, c := range r.cols {
		out[i] = SourceStats{
			Name:        c.name,
			Collections: c.collections.Load(),
			Failures:    c.failures.Load(),
			Skipped:     c.skipped.Load(),
			Discarded:   c.discarded.Load(),
		}
	}
	return out
}

// ErrStarted is returned by Start on a runtime that was started or closed.
var ErrStarted = errors.New("datalayer: runtime already started")

// Start starts discovery and collection; they run until ctx is done or
// Close is called. Start returns at once.
func (r *Runtime) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != 0 {
		return ErrStarted
	}
	r.state = 1
	ctx, r.cancel = context.WithCancel(ctx)
	r.goRun(func() { r.publish(ctx) })
	for _, c := range r.cols {
		for range c.poll.Workers {
			r.goRun(func() { c.work(ctx, r.results) })
		}
		r.goRun(func() { c.dispatch(ctx, r.store) })
	}
	if d := r.cfg.Discovery; d != nil {
		r.goRun(func() {
			if err := d.Run(ctx, r.setTargets); err != nil && ctx.Err() == nil {
				r.log.Error("discovery stopped; keeping the last endpoints", "err", err)
			}
		})
	}
	return nil
}

func (r *Runtime) goRun(f func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
}

// Close stops discovery and collection and waits for every goroutine. It is
// safe to call more than once, and on a runtime never started.
func (r *Runtime) Close() error {
	r.mu.Lock()
	if r.state == 1 {
		r.cancel()
	}
	r.state = 2
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}

func (r *Runtime) setTargets(targets []Target) {
	diff, err := r.store.Set(targets)
	if err != nil {
		r.log.Warn("discovery: some targets were skipped", "err", err)
	}
	if !diff.Empty() {
		r.log.Info("discovery: endpoints changed", "added", diff.Added, "updated", diff.Updated,
			"removed", diff.Removed, "endpoints", len(r.store.Endpoints()))
	}
}

// result is one finished collection on its way to the publisher.
type result struct {
	col  *collector
	ep   *Endpoint // the snapshot the collection started from
	data any
	err  error
}

// publish applies results in batches: it takes what has arrived, extracts
// and publishes it with one new list, and repeats. Under light load every
// result is published at once; under heavy load one copy of the list serves
// many results.
func (r *Runtime) publish(ctx context.Context) {
	batch := make([]result, 0, cap(r.results))
	for {
		select {
		case <-ctx.Done():
			return
		case res := <-r.results:
			batch = append(batch[:0], res)
		}
	drain:
		for len(batch) < cap(batch) {
			select {
			case res := <-r.results:
				batch = append(batch, res)
			default:
				break drain
			}
		}
		r.store.edit(func(list []*Endpoint, index map[string]int) bool {
			changed := false
			for i := range batch {
				res := &batch[i]
				j, ok := index[res.ep.Name]
				if !ok || list[j].Address != res.ep.Address || list[j].Port != res.ep.Port {
					res.col.discarded.Add(1) // the endpoint left or moved meanwhile
					continue
				}
				if next := r.extract(res, list[j]); next != list[j] {
					list[j] = next
					changed = true
				}
			}
			for k := range r.failing {
				if _, ok := index[k.endpoint]; !ok {
					delete(r.failing, k) // gone while failing
				}
			}
			return changed
		})
		clear(batch) // drop references to data
	}
}

// extract runs the extractors of res's source on a private copy of cur and
// returns the copy to publish.
func (r *Runtime) extract(res *result, cur *Endpoint) *Endpoint {
	c := res.col
	err := res.err
	if err == nil {
		draft := draftOf(cur)
		for _, x := range c.extractors {
			if err = x.Extractor.Extract(res.data, draft); err != nil {
				err = fmt.Errorf("extractor %q: %w", x.Name, err)
				break
			}
		}
		if err == nil {
			key := failKey{c.name, cur.Name}
			if n, was := r.failing[key]; was {
				delete(r.failing, key)
				r.log.Info("collection recovered", "source", c.name, "endpoint", cur.Name, "failures", n)
			}
			return draft
		}
	}
	c.failures.Add(1)
	key := failKey{c.name, cur.Name}
	if n := r.failing[key]; n == 0 {
		r.log.Warn("collection failed; keeping the last data, marked stale", "source", c.name,
			"endpoint", cur.Name, "address", cur.HostPort(), "err", err)
	}
	r.failing[key]++
	if len(c.failureRecorders) == 0 {
		return cur // nothing records the failure on the endpoint
	}
	draft := draftOf(cur)
	for _, f := range c.failureRecorders {
		f.RecordFailure(err, draft)
	}
	return draft
}

// draftOf returns a private copy of e that extractors may modify.
func draftOf(e *Endpoint) *Endpoint {
	d := e.WithMetrics(e.Metrics)
	d.Attrs = e.Attrs.Clone()
	return d
}

// collector runs one data source: a dispatcher that queues each endpoint
// not already being collected on every tick, and a fixed pool of workers.
type collector struct {
	name             string
	src              DataSource
	extractors       []NamedExtractor
	failureRecorders []FailureRecorder
	poll             Polling
	jobs             chan *Endpoint

	mu       sync.Mutex
	inflight map[string]struct{} // endpoint names queued or being collected

	collections, failures, skipped, discarded atomic.Uint64
}

func newCollector(sc DataSourceConfig) (*collector, error) {
	if sc.Source == nil {
		return nil, errors.New("no source")
	}
	c := &collector{name: sc.Name, src: sc.Source, poll: DefaultPolling, inflight: map[string]struct{}{}}
	if self, ok := sc.Source.(Extractor); ok {
		c.extractors = append(c.extractors, NamedExtractor{Name: sc.Name, Extractor: self})
	}
	c.extractors = append(c.extractors, sc.Extractors...)
	var errs []error
	srcType := dataType(sc.Source)
	exts := make([]Extractor, 0, len(c.extractors))
	for _, x := range sc.Extractors {
		if x.Extractor == nil {
			errs = append(errs, fmt.Errorf("extractor %q: missing", x.Name))
			continue
		}
		if t := dataType(x.Extractor); t != nil && srcType != nil && t != srcType {
			errs = append(errs, fmt.Errorf("extractor %q reads %v, but the source produces %v", x.Name, t, srcType))
		}
		exts = append(exts, x.Extractor)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, x := range c.extractors {
		if f, ok := x.Extractor.(FailureRecorder); ok {
			c.failureRecorders = append(c.failureRecorders, f)
		}
	}
	if b, ok := sc.Source.(Binder); ok {
		if err := b.Bind(exts); err != nil {
			return nil, err
		}
	}
	if p, ok := sc.Source.(Poller); ok {
		pp := p.Polling()
		if pp.Interval > 0 {
			c.poll.Interval = pp.Interval
		}
		if pp.Timeout > 0 {
			c.poll.Timeout = pp.Timeout
		}
		if pp.Workers > 0 {
			c.poll.Workers = pp.Workers
		}
	}
	c.jobs = make(chan *Endpoint, 4096)
	return c, nil
}

func dataType(v any) reflect.Type {
	if d, ok := v.(Typed); ok {
		return d.DataType()
	}
	return nil
}

// dispatch queues every endpoint on each tick, skipping those whose previous
// collection has not finished.
func (c *collector) dispatch(ctx context.Context, store *Store) {
	t := time.NewTicker(c.poll.Interval)
	defer t.Stop()
	for {
		for _, e := range store.Endpoints() {
			c.mu.Lock()
			_, busy := c.inflight[e.Name]
			if !busy {
				c.inflight[e.Name] = struct{}{}
			}
			c.mu.Unlock()
			if busy {
				c.skipped.Add(1)
				continue
			}
			select {
			case c.jobs <- e:
			default:
				c.done(e)
				c.skipped.Add(1)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *collector) done(e *Endpoint) {
	c.mu.Lock()
	delete(c.inflight, e.Name)
	c.mu.Unlock()
}

// work collects queued endpoints and hands the results to the publisher.
func (c *collector) work(ctx context.Context, results chan<- result) {
	for {
		var e *Endpoint
		select {
		case <-ctx.Done():
			return
		case e = <-c.jobs:
		}
		cctx, cancel := context.WithTimeout(ctx, c.poll.Timeout)
		data, err := c.src.Collect(cctx, e)
		if err != nil && cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			err = fmt.Errorf("no answer within %v: %w", c.poll.Timeout, err)
		}
		cancel()
		c.collections.Add(1)
		select {
		case results <- result{col: c, ep: e, data: data, err: err}:
		case <-ctx.Done():
			return
		}
		// After the result is queued: a later collection of e queues its
		// result behind this one, so results apply in order.
		c.done(e)
	}
}
