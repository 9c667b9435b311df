package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/requestcontrol/producers/precise"
	"github.com/eppkit/eppkit/scheduling"
)

// DefaultModel is the model name the synthetic workloads request.
const DefaultModel = "meta-llama/Llama-3.1-8B-Instruct"

// DefaultScrapeInterval is how often servers publish their metrics to the
// picker (the metrics-data-source's default).
const DefaultScrapeInterval = 50 * time.Millisecond

// Config is one configuration to simulate: a name for the results and an
// EndpointPickerConfig (config.Load).
type Config struct {
	Name   string
	Config *config.Config
}

// Options configure a simulation.
type Options struct {
	// Servers is the number of model servers (default 8).
	Servers int
	// Server describes each server; zero fields take DefaultServerParams.
	Server ServerParams
	// Workload makes the requests; it is called once per configuration.
	Workload WorkloadFunc
	// Seed seeds the plugins' random sources (config.Options.Seed).
	Seed uint64
	// ScrapeInterval is the metrics publication period (default 50ms): the
	// picker sees metrics up to this old.
	ScrapeInterval time.Duration
	// Registry makes the plugin registry (default std.Registry).
	Registry func() *plugins.Registry
	// KVEventDelay is how long servers' KV events take to reach the index
	// of a precise prefix producer (default 10ms). Servers publish events
	// only when a configuration has such a producer.
	KVEventDelay time.Duration
	// Progress, when set, is called every 1,000 arrivals and at the end of
	// each configuration's run.
	Progress func(Progress)
}

// Progress reports how far a configuration's run is.
type Progress struct {
	Config      string
	Index       int // the configuration's index
	VirtualTime time.Duration
	Arrived     int
	Completed   int
	Done        bool
}

// Run simulates each configuration over the same workload (a fresh copy
// per configuration) and returns their results in order. The run is
// deterministic: the same options and seed give the same results.
func Run(ctx context.Context, cfgs []Config, opts Options) (*Results, error) {
	if opts.Workload == nil {
		return nil, errors.New("sim: no workload")
	}
	if opts.Servers <= 0 {
		opts.Servers = 8
	}
	if opts.ScrapeInterval <= 0 {
		opts.ScrapeInterval = DefaultScrapeInterval
	}
	if opts.Registry == nil {
		opts.Registry = std.Registry
	}
	if opts.KVEventDelay <= 0 {
		opts.KVEventDelay = DefaultKVEventDelay
	}
	opts.Server.defaults()
	res := &Results{}
	for i, c := range cfgs {
		r, err := runOne(ctx, i, c, opts)
		if err != nil {
			return nil, fmt.Errorf("sim: config %q: %w", c.Name, err)
		}
		res.Configs = append(res.Configs, *r)
	}
	return res, nil
}

// vclock is the virtual clock handed to every plugin.
type vclock struct {
	base time.Time
	now  time.Duration
}

func (c *vclock) Now() time.Time { return c.base.Add(c.now) }

// Epoch is the wall-clock instant virtual time 0 stands for.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type eventKind uint8

const (
	evArrival eventKind = iota
	evStep
	evScrape
	evKV
)

type event struct {
	at   time.Duration
	seq  uint64
	kind eventKind
	srv  int32
}

// eventHeap is a binary min-heap by (at, seq): ties resolve in scheduling
// order, which keeps the run deterministic.
type eventHeap []event

