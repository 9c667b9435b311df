package flowcontrol

import (
	"context"
	"math"
	"runtime/debug"
	"time"

	"github.com/eppkit/eppkit/datalayer"
)

// housekeep expires items past their TTL, collects flows idle past the
// timeout and dynamic bands left without flows, and tracks whether the pool
// has endpoints.
func (c *Controller) housekeep(now int64, empty bool) {
	if empty != c.empty {
		c.empty, c.regimeStart = empty, now
	}
	if ttl := c.currentTTL(); ttl > 0 {
		for it := c.head; it != nil && now-max(it.enq, c.regimeStart) >= int64(ttl); it = c.head {
			b := it.flow.band
			c.remove(it, now)
			it.noEps = c.empty
			c.finish(b, it, Expired, now)
		}
	}
	for f := c.idleHead; f != nil && now-f.idleSince >= int64(c.idleTimeout); f = c.idleHead {
		c.collect(f)
	}
	if c.sweepBands {
		c.sweepBands = false
		for i := len(c.bands) - 1; i >= 0; i-- {
			if b := c.bands[i]; b.dynamic && len(b.flows) == 0 {
				c.removeBand(b)
			}
		}
	}
}

func (c *Controller) currentTTL() time.Duration {
	if c.empty {
		return c.noEpTTL
	}
	return c.ttl
}

// Dispatch runs one dispatch pass now: it expires items past their TTL,
// then dispatches items, reading the saturation before each, while the
// bands have items and the saturation is below their ceilings, at most max
// items (max ≤ 0: no bound). It returns the number dispatched. The
// background dispatcher (Start) calls it whenever it wakes; tests and
// simulators call it directly, with an injected clock, for deterministic
// runs.
func (c *Controller) Dispatch(ctx context.Context, max int) int {
	n := 0
	for max <= 0 || n < max {
		var eps []*datalayer.Endpoint
		if c.endpoints != nil {
			eps = c.endpoints()
		}
		sat := 0.0
		if c.saturation != nil {
			sat = c.saturation.Saturation(ctx, eps)
		}
		if !c.step(sat, c.endpoints != nil && len(eps) == 0) {
			break
		}
		n++
	}
	return n
}

// step does the housekeeping and dispatches one item if it can.
func (c *Controller) step(sat float64, empty bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.lastSaturation = sat
	c.housekeep(now, empty)
	if c.len == 0 {
		c.blocked = false
		return false
	}
	return c.dispatchOne(sat, now)
}

// dispatchOne dispatches the next item: bands from the highest priority,
// stopping at the first whose ceiling the saturation reaches; in a band,
// the fairness policy's flow, and that flow's head.
func (c *Controller) dispatchOne(sat float64, now int64) bool {
	c.usage.Ceilings(sat, c.prios, c.ceilings)
	for i, b := range c.bands {
		b.stats.ceiling = c.ceilings[i]
	}
	for i, b := range c.bands {
		if !(sat < c.ceilings[i]) { // NaN on either side holds
			if !c.blocked || c.blockedPrio != b.priority {
				c.log.Debug("flow control: priority band at its saturation ceiling; holding it and every lower band",
					"priority", b.priority, "saturation", sat, "ceiling", c.ceilings[i], "queued", c.len)
			}
			c.blocked, c.blockedPrio = true, b.priority
			return false
		}
		if b.len == 0 {
			continue
		}
		f := b.fairness.Pick(b)
		if f == nil || f.band != b || len(f.items) == 0 {
			continue
		}
		it := f.items[0]
		c.remove(it, now)
		c.finish(b, it, Dispatched, now)
		c.blocked = false
		return true
	}
	c.blocked = false
	return false
}

// Notify tells the dispatcher that capacity may have changed (a request
// completed, metrics were refreshed), so it re-reads the saturation now. It
// never blocks.
func (c *Controller) Notify() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Start runs the dispatcher in a background goroutine until Close. It wakes
// on Notify, on an enqueue the last pass could not already serve, on the
// next TTL expiry and, while it holds items it cannot dispatch, every
// Config.Recheck. Calling Start again, or after Close, does nothing.
func (c *Controller) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.closed {
		return
	}
	c.started = true
	if c.len > 0 {
		c.Notify()
	}
	go c.run()
}

// run is the dispatcher. It runs a pass only when woken, so nothing it
// reads (the pool) is touched before the first request.
func (c *Controller) run() {
	defer close(c.loopDone)
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.wake:
		case <-t.C:
		}
		c.safeDispatch()
		if d, ok := c.nextWake(); ok {
			t.Reset(d)
		} else {
			t.Stop()
		}
	}
}

// safeDispatch runs a pass; a panicking policy is logged, not fatal. (The
// controller's state after a policy panicked is not guaranteed: policies
// must not panic.)
func (c *Controller) safeDispatch() {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("flow control: a policy or the saturation detector panicked", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	c.Dispatch(c.ctx, 0)
}

// nextWake returns when the dispatcher must run again without being woken:
// the next expiry or flow collection, and the recheck while items wait.
func (c *Controller) nextWake() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	d, ok := time.Duration(math.MaxInt64), false
	at := func(t int64) {
		d, ok = min(d, max(time.Duration(t-now), 0)), true
	}
	if c.len > 0 {
		at(now + int64(c.recheck))
	}
	if ttl := c.currentTTL(); ttl > 0 && c.head != nil {
		at(max(c.head.enq, c.regimeStart) + int64(ttl))
	}
	if c.idleHead != nil {
		at(c.idleHead.idleSince + int64(c.idleTimeout))
	}
	return d, ok
}
