package flowcontrol

import "time"

// Stats is a snapshot of the controller's queues, for metrics and logs.
type Stats struct {
	Queued int   // items waiting, all bands
	Bytes  int64 // their total size
	Flows  int   // flows held, empty ones not yet collected included
	// Saturation is the pool's saturation at the last dispatch attempt.
	Saturation float64
	// Bands are the bands, highest priority first.
	Bands []BandStats
}

// BandStats is one band's state and counters. The counters count since the
// band was provisioned (a dynamically provisioned band that was collected
// starts again from zero).
type BandStats struct {
	Priority int
	Queued   int   // items waiting
	Bytes    int64 // their total size
	Flows    int   // flows holding items
	// Ceiling is the band's saturation ceiling at the last dispatch attempt.
	Ceiling float64

	Dispatched, Rejected, Expired, Cancelled, Drained uint64
	// WaitTotal is the total time the dispatched items waited; WaitMax the
	// longest of them.
	WaitTotal, WaitMax time.Duration
}

// MeanWait returns the mean queue wait of the dispatched items.
func (s BandStats) MeanWait() time.Duration {
	if s.Dispatched == 0 {
		return 0
	}
	return s.WaitTotal / time.Duration(s.Dispatched)
}

type bandCounters struct {
	dispatched, rejected, expired, cancelled, drained uint64
	waitTotal, waitMax                                time.Duration
	ceiling                                           float64
}

func (c *bandCounters) count(o Outcome, wait time.Duration) {
	switch o {
	case Dispatched:
		c.dispatched++
		c.waitTotal += wait
		c.waitMax = max(c.waitMax, wait)
	case Rejected:
		c.rejected++
	case Expired:
		c.expired++
	case Cancelled:
		c.cancelled++
	case Drained:
		c.drained++
	}
}

// Stats returns a snapshot of the queues and counters.
func (c *Controller) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Stats{Queued: c.len, Bytes: c.bytes, Flows: c.flowCount, Saturation: c.lastSaturation, Bands: make([]BandStats, len(c.bands))}
	for i, b := range c.bands {
		k := &b.stats
		s.Bands[i] = BandStats{
			Priority: b.priority, Queued: b.len, Bytes: b.bytes, Flows: len(b.heads), Ceiling: k.ceiling,
			Dispatched: k.dispatched, Rejected: k.rejected, Expired: k.expired, Cancelled: k.cancelled, Drained: k.drained,
			WaitTotal: k.waitTotal, WaitMax: k.waitMax,
		}
	}
	return s
}

// Band returns the stats of the band of priority p.
func (s Stats) Band(p int) (BandStats, bool) {
	for _, b := range s.Bands {
		if b.Priority == p {
			return b, true
		}
	}
	return BandStats{}, false
}
