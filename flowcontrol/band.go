package flowcontrol

import "iter"

// Flow is the queue of one flow inside its band. Policies see it through its
// methods; the controller owns it.
type Flow struct {
	key   FlowKey
	band  *Band
	items []*Item // a heap by the band's order; items[0] is the head
	bytes int64

	hidx         int   // index in the band's heads heap; -1 while empty
	rprev, rnext *Flow // the band's ring of non-empty flows (round robin)

	idlePrev, idleNext *Flow // the controller's list of empty flows (GC)
	idleSince          int64
	idle               bool
}

// Key returns the flow's key.
func (f *Flow) Key() FlowKey { return f.key }

// Len returns the number of queued items.
func (f *Flow) Len() int { return len(f.items) }

// Bytes returns the queued items' total size.
func (f *Flow) Bytes() int64 { return f.bytes }

// Head returns the item the flow dispatches next, nil when it is empty.
func (f *Flow) Head() *Item {
	if len(f.items) == 0 {
		return nil
	}
	return f.items[0]
}

// Band is the priority band of one priority level: its flows, its limits
// and its policies. Fairness policies pick among its flows with Best, Next
// or Flows; the controller owns it.
type Band struct {
	priority    int
	maxRequests int64
	maxBytes    int64
	fairness    FairnessPolicy
	ordering    OrderingPolicy
	keyer       Keyer // ordering as a Keyer, nil if it is not one
	dynamic     bool  // provisioned from a template, collected when idle

	flows  map[string]*Flow // every flow, empty ones until collected
	len    int
	bytes  int64
	heads  []*Flow // the non-empty flows, a heap by their heads
	cursor *Flow   // the ring of non-empty flows, at the next to serve

	stats bandCounters
}

// Priority returns the band's priority.
func (b *Band) Priority() int { return b.priority }

// Len returns the number of items queued in the band.
func (b *Band) Len() int { return b.len }

// Bytes returns the queued items' total size.
func (b *Band) Bytes() int64 { return b.bytes }

// ActiveFlows returns the number of flows holding items.
func (b *Band) ActiveFlows() int { return len(b.heads) }

// Best returns the flow whose head comes first in the band's order (the
// global-strict choice), nil when the band is empty. O(1).
func (b *Band) Best() *Flow {
	if len(b.heads) == 0 {
		return nil
	}
	return b.heads[0]
}

// Next returns the flow at the band's round-robin position and moves the
// position on to the following flow, nil when the band is empty. A flow
// that becomes non-empty joins the rotation last, just before the position
// (after the flow served most recently); a flow that empties leaves it.
// O(1).
func (b *Band) Next() *Flow {
	f := b.cursor
	if f != nil {
		b.cursor = f.rnext
	}
	return f
}

// Flows iterates over the non-empty flows in round-robin order from the
// current position, without moving it. O(flows).
func (b *Band) Flows() iter.Seq[*Flow] {
	return func(yield func(*Flow) bool) {
		start := b.cursor
		if start == nil {
			return
		}
		for f := start; ; {
			next := f.rnext
			if !yield(f) || next == start {
				return
			}
			f = next
		}
	}
}

// less orders two items of the band: by key (Keyer) or Less, then by
// enqueue order.
func (b *Band) less(x, y *Item) bool {
	if b.keyer != nil {
		if x.key != y.key {
			return x.key < y.key
		}
		return x.seq < y.seq
	}
	if b.ordering.Less(x, y) {
		return true
	}
	if b.ordering.Less(y, x) {
		return false
	}
	return x.seq < y.seq
}

// activate adds a flow that just became non-empty to the heads heap and to
// the ring, before the round-robin position.
func (b *Band) activate(f *Flow) {
	if c := b.cursor; c == nil {
		f.rprev, f.rnext = f, f
		b.cursor = f
	} else {
		p := c.rprev
		p.rnext, f.rprev = f, p
		f.rnext, c.rprev = c, f
	}
	f.hidx = len(b.heads)
	b.heads = append(b.heads, f)
	b.headsUp(f.hidx)
}

// deactivate removes a flow that just became empty from the heads heap and
// the ring.
func (b *Band) deactivate(f *Flow) {
	if f.rnext == f {
		b.cursor = nil
	} else {
		if b.cursor == f {
			b.cursor = f.rnext
		}
		f.rprev.rnext, f.rnext.rprev = f.rnext, f.rprev
	}
	f.rprev, f.rnext = nil, nil
	i, last := f.hidx, len(b.heads)-1
	if i != last {
		b.heads[i] = b.heads[last]
		b.heads[i].hidx = i
	}
	b.heads[last] = nil
	b.heads = b.heads[:last]
	if i != last {
		b.headsFix(i)
	}
	f.hidx = -1
}

// headsLess orders flows by their heads.
func (b *Band) headsLess(i, j int) bool { return b.less(b.heads[i].items[0], b.heads[j].items[0]) }

func (b *Band) headsSwap(i, j int) {
	h := b.heads
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = i, j
}

func (b *Band) headsUp(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !b.headsLess(i, p) {
			return
		}
		b.headsSwap(i, p)
		i = p
	}
}

func (b *Band) headsDown(i int) bool {
	n, start := len(b.heads), i
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && b.headsLess(r, l) {
			m = r
		}
		if !b.headsLess(m, i) {
			break
		}
		b.headsSwap(i, m)
		i = m
	}
	return i > start
}

// headsFix restores the heap after the head of heads[i] changed.
func (b *Band) headsFix(i int) {
	if !b.headsDown(i) {
		b.headsUp(i)
	}
}

// push adds it to f's heap.
func (f *Flow) push(it *Item) {
	it.idx = len(f.items)
	f.items = append(f.items, it)
	f.up(it.idx)
}

// remove takes the item at index i out of f's heap.
func (f *Flow) remove(i int) {
	last := len(f.items) - 1
	if i != last {
		f.swap(i, last)
	}
	it := f.items[last]
	f.items[last] = nil
	f.items = f.items[:last]
	it.idx = -1
	if i != last && !f.down(i) {
		f.up(i)
	}
}

func (f *Flow) swap(i, j int) {
	h := f.items
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}

func (f *Flow) up(i int) {
	h, b := f.items, f.band
	for i > 0 {
		p := (i - 1) / 2
		if !b.less(h[i], h[p]) {
			return
		}
		f.swap(i, p)
		i = p
	}
}

func (f *Flow) down(i int) bool {
	h, b := f.items, f.band
	n, start := len(h), i
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && b.less(h[r], h[l]) {
			m = r
		}
		if !b.less(h[m], h[i]) {
			break
		}
		f.swap(i, m)
		i = m
	}
	return i > start
}
