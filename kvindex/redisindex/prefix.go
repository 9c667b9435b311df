package redisindex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/eppkit/eppkit/kvindex"
)

// PrefixIndex is an approximate prefix index (kvindex.PrefixStore) kept in
// Redis, so that every picker replica sharing the server sees what any of
// them credited. Its semantics are those of kvindex.PrefixIndex: an endpoint
// holds at most its capacity in blocks, least recently credited prefixes are
// evicted tails first, and only a run of consecutive blocks from block 0
// counts.
//
// Each endpoint is one sorted set of its block hashes (8 bytes each), scored
// by recency and depth, mirrored block by block in a hash of each block's
// holders (see the package documentation). MatchContext is one round trip (a
// script that bisects the chain once for all endpoints); Add,
// SetCapacity and RemoveEndpoint are queued and written in the background in
// pipelined batches, in the order they were called. Flush waits for them.
//
// A PrefixIndex is safe for concurrent use. Close it to stop its writer.
type PrefixIndex struct {
	c          *conn
	defaultCap int
	ttl        int64

	queue   chan prefixOp
	closing chan struct{}
	mu      sync.RWMutex // guards closed against enqueues
	closed  bool

	caps    sync.Map // endpoint → capacity set through this replica (int)
	keys    sync.Map // endpoint → its set's and id key, for endpoints written
	capsKey string
	// h names the holders hash and what goes with it, shared by all
	// endpoints.
	h holderKeys
	m *mirror // nil unless Config.Mirror
}

// endpointKeys are the keys of one endpoint: its sorted set and its id.
type endpointKeys struct{ set, id string }

// prefixOp is one queued update.
type prefixOp struct {
	kind     byte // 'a' Add, 'c' SetCapacity, 'r' RemoveEndpoint, 'f' Flush barrier
	endpoint string
	chain    []uint64   // Add: a copy of the caller's hashes
	more     [][]uint64 // Add: later chains merged into it (coalesce)
	capacity int
	done     chan struct{} // closed once a barrier is reached
}

var _ kvindex.PrefixStore = (*PrefixIndex)(nil)

// NewPrefixIndex returns the index in the server cfg names; icfg gives the
// default capacity. It does not connect: the first call does, and a server
// that is down is retried on every later call.
func NewPrefixIndex(cfg Config, icfg kvindex.PrefixIndexConfig) (*PrefixIndex, error) {
	c, err := newConn(cfg)
	if err != nil {
		return nil, err
	}
	if icfg.DefaultCapacity <= 0 {
		icfg.DefaultCapacity = kvindex.DefaultCapacity
	}
	x := &PrefixIndex{
		c:          c,
		defaultCap: icfg.DefaultCapacity,
		ttl:        c.cfg.ttlMillis(),
		queue:      make(chan prefixOp, c.cfg.QueueSize),
		closing:    make(chan struct{}),
		capsKey:    c.cfg.KeyPrefix + "a:cap",
		h:          newHolderKeys(c.cfg.KeyPrefix, "a", 1),
	}
	c.wg.Add(1)
	go x.write()
	if x.ttl > 0 {
		c.every(c.refreshPeriod(), x.refresh)
	}
	c.every(c.refreshPeriod(), func() { sweep(x.c, x.h) })
	if c.cfg.Mirror {
		x.m = newMirror(c, x.h)
	}
	return x, nil
}

// keysOf returns the keys of an endpoint.
func (x *PrefixIndex) keysOf(endpoint string) endpointKeys {
	if k, ok := x.keys.Load(endpoint); ok {
		return k.(endpointKeys)
	}
	return endpointKeys{set: x.c.cfg.KeyPrefix + "a:" + endpoint, id: x.h.idPrefix + endpoint}
}

