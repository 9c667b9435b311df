package redisindex

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/eppkit/eppkit/kvindex"
)

// EventIndex is the precise index (kvindex.EventStore) kept in Redis: which
// endpoints hold which blocks, in which tier, as the engines report through
// KV events, shared by every picker replica using the server. Any replica
// may apply an engine's events — one, several or all of them following the
// same engines — and a replica that applies none still sees everything.
// Keys are those of kvindex.EventKeys, so requests are looked up exactly as
// with kvindex.EventIndex.
//
// Who holds each block key is one entry of a shared holders hash (a bitmap,
// two bits per endpoint: GPU and CPU); each endpoint has an id and a hash
// of mappings (engine hash → block key, so removals and parent hashes
// resolve; plus the sequence number of the last batch applied). Apply
// writes one batch in one round trip, atomically; MatchContext reads in one
// round trip, the holders of the request's keys once for all endpoints.
//
// Applying is idempotent, and a batch older than the last one applied for
// its endpoint — from a replica lagging behind another — is skipped, so
// replicas following the same engine cannot undo each other's newer events.
// An EventIndex is safe for concurrent use; Close it to stop its
// background refresh.
type EventIndex struct {
	c       *conn
	keys    *kvindex.EventKeys // BlockKeys (safe for concurrent use)
	icfg    kvindex.EventIndexConfig
	keyers  sync.Pool // *kvindex.EventKeys for StoredKeys
	weights [2]float64
	exact   bool
	ttl     int64

	mu  sync.Mutex
	eps map[string]*eventEndpoint

	modelsKey string
	// h names the holders hash and what goes with it, shared by all
	// endpoints.
	h        holderKeys
	m        *mirror // nil unless Config.Mirror
	modelsMu sync.RWMutex
	models   map[string]struct{} // base models seen in events (exact keys)

	st struct {
		batches, stored, removed, clears, unknownRemoves, unknownParents, unresolved,
		malformed, blockSizeMisses, skippedGroups, full, stale atomic.Uint64
	}
}

// eventEndpoint is what a replica keeps of an endpoint it applies events
// for.
type eventEndpoint struct {
	mu                sync.Mutex // serialises the endpoint's applies
	name, id, mapping string     // its name and keys
	// memo remembers the keys of the engine hashes this replica stored, so
	// a parent hash usually resolves without a round trip. An engine hash
	// always names the same block, so a remembered key is never wrong; the
	// memo is bounded and cleared with the endpoint.
	memo map[uint64]uint64
}

// maxMemo bounds an endpoint's memo.
const maxMemo = 1 << 16

var _ kvindex.EventStore = (*EventIndex)(nil)

// NewEventIndex returns the index in the server cfg names; icfg gives the
// block size, key algorithm and tier weights, as for kvindex.EventIndex. It
// does not connect: the first call does.
func NewEventIndex(cfg Config, icfg kvindex.EventIndexConfig) (*EventIndex, error) {
	keys, err := kvindex.NewEventKeys(icfg)
	if err != nil {
		return nil, err
	}
	if icfg.GPUWeight < 0 || icfg.CPUWeight < 0 {
		return nil, errors.New("redisindex: tier weights must be ≥ 0")
	}
	c, err := newConn(cfg)
	if err != nil {
		return nil, err
	}
	x := &EventIndex{
		c:         c,
		keys:      keys,
		icfg:      icfg,
		weights:   kvindex.TierWeights(icfg),
		exact:     keys.Exact(),
		ttl:       c.cfg.ttlMillis(),
		eps:       map[string]*eventEndpoint{},
		modelsKey: c.cfg.KeyPrefix + "p:models",
		h:         newHolderKeys(c.cfg.KeyPrefix, "p", 2),
		models:    map[string]struct{}{},
	}
	x.keyers.New = func() any {
		k, _ := kvindex.NewEventKeys(icfg) // icfg was checked above
		return k
	}
	if x.ttl > 0 || x.exact {
		c.every(c.refreshPeriod(), func() { _ = x.Refresh(context.Background()) })
	}
	c.every(c.refreshPeriod(), func() { sweep(x.c, x.h) })
	if c.cfg.Mirror {
		x.m = newMirror(c, x.h)
	}
	return x, nil
}

