package redisindex

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// MirrorStale is how long a mirror (Config.Mirror) may go without reading
// the end of its index's change log — the server is down or slow, or the
// mirror is loading — before lookups stop reading it and go to the server.
const MirrorStale = time.Second

const (
	mirrorBlock = 100 * time.Millisecond // how long one read of the log waits for entries
	mirrorBatch = 1024                   // entries read at a time
	mirrorScan  = 2000                   // holders fields read at a time while loading
	// maxID bounds the ids a mirror accepts: far more endpoints than a pool
	// has at once (ids are reused), few enough that an entry written by
	// something else cannot make it allocate much.
	maxID = 1 << 16
)

// mirror is a replica's copy of an index's holders hash and endpoint ids,
// kept by replaying the index's change log (logLib): every script that
// changes them appends what it changed, in the order it ran, so applying
// the entries in order to a copy of the server's state at some entry
// leaves a copy of the state at the last entry applied. A copy is loaded
// by reading the log's last entry and then the state (not atomically: the
// entries after the one read are applied again, and as each sets or clears
// bits, names or forgets ids, the result is the server's state once they
// are). A gap in the entries (the log was trimmed past this copy, or begun
// again) loads it again.
//
// Lookups read the copy only while it is current: it read the log's end
// within MirrorStale.
type mirror struct {
	c *conn
	h holderKeys

	mu     sync.RWMutex
	hold   bitmaps        // block → bitmap of holders
	ids    map[string]int // endpoint → id
	epoch  uint64         // the last entry applied is epoch-seq; epoch 0: none (the log was empty)
	seq    uint64
	loaded bool          // hold and ids are a copy the entries after epoch-seq bring up to date
	fresh  int64         // unix nanoseconds when a read last reached the log's end; 0: behind
	moved  chan struct{} // closed and replaced whenever the position or fresh changes
}

func newMirror(c *conn, h holderKeys) *mirror {
	m := &mirror{c: c, h: h, moved: make(chan struct{})}
	c.wg.Add(1)
	go m.run()
	return m
}

// run follows the log until the index closes.
func (m *mirror) run() {
	defer m.c.wg.Done()
	for {
		select {
		case <-m.c.stop:
			return
		default:
		}
		if err := m.step(mirrorBlock); err != nil {
			select {
			case <-m.c.stop:
				return
			case <-time.After(mirrorBlock):
			}
		}
	}
}

// step loads the copy if it has none, else reads and applies the log's
// next entries, waiting up to block for some.
func (m *mirror) step(block time.Duration) error {
	if !m.c.up() {
		return ErrUnavailable
	}
	m.mu.RLock()
	loaded, epoch, seq, fresh := m.loaded, m.epoch, m.seq, m.fresh
	m.mu.RUnlock()
	if !loaded {
		return m.load()
	}
	if fresh == 0 {
		block = -1 // catching up: do not wait for entries that may never come
	}
	ctx, cancel := context.WithTimeout(context.Background(), block+m.c.cfg.WriteTimeout)
	defer cancel()
	res, err := m.c.client.XRead(ctx, &redis.XReadArgs{
		Streams: []string{m.h.log, fmt.Sprintf("%d-%d", epoch, seq)},
		Count:   mirrorBatch,
		Block:   block,
	}).Result()
	if errors.Is(err, redis.Nil) { // nothing new: was the log begun again?
		top, err := m.top(ctx)
		if err != nil {
			return err
		}
		m.mu.Lock()
		if m.loaded && m.epoch == epoch && m.seq == seq {
			if top.behind(epoch, seq) {
				m.behind()
			} else {
				m.setFresh()
			}
		}
		m.mu.Unlock()
		return nil
	}
	if err := m.c.done(context.Background(), "mirror", err); err != nil {
		return err
	}
	if len(res) != 1 {
		return fmt.Errorf("redisindex: mirror: %d streams read, want 1", len(res))
	}
	m.apply(res[0].Messages, len(res[0].Messages) < mirrorBatch)
	return nil
}

// logPos is a position in a log: entry epoch-seq, or none.
type logPos struct {
	epoch, seq uint64
	none       bool
}

// behind reports whether the log's last entry p is before entry epoch-seq
// (0-0: none), which means that the log was begun again since.
func (p logPos) behind(epoch, seq uint64) bool {
	if p.none {
		return epoch != 0
	}
	return p.epoch < epoch || p.epoch == epoch && p.seq < seq
}