// MatchContext sets matched[i] to the number of consecutive blocks, from
// block 0, of the chain hashes that endpoints[i] holds, in one round trip
// bounded by the configured Timeout (and ctx). On an error, or while the
// backend is marked down, every matched[i] is 0 and the error says why. It
// panics if matched is shorter than endpoints.
func (x *PrefixIndex) MatchContext(ctx context.Context, hashes []uint64, endpoints []string, matched []int) error {
	matched = matched[:len(endpoints)]
	clear(matched)
	if len(hashes) == 0 || len(endpoints) == 0 {
		return nil
	}
	hashes = hashes[:min(len(hashes), MaxChain)]
	if x.m != nil && x.m.matchPrefix(hashes, endpoints, matched) {
		return nil
	}
	if !x.c.up() {
		return ErrUnavailable
	}
	keys := make([]string, 1+len(endpoints))
	keys[0] = x.h.hold
	for i, e := range endpoints {
		keys[1+i] = x.keysOf(e).id
	}
	buf := getBuf(8 * len(hashes))
	defer putBuf(buf)
	*buf = pack((*buf)[:0], hashes)
	cctx, cancel := context.WithTimeout(ctx, x.c.cfg.Timeout)
	res, err := prefixMatchScript.Run(cctx, x.c.client, keys, *buf).Int64Slice()
	cancel()
	if err == nil && len(res) != len(endpoints) {
		err = fmt.Errorf("match script returned %d counts for %d endpoints", len(res), len(endpoints))
	}
	if err := x.c.done(ctx, "match", err); err != nil {
		return err
	}
	x.c.lookups.Add(1)
	for i, n := range res {
		matched[i] = int(n)
	}
	return nil
}

// Add credits endpoint with the chain hashes[0..n), as kvindex.PrefixIndex
// does: all its blocks become the endpoint's most recent, up to its
// capacity. The update is queued; it is dropped (and counted) when the
// queue is full.
func (x *PrefixIndex) Add(endpoint string, hashes []uint64) {
	if len(hashes) == 0 {
		return
	}
	hashes = hashes[:min(len(hashes), MaxChain)]
	c, _ := x.caps.Load(endpoint)
	capacity, _ := c.(int)
	x.keys.LoadOrStore(endpoint, x.keysOf(endpoint))
	x.enqueue(prefixOp{kind: 'a', endpoint: endpoint, chain: slices.Clone(hashes), capacity: capacity})
}

// SetCapacity sets how many blocks endpoint may hold, for every replica,
// evicting its least recently used blocks if it holds more. Zero or less
// restores the default capacity. The update is queued.
func (x *PrefixIndex) SetCapacity(endpoint string, blocks int) {
	if blocks <= 0 {
		x.caps.Delete(endpoint)
		blocks = 0
	} else {
		x.caps.Store(endpoint, blocks)
	}
	x.keys.LoadOrStore(endpoint, x.keysOf(endpoint))
	x.enqueue(prefixOp{kind: 'c', endpoint: endpoint, capacity: blocks})
}

// RemoveEndpoint forgets endpoint and its blocks, for every replica. The
// update is queued.
func (x *PrefixIndex) RemoveEndpoint(endpoint string) {
	x.caps.Delete(endpoint)
	x.keys.Delete(endpoint)
	x.enqueue(prefixOp{kind: 'r', endpoint: endpoint})
}

// Flush waits until every update queued before it was written (or dropped),
// or ctx ends; with Config.Mirror, also until the mirror has read them, so
// that this replica's lookups see them.
func (x *PrefixIndex) Flush(ctx context.Context) error {
	done := make(chan struct{})
	x.mu.RLock()
	if x.closed {
		x.mu.RUnlock()
		return errors.New("redisindex: index closed")
	}
	select {
	case x.queue <- prefixOp{kind: 'f', done: done}:
		x.mu.RUnlock()
	case <-ctx.Done():
		x.mu.RUnlock()
		return ctx.Err()
	}
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if x.m != nil {
		return x.m.catchUp(ctx)
	}
	return nil
}

// BackendStats returns the index's counters.
func (x *PrefixIndex) BackendStats() kvindex.BackendStats { return x.c.stats() }

// Close writes what is queued (bounded by WriteTimeout), stops the
// background work and closes the connections. Updates after Close are
// ignored.
func (x *PrefixIndex) Close() error {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return nil
	}
	x.closed = true
	close(x.closing)
	x.mu.Unlock()
	return x.c.close()
}