// idKey is the key of an endpoint's id.
func (x *EventIndex) idKey(endpoint string) string {
	return x.h.idPrefix + endpoint
}

// endpoint returns the replica's state of the named endpoint, creating it.
func (x *EventIndex) endpoint(name string) *eventEndpoint {
	x.mu.Lock()
	defer x.mu.Unlock()
	ep, ok := x.eps[name]
	if !ok {
		ep = &eventEndpoint{name: name, id: x.idKey(name), mapping: x.c.cfg.KeyPrefix + "p:m:" + name}
		x.eps[name] = ep
	}
	return ep
}

// BlockTokens returns the tokens per block.
func (x *EventIndex) BlockTokens() int { return x.keys.BlockTokens() }

// BlockKeys appends the keys of the full blocks of a request's token ids to
// dst, as kvindex.EventIndex.BlockKeys does. With exact keys the base models
// are those seen in events by any replica (reloaded by Refresh).
func (x *EventIndex) BlockKeys(dst []uint64, model, salt string, tokens []uint32, maxBlocks int) []uint64 {
	base := false
	if x.exact {
		x.modelsMu.RLock()
		_, base = x.models[model]
		x.modelsMu.RUnlock()
	}
	return x.keys.BlockKeys(dst, model, salt, tokens, maxBlocks, base)
}

// MatchContext sets matched[i] to the tier-weighted number of consecutive
// blocks, from block 0, of the request's keys that endpoints[i] holds, as
// kvindex.EventIndex.Match does, in one round trip bounded by the
// configured Timeout (and ctx). On an error, or while the backend is marked
// down, every matched[i] is 0 and the error says why. It panics if matched
// is shorter than endpoints.
func (x *EventIndex) MatchContext(ctx context.Context, keys []uint64, endpoints []string, matched []float64) error {
	matched = matched[:len(endpoints)]
	clear(matched)
	if len(keys) == 0 || len(endpoints) == 0 {
		return nil
	}
	if x.m != nil {
		var buf [128]int
		counts := buf[:]
		if 2*len(endpoints) > len(buf) {
			counts = make([]int, 2*len(endpoints))
		}
		gpu, cpu := counts[:len(endpoints)], counts[len(endpoints):2*len(endpoints)]
		if x.m.matchEvents(keys, endpoints, gpu, cpu) {
			for i := range endpoints {
				matched[i] = float64(gpu[i])*x.weights[kvindex.TierGPU] + float64(cpu[i])*x.weights[kvindex.TierCPU]
			}
			return nil
		}
	}
	if !x.c.up() {
		return ErrUnavailable
	}
	hkeys := make([]string, 0, 1+len(endpoints))
	hkeys = append(hkeys, x.h.hold)
	for _, e := range endpoints {
		hkeys = append(hkeys, x.idKey(e))
	}
	buf := getBuf(8 * len(keys))
	defer putBuf(buf)
	b := (*buf)[:0]
	for _, k := range keys {
		b = pack(b, []uint64{nonzero(k)}) // as stored: kvindex.EventKeys never yields key 0
	}
	*buf = b
	cctx, cancel := context.WithTimeout(ctx, x.c.cfg.Timeout)
	res, err := eventMatchScript.Run(cctx, x.c.client, hkeys, b).Int64Slice()
	cancel()
	if err == nil && len(res) != 2*len(endpoints) {
		err = fmt.Errorf("match script returned %d counts for %d endpoints", len(res), len(endpoints))
	}
	if err := x.c.done(ctx, "match", err); err != nil {
		return err
	}
	x.c.lookups.Add(1)
	for i := range endpoints {
		matched[i] = float64(res[2*i])*x.weights[kvindex.TierGPU] + float64(res[2*i+1])*x.weights[kvindex.TierCPU]
	}
	return nil
}

