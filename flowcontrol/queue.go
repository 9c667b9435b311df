package flowcontrol

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Enqueue adds it to its flow's queue and returns at once: nil when it
// waits in the queue, ErrAtCapacity when a limit refuses it (its outcome is
// then Rejected), ErrShuttingDown after Close (Drained). The dispatcher
// decides its outcome later; Wait blocks until then. An item that is
// already queued is an error.
func (c *Controller) Enqueue(it *Item) error { return c.enqueue(it, nil) }

// EnqueueAndWait enqueues it and blocks until it leaves the queue: nil when
// it was dispatched, otherwise an error wrapping ErrAtCapacity, ErrExpired
// (with ErrNoEndpoints when the pool had none), ErrCancelled or
// ErrShuttingDown. The context's end ends the wait (a deadline counts as
// expiry), and the context's deadline becomes the item's Deadline unless it
// has one.
func (c *Controller) EnqueueAndWait(ctx context.Context, it *Item) error {
	if it.Deadline.IsZero() {
		if d, ok := ctx.Deadline(); ok {
			it.Deadline = d
		}
	}
	done := make(chan struct{})
	if err := c.enqueue(it, done); err != nil {
		return err
	}
	return c.wait(ctx, it, done)
}

// Wait blocks until an item given to Enqueue leaves the queue and returns
// what EnqueueAndWait would. It returns at once for an item that is done or
// was never enqueued.
func (c *Controller) Wait(ctx context.Context, it *Item) error {
	c.mu.Lock()
	if it.flow == nil {
		c.mu.Unlock()
		return it.Err()
	}
	if it.done == nil {
		it.done = make(chan struct{})
	}
	done := it.done
	c.mu.Unlock()
	return c.wait(ctx, it, done)
}

func (c *Controller) wait(ctx context.Context, it *Item, done chan struct{}) error {
	select {
	case <-done:
		return it.Err()
	case <-ctx.Done():
	}
	c.mu.Lock()
	if it.flow != nil { // still queued: the caller's end wins
		now := c.now()
		b := it.flow.band
		c.remove(it, now)
		it.cause = context.Cause(ctx)
		o := Cancelled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			o = Expired
		}
		c.finish(b, it, o, now)
	}
	c.mu.Unlock()
	return it.Err()
}

func (c *Controller) enqueue(it *Item, done chan struct{}) error {
	if it.Size < 0 {
		return fmt.Errorf("flowcontrol: flow %v: negative item size %d", it.Flow, it.Size)
	}
	wake, err := c.enqueueLocked(it, done)
	if wake {
		c.Notify()
	}
	return err
}

// enqueueLocked queues it and reports whether the dispatcher must wake:
// it is idle (nothing was queued, so no timer is set), or the last pass was
// not held, or held below the item's band.
func (c *Controller) enqueueLocked(it *Item, done chan struct{}) (wake bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if it.flow != nil {
		return false, fmt.Errorf("flowcontrol: flow %v: item is already queued", it.Flow)
	}
	now := c.now()
	it.done, it.cause, it.noEps, it.wait, it.enq = done, nil, false, 0, now
	if c.closed {
		c.finish(c.byPrio[it.Flow.Priority], it, Drained, now) // no band is provisioned after Close
		return false, ErrShuttingDown
	}
	b := c.band(it.Flow.Priority)
	size := it.Size
	if int64(b.len) >= b.maxRequests || size > b.maxBytes-b.bytes ||
		(c.maxRequests > 0 && int64(c.len) >= c.maxRequests) || (c.maxBytes > 0 && size > c.maxBytes-c.bytes) {
		c.finish(b, it, Rejected, now)
		return false, ErrAtCapacity
	}
	f := b.flows[it.Flow.ID]
	if f == nil {
		f = &Flow{key: it.Flow, band: b, hidx: -1}
		b.flows[it.Flow.ID] = f
		c.flowCount++
	}
	c.seq++
	it.seq, it.flow = c.seq, f
	it.due = math.MaxInt64
	if c.ttl > 0 {
		it.due = now + int64(c.ttl)
	}
	if !it.Deadline.IsZero() {
		it.due = min(it.due, it.Deadline.UnixNano())
	}
	it.key = 0
	if b.keyer != nil {
		it.key = b.keyer.Key(it)
	}
	it.outcome.Store(uint32(Pending))

	wasEmpty := len(f.items) == 0
	f.push(it)
	f.bytes += size
	b.len++
	b.bytes += size
	c.len++
	c.bytes += size
	it.prev, it.next = c.tail, nil
	if c.tail != nil {
		c.tail.next = it
	} else {
		c.head = it
	}
	c.tail = it
	if wasEmpty {
		if f.idle {
			c.unidle(f)
		}
		b.activate(f)
	} else if f.items[0] == it {
		b.headsFix(f.hidx)
	}
	return c.started && (c.len == 1 || !c.blocked || b.priority > c.blockedPrio), nil
}

// remove takes a queued item out of its flow and the enqueue-order list.
func (c *Controller) remove(it *Item, now int64) {
	f := it.flow
	b := f.band
	wasHead := it.idx == 0
	f.remove(it.idx)
	f.bytes -= it.Size
	b.len--
	b.bytes -= it.Size
	c.len--
	c.bytes -= it.Size
	if it.prev != nil {
		it.prev.next = it.next
	} else {
		c.head = it.next
	}
	if it.next != nil {
		it.next.prev = it.prev
	} else {
		c.tail = it.prev
	}
	it.prev, it.next, it.flow = nil, nil, nil
	switch {
	case len(f.items) == 0:
		b.deactivate(f)
		c.idle(f, now)
	case wasHead:
		b.headsFix(f.hidx)
	}
}

// finish records a done item's outcome and wakes its waiter. b is the band
// it was counted in (nil for none).
func (c *Controller) finish(b *Band, it *Item, o Outcome, now int64) {
	it.wait = time.Duration(now - it.enq)
	if b != nil {
		b.stats.count(o, it.wait)
	}
	it.outcome.Store(uint32(o))
	if it.done != nil {
		close(it.done)
		it.done = nil
	}
}

// idle appends an empty flow to the idle list, collecting the longest idle
// one when the list is over its bound.
func (c *Controller) idle(f *Flow, now int64) {
	f.idle, f.idleSince = true, now
	f.idlePrev, f.idleNext = c.idleTail, nil
	if c.idleTail != nil {
		c.idleTail.idleNext = f
	} else {
		c.idleHead = f
	}
	c.idleTail = f
	c.idleCount++
	if c.idleCount > maxIdleFlows {
		c.collect(c.idleHead)
	}
}

func (c *Controller) unidle(f *Flow) {
	if f.idlePrev != nil {
		f.idlePrev.idleNext = f.idleNext
	} else {
		c.idleHead = f.idleNext
	}
	if f.idleNext != nil {
		f.idleNext.idlePrev = f.idlePrev
	} else {
		c.idleTail = f.idlePrev
	}
	f.idlePrev, f.idleNext, f.idle = nil, nil, false
	c.idleCount--
}

// collect forgets an idle flow.
func (c *Controller) collect(f *Flow) {
	c.unidle(f)
	delete(f.band.flows, f.key.ID)
	c.flowCount--
	if f.band.dynamic {
		c.sweepBands = true
	}
}