func (x *PrefixIndex) enqueue(op prefixOp) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		return
	}
	select {
	case x.queue <- op:
	default:
		x.c.dropped.Add(1)
	}
}

// maxBatch bounds the updates written in one pipeline.
const maxBatch = 256

// write is the writer goroutine: it takes what is queued, up to maxBatch
// updates, waiting up to BatchDelay after the first for more (a Flush ends
// the wait), and writes it in one pipeline. After Close it writes what is
// left, all within one WriteTimeout, and returns.
func (x *PrefixIndex) write() {
	defer x.c.wg.Done()
	batch := make([]prefixOp, 0, maxBatch)
	ctx, closing := context.Background(), false
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		select {
		case op := <-x.queue:
			batch = append(batch, op)
		case <-x.closing:
			if !closing {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, x.c.cfg.WriteTimeout)
				defer cancel()
				closing = true
			}
		}
		// Wait a moment for more: the credits of requests that share a
		// prompt's prefix merge (coalesce), and the server refreshes each
		// block once per batch rather than once per request.
		if !closing && len(batch) > 0 && batch[0].kind != 'f' && x.c.cfg.BatchDelay > 0 {
			linger.Reset(x.c.cfg.BatchDelay)
		wait:
			for len(batch) < maxBatch && batch[len(batch)-1].kind != 'f' {
				select {
				case op := <-x.queue:
					batch = append(batch, op)
				case <-linger.C:
					break wait
				case <-x.closing:
					break wait
				}
			}
			linger.Stop()
		}
	more:
		for len(batch) < maxBatch {
			select {
			case op := <-x.queue:
				batch = append(batch, op)
			default:
				break more
			}
		}
		if len(batch) > 0 {
			x.writeBatch(ctx, batch)
			clear(batch)
			batch = batch[:0]
		}
		if closing && len(x.queue) == 0 {
			return // closing, and nothing more can be queued
		}
	}
}

// writeBatch writes the updates of batch in one pipeline, bounded by
// WriteTimeout and ctx, and releases its barriers. When the server lost its
// scripts it loads them and writes again from the first update that failed,
// so the order of updates is kept.
func (x *PrefixIndex) writeBatch(ctx context.Context, batch []prefixOp) {
	defer func() {
		for _, op := range batch {
			if op.kind == 'f' {
				close(op.done)
			}
		}
	}()
	ops := make([]prefixOp, 0, len(batch))
	for _, op := range batch {
		if op.kind != 'f' {
			ops = append(ops, op)
		}
	}
	if len(ops) == 0 {
		return
	}
	if !x.c.up() {
		x.c.dropped.Add(uint64(len(ops)))
		return
	}
	ops = coalesce(ops)
	ctx, cancel := context.WithTimeout(ctx, x.c.cfg.WriteTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		cmds := x.pipeline(ctx, ops)
		failed, err := firstError(cmds)
		if isNoScript(err) && attempt == 0 {
			if err = x.c.loadScripts(ctx); err == nil {
				ops = ops[failed:]
				continue
			}
		}
		if err != nil {
			x.c.dropped.Add(uint64(len(cmds) - max(failed, 0)))
		} else {
			x.c.writes.Add(1)
		}
		_ = x.c.done(context.Background(), "write", err)
		return
	}
}

// firstError returns the first failed reply of cmds and its index, or -1
// and nil.
func firstError(cmds []redis.Cmder) (int, error) {
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return i, err
		}
	}
	return -1, nil
}