// Apply applies a decoded batch of the named endpoint's events in order,
// in one round trip bounded by WriteTimeout, as kvindex.EventIndex.Apply
// does. A batch that fails to apply is counted (BackendStats.Dropped) and
// lost: the index misses its blocks until the engine reports them again.
func (x *EventIndex) Apply(endpoint string, b *kvindex.Batch) {
	ep := x.endpoint(endpoint)
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if !x.c.up() {
		x.c.dropped.Add(1)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), x.c.cfg.WriteTimeout)
	defer cancel()
	k := x.keyers.Get().(*kvindex.EventKeys)
	defer x.keyers.Put(k)

	newModel := ""
	if x.exact {
		x.modelsMu.RLock()
		if _, ok := x.models[b.Model]; !ok {
			newModel = b.Model
		}
		x.modelsMu.RUnlock()
	}
	args := make([]any, 0, 4+3*len(b.Events))
	args = append(args, formatSeq(b.Seq), x.ttl, x.c.cfg.MaxEntries, newModel, endpoint)
	var (
		keys   []uint64
		hashes []uint64
	)
	for i := range b.Events {
		ev := &b.Events[i]
		if ev.HasGroup && ev.GroupIdx != 0 {
			x.st.skippedGroups.Add(1)
			continue
		}
		tier := 1 + int(kvindex.TierOf(ev.Medium)) // the script's KEYS index
		switch ev.Kind {
		case kvindex.BlockStored:
			if len(ev.BlockHashes) == 0 {
				continue
			}
			if x.exact {
				keys, _ = k.StoredKeys(keys[:0], b.Model, ev, 0, false)
				args = appendOp(args, "K", tier, keys)
				continue
			}
			hashes = engineHashes(hashes[:0], b.Model, ev.BlockHashes)
			if len(ev.TokenIDs) == 0 { // a tier move: the blocks must be known
				args = appendOp(args, "M", tier, hashes)
				continue
			}
			parent, parentOK := x.parent(ctx, ep, b.Model, ev)
			var err error
			keys, err = k.StoredKeys(keys[:0], b.Model, ev, parent, parentOK)
			switch err {
			case nil:
			case kvindex.ErrBlockSizeMismatch:
				x.st.blockSizeMisses.Add(1)
				continue
			case kvindex.ErrUnknownParent:
				x.st.unknownParents.Add(1)
				continue
			default:
				x.st.malformed.Add(1)
				continue
			}
			for j, key := range keys {
				ep.remember(hashes[j], key)
			}
			args = appendStore(args, tier, hashes, keys)
		case kvindex.BlockRemoved:
			if x.exact {
				keys = keys[:0]
				for _, h := range ev.BlockHashes {
					keys = append(keys, nonzero(h))
				}
				args = appendOp(args, "D", tier, keys)
				continue
			}
			hashes = engineHashes(hashes[:0], b.Model, ev.BlockHashes)
			args = appendOp(args, "R", tier, hashes)
		case kvindex.AllBlocksCleared:
			clear(ep.memo)
			x.st.clears.Add(1)
			args = appendOp(args, "C", 0, nil)
		}
	}
	res, err := eventApplyScript.Run(ctx, x.c.client, []string{x.h.hold, ep.id, ep.mapping, x.modelsKey, x.h.owners, x.h.log, x.h.epoch}, args...).Int64Slice()
	if err == nil && len(res) != 1 && len(res) != 5 {
		err = fmt.Errorf("apply script returned %d counts", len(res))
	}
	if x.c.done(context.Background(), "apply", err) != nil {
		x.c.dropped.Add(1)
		return
	}
	x.c.writes.Add(1)
	if res[0] < 0 {
		x.st.stale.Add(1)
		return
	}
	if newModel != "" {
		x.modelsMu.Lock()
		x.models[newModel] = struct{}{}
		x.modelsMu.Unlock()
	}
	x.st.batches.Add(1)
	x.st.stored.Add(uint64(res[0]))
	x.st.removed.Add(uint64(res[1]))
	x.st.unknownRemoves.Add(uint64(res[2]))
	x.st.unresolved.Add(uint64(res[3]))
	x.st.full.Add(uint64(res[4]))
}