func (h eventHeap) less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].seq < h[j].seq)
}

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	a := *h
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !a.less(i, p) {
			break
		}
		a[i], a[p] = a[p], a[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && a.less(r, l) {
			m = r
		}
		if !a.less(m, i) {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}

// cluster is one configuration's run.
type cluster struct {
	opts    Options
	clk     *vclock
	d       *requestcontrol.Director
	servers []*server
	eps     []*datalayer.Endpoint
	snap    []*scheduling.Endpoint
	index   map[string]int
	events  eventHeap
	seq     uint64
	buf     []byte
	resp    []byte // the response body complete builds, reused

	arrived, completed, failed, outstanding int
	ttft, e2e, queue                        []float64
	perServer                               []int
	prompt, cached, output                  int64
	first, last                             time.Duration
	load                                    [][]int // per-server load samples
	nextSample                              time.Duration
	// indexes are the precise producers' event indexes; kvq the KV event
	// batches in flight to them, in delivery order (the delay is constant).
	indexes []*kvindex.EventIndex
	kvq     []pendingKV
	kvHead  int
	// flow drives flow control when the configuration turns it on.
	flow *flowDriver
}

// LoadSampleInterval is the virtual time between two samples of the
// servers' load (Result.Load).
const LoadSampleInterval = time.Second

func (c *cluster) schedule(at time.Duration, kind eventKind, srv int) {
	c.seq++
	c.events.push(event{at: at, seq: c.seq, kind: kind, srv: int32(srv)})
}

func runOne(ctx context.Context, idx int, cfg Config, opts Options) (*Result, error) {
	clk := &vclock{base: Epoch}
	ctx, cancel := context.WithCancel(ctx)
	rt, err := config.Build(ctx, cfg.Config, opts.Registry(), config.Options{Clock: clk, Seed: opts.Seed, ManualDispatch: true})
	if err != nil {
		cancel()
		return nil, err
	}
	c := &cluster{opts: opts, clk: clk, d: rt.Director, index: map[string]int{},
		perServer: make([]int, opts.Servers), first: -1}
	defer func() {
		cancel() // ends the waits of requests still queued
		rt.Close()
		if c.flow != nil {
			c.flow.wg.Wait()
		}
	}()
	if rt.FlowControl != nil {
		if c.flow, err = newFlowDriver(rt.Director, rt.FlowControl); err != nil {
			return nil, err
		}
	}
	wl, err := opts.Workload()
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, s := range c.servers {
			s.kv.recycle()
		}
	}()
	for i := range opts.Servers {
		c.servers = append(c.servers, newServer(opts.Server, DefaultModel))
		e := datalayer.New(fmt.Sprintf("server-%d", i), fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255+1), 8000, nil)
		c.eps = append(c.eps, e)
		c.index[e.HostPort()] = i
	}
	for _, in := range rt.Plugins {
		if p, ok := in.Plugin.(*precise.Producer); ok && p.Index() != nil {
			if p.Tokenizer == nil {
				p.Tokenizer = promptTokens
			}
			c.indexes = append(c.indexes, p.Index())
		}
	}
	if len(c.indexes) > 0 {
		for _, s := range c.servers {
			s.events = &kvEvents{}
			s.kv.removed = &s.events.removed
		}
	}
	c.publish()
	rt.Director.Pool = requestcontrol.PoolFunc(func() []*scheduling.Endpoint { return c.snap })

	f := c.startFeeder(ctx, wl)
	defer f.stop()
	next, more := f.next()
	if more {
		c.schedule(max(next.r.Arrival, 0), evArrival, 0)
	}
	c.schedule(opts.ScrapeInterval, evScrape, 0)
	for len(c.events) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		e := c.events.pop()
		clk.now = e.at
		switch e.kind {
		case evArrival:
			c.arrive(ctx, next)
			next, more = f.next()
			if more {
				c.schedule(max(next.r.Arrival, e.at), evArrival, 0)
			}
			c.dispatch(ctx)
			if opts.Progress != nil && c.arrived%1000 == 0 {
				opts.Progress(Progress{Config: cfg.Name, Index: idx, VirtualTime: e.at, Arrived: c.arrived, Completed: c.completed})
			}
		case evStep:
			s := c.servers[e.srv]
			s.finishStep(e.at)
			for _, q := range s.finished {
				c.complete(q)
			}
			c.step(int(e.srv))
			c.flushKV(int(e.srv))
			c.dispatch(ctx)
		case evKV:
			p := c.kvq[c.kvHead]
			c.kvq[c.kvHead] = pendingKV{}
			c.kvHead++
			if c.kvHead == len(c.kvq) {
				c.kvq, c.kvHead = c.kvq[:0], 0
			}
			name := c.eps[p.srv].HostPort()
			for _, x := range c.indexes {
				for _, b := range p.batches {
					x.Apply(name, b)
				}
			}
		case evScrape:
			c.publish()
			c.dispatch(ctx)
			if e.at >= c.nextSample {
				c.sample()
				c.nextSample += LoadSampleInterval
			}
			if more || c.outstanding > 0 || c.flow != nil && len(c.flow.pending) > 0 {
				c.schedule(e.at+opts.ScrapeInterval, evScrape, 0)
			}
		}
	}
	f.stop()
	if err := WorkloadError(wl); err != nil {
		return nil, err
	}
	if c.outstanding != 0 {
		return nil, fmt.Errorf("%d requests never finished (a simulator bug)", c.outstanding)
	}
	if opts.Progress != nil {
		opts.Progress(Progress{Config: cfg.Name, Index: idx, VirtualTime: clk.now, Arrived: c.arrived, Completed: c.completed, Done: true})
	}
	return c.result(cfg.Name, rt.Director.Stats().Rejected), nil
}