// pipeline sends the updates of ops (no barriers) in one round trip and
// returns their replies, failed or not, in order.
func (x *PrefixIndex) pipeline(ctx context.Context, ops []prefixOp) []redis.Cmder {
	pipe := x.c.client.Pipeline()
	for _, op := range ops {
		ek := x.keysOf(op.endpoint)
		keys := []string{ek.set, x.capsKey, x.h.hold, ek.id, x.h.owners, x.h.log, x.h.epoch}
		switch op.kind {
		case 'a':
			prefixAddScript.EvalSha(ctx, pipe, keys, addArgs(op, x.defaultCap, x.ttl)...)
		case 'c':
			prefixCapacityScript.EvalSha(ctx, pipe, keys, op.endpoint, op.capacity, x.defaultCap, x.ttl)
		case 'r':
			prefixRemoveScript.EvalSha(ctx, pipe, keys, op.endpoint)
		}
	}
	cmds, _ := pipe.Exec(ctx) // the errors are the commands'
	return cmds
}

// coalesce merges the Adds of one endpoint that no other update of it
// separates into one Add of several chains (ops.more), in order: under load
// credits of requests that share a prompt's prefix then refresh each block
// once per batch instead of once per request. Later chains outrank earlier
// ones, as if added one after the other; the result is the same.
func coalesce(ops []prefixOp) []prefixOp {
	out := ops[:0:0]
	open := map[string]int{} // endpoint → its merged Add in out
	for _, op := range ops {
		if op.kind != 'a' {
			delete(open, op.endpoint)
			out = append(out, op)
			continue
		}
		if i, ok := open[op.endpoint]; ok {
			out[i].more = append(out[i].more, op.chain)
			out[i].capacity = op.capacity
			continue
		}
		open[op.endpoint] = len(out)
		out = append(out, op)
	}
	return out
}

// addArgs are the arguments of prefixAddScript for op. A block that a
// later chain credits again is left to that chain; as blocks are chained
// hashes, the blocks a chain leaves to later ones are a run from block 0.
func addArgs(op prefixOp, defaultCap int, ttl int64) []any {
	chains := append([][]uint64{op.chain}, op.more...)
	start := make([]int, len(chains)) // blocks each chain leaves to later ones
	if len(chains) > 1 {
		seen := map[uint64]struct{}{}
		for j := len(chains) - 1; j >= 0; j-- {
			c := chains[j]
			for start[j] < len(c) {
				if _, ok := seen[c[start[j]]]; !ok {
					break
				}
				start[j]++
			}
			for _, h := range c[start[j]:] {
				seen[h] = struct{}{}
			}
		}
	}
	n := 0
	for j, c := range chains {
		n += len(c) - start[j]
	}
	packed := make([]byte, 0, 8*n)
	for j, c := range chains {
		packed = pack(packed, c[start[j]:])
	}
	args := make([]any, 0, 5+2*len(chains)+n)
	args = append(args, op.endpoint, op.capacity, defaultCap, ttl, len(chains))
	all := string(packed)
	for j, c := range chains {
		k := len(c) - start[j]
		args = append(args, start[j], k)
		args = appendItems(args, all[:8*k])
		all = all[8*k:]
	}
	return args
}

// refresh extends the TTL of the endpoints this replica writes for.
func (x *PrefixIndex) refresh() {
	if !x.c.up() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), x.c.cfg.WriteTimeout)
	defer cancel()
	pipe := x.c.client.Pipeline()
	ttl := x.c.cfg.TTL
	pipe.PExpire(ctx, x.capsKey, ttl)
	x.keys.Range(func(_, k any) bool {
		pipe.PExpire(ctx, k.(endpointKeys).set, ttl)
		pipe.PExpire(ctx, k.(endpointKeys).id, ttl)
		return true
	})
	for _, k := range x.h.ttlKeys() { // last, so that they outlive every endpoint's keys
		pipe.PExpire(ctx, k, ttl)
	}
	_, err := pipe.Exec(ctx)
	if errors.Is(err, redis.Nil) {
		err = nil
	}
	_ = x.c.done(context.Background(), "refresh", err)
}

// bufs recycles the packed chains of lookups.
var bufs = sync.Pool{New: func() any { return new([]byte) }}

func getBuf(n int) *[]byte {
	b := bufs.Get().(*[]byte)
	if cap(*b) < n {
		*b = make([]byte, 0, n)
	}
	return b
}

func putBuf(b *[]byte) {
	if cap(*b) <= 64<<10 {
		bufs.Put(b)
	}
}