// appendOp appends an operation of the apply script to args: code, tier,
// the count of items, then the items, 8 bytes each.
func appendOp(args []any, code string, tier int, items []uint64) []any {
	args = append(args, code, tier, len(items))
	return appendItems(args, string(pack(make([]byte, 0, 8*len(items)), items)))
}

// appendStore appends a store of the apply script to args: the keys, then
// (engine hash, key) pairs.
func appendStore(args []any, tier int, hashes, keys []uint64) []any {
	args = append(args, "S", tier, len(keys))
	b := pack(make([]byte, 0, 24*len(keys)), keys)
	for i, k := range keys {
		b = pack(b, []uint64{hashes[i], k})
	}
	return appendItems(args, string(b))
}

// nonzero maps 0 to 1, as the key of a block: kvindex never stores key 0.
func nonzero(h uint64) uint64 {
	if h == 0 {
		return 1
	}
	return h
}

// engineHashes appends the engine hashes hs of model, namespaced, to dst.
func engineHashes(dst []uint64, model string, hs []uint64) []uint64 {
	for _, h := range hs {
		dst = append(dst, kvindex.EngineHash(model, h))
	}
	return dst
}

// remember notes that engine hash h names block key.
func (ep *eventEndpoint) remember(h, key uint64) {
	if ep.memo == nil || len(ep.memo) >= maxMemo {
		ep.memo = make(map[uint64]uint64, 64)
	}
	ep.memo[h] = key
}

// parent resolves the key of a store's parent block: from the memo, else
// from the endpoint's mappings on the server (a replica that started late,
// or whose memo forgot it).
func (x *EventIndex) parent(ctx context.Context, ep *eventEndpoint, model string, ev *kvindex.Event) (uint64, bool) {
	if !ev.HasParent {
		return 0, false
	}
	h := kvindex.EngineHash(model, ev.ParentHash)
	if key, ok := ep.memo[h]; ok {
		return key, true
	}
	v, err := x.c.client.HGet(ctx, ep.mapping, string(pack(nil, []uint64{h}))).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false
	}
	if x.c.done(context.Background(), "resolve parent", err) != nil || len(v) != 8 {
		return 0, false
	}
	key := unpack(v)
	ep.remember(h, key)
	return key, true
}

// unpack reads an 8-byte big-endian string.
func unpack(s string) uint64 {
	var v uint64
	for i := range 8 {
		v = v<<8 | uint64(s[i])
	}
	return v
}

// ClearEndpoint forgets every block the endpoint holds, for every replica,
// as when its engine restarts; its next batch is applied whatever its
// sequence number.
func (x *EventIndex) ClearEndpoint(endpoint string) {
	ep := x.endpoint(endpoint)
	ep.mu.Lock()
	defer ep.mu.Unlock()
	x.st.clears.Add(1)
	ep.memo = nil
	x.del(ep)
}

// RemoveEndpoint forgets the endpoint and its blocks, for every replica.
func (x *EventIndex) RemoveEndpoint(endpoint string) {
	ep := x.endpoint(endpoint)
	ep.mu.Lock()
	defer ep.mu.Unlock()
	x.mu.Lock()
	delete(x.eps, endpoint)
	x.mu.Unlock()
	ep.memo = nil
	x.del(ep)
}

