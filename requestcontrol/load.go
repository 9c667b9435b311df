package requestcontrol

import (
	"sync"
	"sync/atomic"

	"github.com/eppkit/eppkit/datalayer"
)

// LoadTracker counts, per endpoint, the requests and tokens the picker sent
// there and has not seen finish: the picker's own view of in-flight load,
// current between metric scrapes. It is safe for concurrent use; the zero
// value is ready. Endpoints are keyed by host:port.
type LoadTracker struct {
	m sync.Map // host:port → *loadCounter
}

type loadCounter struct{ requests, tokens atomic.Int64 }

// InFlight returns e's in-flight requests and tokens.
func (t *LoadTracker) InFlight(e *datalayer.Endpoint) (requests, tokens int64) {
	v, ok := t.m.Load(e.HostPort())
	if !ok {
		return 0, 0
	}
	c := v.(*loadCounter)
	return c.requests.Load(), c.tokens.Load()
}

// Start counts one request of tokens tokens on e and returns its Load, which
// releases them.
func (t *LoadTracker) Start(e *datalayer.Endpoint, tokens int64) *Load {
	v, ok := t.m.Load(e.HostPort())
	if !ok {
		v, _ = t.m.LoadOrStore(e.HostPort(), new(loadCounter))
	}
	c := v.(*loadCounter)
	c.requests.Add(1)
	c.tokens.Add(tokens)
	l := &Load{c: c}
	l.tokens.Store(tokens)
	l.requests.Store(1)
	return l
}

// Forget drops e's counters (the endpoint left the pool). Loads still open
// on it release into the dropped counters, never into a new endpoint that
// reuses the address.
func (t *LoadTracker) Forget(e *datalayer.Endpoint) { t.m.Delete(e.HostPort()) }

// Load is one request's contribution to a LoadTracker. Its methods are
// idempotent and safe for concurrent use: whichever call releases first does
// it, the others do nothing.
type Load struct {
	c        *loadCounter
	tokens   atomic.Int64
	requests atomic.Int64
}

// ReleaseTokens releases the request's tokens (its prefill is done).
func (l *Load) ReleaseTokens() {
	if n := l.tokens.Swap(0); n != 0 {
		l.c.tokens.Add(-n)
	}
}

// Release releases the request and any tokens it still holds.
func (l *Load) Release() {
	l.ReleaseTokens()
	if n := l.requests.Swap(0); n != 0 {
		l.c.requests.Add(-n)
	}
}