// top returns the log's last entry.
func (m *mirror) top(ctx context.Context) (logPos, error) {
	msgs, err := m.c.client.XRevRangeN(ctx, m.h.log, "+", "-", 1).Result()
	if err := m.c.done(context.Background(), "mirror", err); err != nil {
		return logPos{}, err
	}
	if len(msgs) == 0 {
		return logPos{none: true}, nil
	}
	e, s, err := parseID(msgs[0].ID)
	return logPos{epoch: e, seq: s}, err
}

// parseID reads a log entry's ID, epoch-seq.
func parseID(id string) (epoch, seq uint64, err error) {
	a, b, ok := strings.Cut(id, "-")
	if ok {
		if epoch, err = strconv.ParseUint(a, 10, 64); err == nil {
			seq, err = strconv.ParseUint(b, 10, 64)
		}
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("redisindex: mirror: bad log entry ID %q", id)
	}
	return epoch, seq, nil
}

// behind marks the copy as to be loaded again. m.mu is held.
func (m *mirror) behind() {
	m.loaded, m.fresh = false, 0
	m.wake()
}

// setFresh notes that the copy reached the log's end now. m.mu is held.
func (m *mirror) setFresh() {
	m.fresh = time.Now().UnixNano()
	m.wake()
}

// wake wakes the waiters of catchUp. m.mu is held.
func (m *mirror) wake() {
	close(m.moved)
	m.moved = make(chan struct{})
}

// apply applies log entries in order; end says they reach the log's end.
// An entry that does not follow the last one applied (a gap: the log was
// trimmed past the copy or begun again), or that cannot be read, marks the
// copy to be loaded again.
func (m *mirror) apply(msgs []redis.XMessage, end bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.loaded {
		return
	}
	for _, msg := range msgs {
		e, s, err := parseID(msg.ID)
		follows := err == nil && (m.epoch == 0 && s == 1 || e == m.epoch && s == m.seq+1)
		if !follows || m.op(msg.Values) != nil {
			m.behind()
			return
		}
		m.epoch, m.seq = e, s
	}
	if end {
		m.setFresh()
	} else {
		m.wake()
	}
}

// op applies one entry of the log. m.mu is held.
func (m *mirror) op(values map[string]any) error {
	k, _ := values["k"].(string)
	p, _ := values["p"].(string)
	v, _ := values["v"].(string)
	switch k {
	case "s", "c":
		pos, err := strconv.Atoi(p)
		if err != nil || pos < 0 || pos >= maxID*m.h.per || len(v)%8 != 0 {
			return errors.New("bad bits entry")
		}
		for i := 0; i < len(v); i += 8 {
			m.hold.set(unpack(v[i:]), pos, k == "s")
		}
	case "x":
		var pos []int
		for _, f := range strings.Split(p, ",") {
			id, err := strconv.Atoi(f)
			if err != nil || id < 0 || id >= maxID || len(v)%8 != 0 {
				return errors.New("bad sweep entry")
			}
			for t := range m.h.per {
				pos = append(pos, m.h.per*id+t)
			}
		}
		for i := 0; i < len(v); i += 8 {
			for _, q := range pos {
				m.hold.set(unpack(v[i:]), q, false)
			}
		}
	case "i":
		id, err := strconv.Atoi(p)
		if err != nil || id < 0 || id >= maxID {
			return errors.New("bad id entry")
		}
		m.ids[v] = id
	case "d":
		delete(m.ids, v)
	case "f":
		id, err := strconv.Atoi(p)
		if err != nil {
			return errors.New("bad free entry")
		}
		for ep, i := range m.ids { // an endpoint whose id key expired
			if i == id {
				delete(m.ids, ep)
			}
		}
	default:
		return fmt.Errorf("unknown entry kind %q", k)
	}
	return nil
}