// publish makes the servers' current state the picker's view (a scrape).
func (c *cluster) publish() {
	now := c.clk.Now()
	snap := make([]*scheduling.Endpoint, len(c.servers))
	for i, s := range c.servers {
		active, waiting := s.loraNames()
		snap[i] = c.eps[i].WithMetrics(datalayer.Metrics{
			Waiting:    s.queued(),
			Running:    len(s.running),
			KVUsage:    float64(s.kv.used()) / float64(len(s.kv.blocks)),
			LoRA:       datalayer.LoRA{Active: active, Waiting: waiting, Max: s.p.MaxLoRAs},
			BlockSize:  s.p.BlockTokens,
			GPUBlocks:  s.p.KVBlocks,
			UpdateTime: now,
		})
	}
	c.snap = snap
}

// flushKV sends server i's KV events of the step just planned or finished
// on their way to the indexes.
func (c *cluster) flushKV(i int) {
	s := c.servers[i]
	if s.events == nil {
		return
	}
	if b := s.events.take(s.base); len(b) > 0 {
		c.kvq = append(c.kvq, pendingKV{srv: i, batches: b})
		c.schedule(c.clk.now+c.opts.KVEventDelay, evKV, i)
	}
}

// sample records each server's requests (running and waiting).
func (c *cluster) sample() {
	row := make([]int, len(c.servers))
	for i, s := range c.servers {
		row[i] = len(s.running) + s.queued()
	}
	c.load = append(c.load, row)
}

// step starts server i's next step if it is idle and has work.
func (c *cluster) step(i int) {
	s := c.servers[i]
	d, ok := s.startStep(c.clk.now)
	s.busy = ok
	if ok {
		c.schedule(c.clk.now+d, evStep, i)
	}
}

// arrive takes a request through the Director and queues it on the pick.
func (c *cluster) arrive(ctx context.Context, a *arrival) {
	c.arrived++
	if c.first < 0 {
		c.first = c.clk.now
	}
	if a.err != nil {
		return // a rejection, counted by the Director's Stats
	}
	if c.flow != nil {
		if h, queued := c.flow.handle(ctx, c.d, a, c.clk.now); !queued {
			c.route(h, a, c.clk.now)
		}
		return
	}
	x, err := c.d.Handle(ctx, a.parsed)
	c.route(handled{x, err}, a, c.clk.now)
}

// dispatch lets flow control dispatch what it can now.
func (c *cluster) dispatch(ctx context.Context) {
	if c.flow != nil {
		c.flow.dispatch(ctx, c.route)
	}
}

// route queues a handled request, arrived at the given time, on the server
// the Director picked.
func (c *cluster) route(h handled, a *arrival, at time.Duration) {
	a.parsed = nil
	if h.err != nil {
		return // a rejection, counted by the Director's Stats
	}
	x, r := h.x, a.r
	i, ok := c.index[x.Decision.Endpoints[0]]
	s := c.servers[i]
	if !ok || s.blocksFor(r.PromptTokens+r.OutputTokens) > len(s.kv.blocks) {
		// Not a server of the pool, or larger than a server's whole KV cache.
		c.failed++
		x.Close(errors.New("sim: request cannot be served"))
		return
	}
	c.perServer[i]++
	c.outstanding++
	s.enqueue(&seq{req: r, user: x, arrival: at, hashes: a.hashes})
	if !s.busy {
		c.step(i)
		c.flushKV(i)
	}
}