// del deletes an endpoint's keys.
func (x *EventIndex) del(ep *eventEndpoint) {
	if !x.c.up() {
		x.c.dropped.Add(1)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), x.c.cfg.WriteTimeout)
	defer cancel()
	err := eventDropScript.Run(ctx, x.c.client, []string{ep.id, ep.mapping, x.h.log, x.h.epoch}, ep.name).Err() // the sweep clears its bits
	if x.c.done(context.Background(), "clear", err) != nil {
		x.c.dropped.Add(1)
		return
	}
	x.c.writes.Add(1)
}

// Refresh extends the TTL of the endpoints this replica applies events for
// and, with exact keys, reloads the base models every replica has seen. The
// index calls it periodically; a caller may call it to see another
// replica's base models at once.
func (x *EventIndex) Refresh(ctx context.Context) error {
	if !x.c.up() {
		return ErrUnavailable
	}
	ctx, cancel := context.WithTimeout(ctx, x.c.cfg.WriteTimeout)
	defer cancel()
	pipe := x.c.client.Pipeline()
	if ttl := x.c.cfg.TTL; ttl > 0 {
		x.mu.Lock()
		for _, ep := range x.eps {
			pipe.PExpire(ctx, ep.id, ttl)
			pipe.PExpire(ctx, ep.mapping, ttl)
		}
		x.mu.Unlock()
		pipe.PExpire(ctx, x.modelsKey, ttl)
		for _, k := range x.h.ttlKeys() { // last, so that they outlive every endpoint's keys
			pipe.PExpire(ctx, k, ttl)
		}
	}
	var models *redis.StringSliceCmd
	if x.exact {
		models = pipe.SMembers(ctx, x.modelsKey)
	}
	_, err := pipe.Exec(ctx)
	if errors.Is(err, redis.Nil) {
		err = nil
	}
	if err := x.c.done(context.Background(), "refresh", err); err != nil {
		return err
	}
	if models != nil {
		x.modelsMu.Lock()
		for _, m := range models.Val() {
			x.models[m] = struct{}{}
		}
		x.modelsMu.Unlock()
	}
	return nil
}

// Stats returns what this replica applied, as kvindex.EventIndex counts it
// (Conflicts and UnknownEndpoints are not tracked). Stale counts the
// batches skipped because another replica had applied newer ones.
func (x *EventIndex) Stats() (st kvindex.EventIndexStats, stale uint64) {
	return kvindex.EventIndexStats{
		Batches:         x.st.batches.Load(),
		BlocksStored:    x.st.stored.Load(),
		BlocksRemoved:   x.st.removed.Load(),
		Clears:          x.st.clears.Load(),
		UnknownRemoves:  x.st.unknownRemoves.Load(),
		UnknownParents:  x.st.unknownParents.Load(),
		Unresolved:      x.st.unresolved.Load(),
		Malformed:       x.st.malformed.Load(),
		BlockSizeMisses: x.st.blockSizeMisses.Load(),
		SkippedGroups:   x.st.skippedGroups.Load(),
		Full:            x.st.full.Load(),
	}, x.st.stale.Load()
}

// Flush returns at once without Config.Mirror. With it, it waits until the
// mirror has read every change the server had when it was called — the
// batches this replica applied before it included — or ctx ends.
func (x *EventIndex) Flush(ctx context.Context) error {
	if x.m == nil {
		return nil
	}
	return x.m.catchUp(ctx)
}

// BackendStats returns the index's counters of calls to the server.
func (x *EventIndex) BackendStats() kvindex.BackendStats { return x.c.stats() }

// Close stops the background refresh and closes the connections.
func (x *EventIndex) Close() error { return x.c.close() }

// formatSeq is a batch's sequence number as the apply script compares it:
// 20 digits, so that text order is numeric order.
func formatSeq(seq uint64) string {
	s := strconv.FormatUint(seq, 10)
	return "00000000000000000000"[len(s):] + s
}