// load reads a copy of the holders and ids, after the log's last entry, and
// makes it the copy the next entries apply to.
func (m *mirror) load() error {
	call := func(f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), m.c.cfg.WriteTimeout)
		defer cancel()
		return m.c.done(context.Background(), "mirror load", f(ctx))
	}
	var top logPos
	err := call(func(ctx context.Context) (err error) {
		top, err = m.top(ctx)
		return err
	})
	if err != nil {
		return err
	}
	var owners map[string]string
	if err := call(func(ctx context.Context) (err error) {
		owners, err = m.c.client.HGetAll(ctx, m.h.owners).Result()
		return err
	}); err != nil {
		return err
	}
	ids := map[string]int{}
	var names, idKeys []string
	for _, ep := range owners {
		if _, ok := ids[ep]; !ok {
			ids[ep] = -1
			names = append(names, ep)
			idKeys = append(idKeys, m.h.idPrefix+ep)
		}
	}
	if len(idKeys) > 0 {
		var vals []any
		if err := call(func(ctx context.Context) (err error) {
			vals, err = m.c.client.MGet(ctx, idKeys...).Result()
			return err
		}); err != nil {
			return err
		}
		for i, ep := range names {
			s, _ := vals[i].(string)
			if id, err := strconv.Atoi(s); err == nil && id >= 0 && id < maxID && owners[s] == ep {
				ids[ep] = id
			} else {
				delete(ids, ep)
			}
		}
	}
	var size int64
	if err := call(func(ctx context.Context) (err error) {
		size, err = m.c.client.HLen(ctx, m.h.hold).Result()
		return err
	}); err != nil {
		return err
	}
	hold := newBitmaps(int(min(size, 1<<24)))
	for cursor := uint64(0); ; {
		var kv []string
		if err := call(func(ctx context.Context) (err error) {
			kv, cursor, err = m.c.client.HScan(ctx, m.h.hold, cursor, "", mirrorScan).Result()
			return err
		}); err != nil {
			return err
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if len(kv[i]) == 8 && len(kv[i+1]) <= maxID*m.h.per/8 {
				hold.put(unpack(kv[i]), []byte(kv[i+1]))
			}
		}
		if cursor == 0 {
			break
		}
		select {
		case <-m.c.stop:
			return errors.New("redisindex: closed")
		default:
		}
	}
	m.mu.Lock()
	m.hold, m.ids, m.epoch, m.seq, m.loaded = hold, ids, top.epoch, top.seq, true
	m.fresh = 0 // current once a read reaches the log's end
	m.wake()
	m.mu.Unlock()
	m.c.mirrorLoads.Add(1)
	return nil
}

// current reports whether lookups may read the copy. m.mu is held.
func (m *mirror) current() bool {
	return m.loaded && m.fresh != 0 && time.Now().UnixNano()-m.fresh < int64(MirrorStale)
}

// catchUp waits until the copy is current and has applied every entry the
// log held when it was called, or ctx ends.
func (m *mirror) catchUp(ctx context.Context) error {
	if !m.c.up() {
		return ErrUnavailable
	}
	cctx, cancel := context.WithTimeout(ctx, m.c.cfg.WriteTimeout)
	target, err := m.top(cctx)
	cancel()
	if err != nil {
		return err
	}
	for {
		m.mu.RLock()
		ok := m.current() && (target.none || m.epoch > target.epoch || m.epoch == target.epoch && m.seq >= target.seq)
		moved := m.moved
		m.mu.RUnlock()
		if ok {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// matchPrefix does what the approximate index's match script does, from
// the copy: matched[i] is the run of blocks, from block 0, of hashes that
// endpoints[i] holds. What an endpoint holds is closed under prefixes, so
// its run ends at the first block it lacks, found by bisection. It reports
// false, changing nothing, when the copy is not current.
func (m *mirror) matchPrefix(hashes []uint64, endpoints []string, matched []int) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.current() {
		return false
	}
	var buf [64]holder
	for _, a := range m.holders(buf[:0], endpoints) {
		matched[a.i] = sort.Search(len(hashes), func(d int) bool {
			return m.hold.bits(hashes[d], a.pos)&1 == 0
		})
	}
	m.c.mirrorLookups.Add(1)
	return true
}

// matchEvents does what the precise index's match script does, from the
// copy: gpu[i] and cpu[i] count the blocks of the run, from block 0, of
// keys that endpoints[i] holds on the GPU, and only on the CPU. It reports
// false, changing nothing, when the copy is not current.
func (m *mirror) matchEvents(keys []uint64, endpoints []string, gpu, cpu []int) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.current() {
		return false
	}
	var buf [64]holder
	alive := m.holders(buf[:0], endpoints)
	for _, key := range keys {
		if len(alive) == 0 {
			break
		}
		x, w := m.hold.bitmap(nonzero(key))
		k := 0
		for _, a := range alive {
			b := bitsOf(x, w, a.pos)
			if b == 0 {
				continue // neither tier: its run ends
			}
			if b&1 != 0 {
				gpu[a.i]++
			} else {
				cpu[a.i]++
			}
			alive[k] = a
			k++
		}
		alive = alive[:k]
	}
	m.c.mirrorLookups.Add(1)
	return true
}

// holder is endpoints[i], whose bits in a bitmap start at pos.
type holder struct{ i, pos int }

// holders appends the endpoints that have an id, with where their bits
// are. m.mu is held.
func (m *mirror) holders(dst []holder, endpoints []string) []holder {
	for i, e := range endpoints {
		id, ok := m.ids[e]
		if !ok {
			continue
		}
		dst = append(dst, holder{i: i, pos: m.h.per * id})
	}
	return dst
}