// complete sends the response through the Exchange and records the request.
func (c *cluster) complete(q *seq) {
	c.outstanding--
	c.completed++
	r := q.req
	x := q.user.(*requestcontrol.Exchange)
	x.ResponseHeaders("", http.StatusOK, http.Header{"Content-Type": {"application/json"}})
	c.resp = append(c.resp[:0], `{"object":"text_completion","model":`...)
	c.resp = strconv.AppendQuote(c.resp, r.Model)
	c.resp = append(c.resp, `,"choices":[],"usage":{"prompt_tokens":`...)
	c.resp = strconv.AppendInt(c.resp, int64(r.PromptTokens), 10)
	c.resp = append(c.resp, `,"completion_tokens":`...)
	c.resp = strconv.AppendInt(c.resp, int64(r.OutputTokens), 10)
	c.resp = append(c.resp, `,"total_tokens":`...)
	c.resp = strconv.AppendInt(c.resp, int64(r.PromptTokens+r.OutputTokens), 10)
	c.resp = append(c.resp, `,"prompt_tokens_details":{"cached_tokens":`...)
	c.resp = strconv.AppendInt(c.resp, int64(q.cached), 10)
	c.resp = append(c.resp, `}}}`...)
	x.ResponseBody(c.resp, true)
	x.Close(nil)
	q.user = nil
	c.ttft = append(c.ttft, (q.firstToken - q.arrival).Seconds())
	c.e2e = append(c.e2e, (q.done - q.arrival).Seconds())
	c.queue = append(c.queue, (q.admittedAt - q.arrival).Seconds())
	c.prompt += int64(r.PromptTokens)
	c.cached += int64(q.cached)
	c.output += int64(r.OutputTokens)
	c.last = max(c.last, q.done)
}

// letters spreads the 8 nibbles of v over 8 bytes as the letters 'a'..'p'.
func letters(v uint32) uint64 {
	x := uint64(v)
	x = (x | x<<16) & 0x0000ffff0000ffff
	x = (x | x<<8) & 0x00ff00ff00ff00ff
	x = (x | x<<4) & 0x0f0f0f0f0f0f0f0f
	return x + 0x6161616161616161
}

// appendBody appends a /v1/completions body whose prompt is the request's
// units as text: 4 bytes per token (the approximate producer's
// pseudo-token), each unit's text derived from its id alone.
func appendBody(b []byte, r *Request, blockTokens int) []byte {
	b = slices.Grow(b, 64+len(r.Model)+4*r.PromptTokens)
	b = append(b, `{"model":`...)
	b = strconv.AppendQuote(b, r.Model)
	b = append(b, `,"max_tokens":`...)
	b = strconv.AppendInt(b, int64(r.OutputTokens), 10)
	b = append(b, `,"prompt":"`...)
	left := r.PromptTokens * 4
	per := blockTokens * 4
	start := len(b)
	b = b[:start+min(left, per*len(r.Units))]
	dst := b[start:]
	for _, u := range r.Units {
		if len(dst) == 0 {
			break
		}
		n := min(per, len(dst))
		unitText(dst[:n], u)
		dst = dst[n:]
	}
	return append(b, `"}`...)
}

// appendUnit appends the first n bytes of unit u's text (unitText).
func appendUnit(b []byte, u uint64, n int) []byte {
	start := len(b)
	b = slices.Grow(b, n)[:start+n]
	unitText(b[start:], u)
	return b
}

// unitText fills dst with the first len(dst) bytes of unit u's text. The
// first 16 bytes spell mix(u), so different units start differently; the
// rest is copied from textPool at an offset mix(u) also gives: a copy, not
// a generator step per 16 bytes, since the feeder writes 29 KB of prompt
// per tenants request.
func unitText(dst []byte, u uint64) {
	v := mix(u + 0x9e3779b97f4a7c15)
	if len(dst) >= 16 {
		binary.LittleEndian.PutUint64(dst, letters(uint32(v)))
		binary.LittleEndian.PutUint64(dst[8:], letters(uint32(v>>32)))
		dst = dst[16:]
	} else {
		var w [16]byte
		binary.LittleEndian.PutUint64(w[:], letters(uint32(v)))
		binary.LittleEndian.PutUint64(w[8:], letters(uint32(v>>32)))
		dst = dst[copy(dst, w[:]):]
	}
	off := int(v>>48) & (len(textPool) - 64)
	if len(dst) == 48 { // 16-token blocks: a fixed-size copy, inlined
		*(*[48]byte)(dst) = *(*[48]byte)(textPool[off:])
		return
	}
	for ; len(dst) > 0; off = 0 {
		dst = dst[copy(dst, textPool[off:]):]
	}
}

// textPool is the text that units' texts continue with: 64 KiB of letters
// from a fixed LCG, the same in every run.
var textPool = func() []byte {
	p := make([]byte, 1<<16)
	v := uint64(0x2545f4914f6cdd1d)
	for i := 0; i < len(p); i += 8 {
		v = v*6364136223846793005 + 1442695040888963407
		binary.LittleEndian.PutUint64(p[i:], letters(uint32(v>>32)))
	}
	return p
}()
