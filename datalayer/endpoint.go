package datalayer

import (
	"math"
	"net"
	"strconv"
	"time"

	"github.com/eppkit/eppkit/plugins"
)

// Endpoint is an immutable snapshot of one model-server endpoint (a pod's
// target port). Build it with New or a struct literal; do not modify a value
// after handing it to the scheduler.
type Endpoint struct {
	Name    string // unique within the pool
	Address string // IP address or host
	Port    int
	Labels  map[string]string
	Rank    int // index of the target port within the pod
	Metrics Metrics
	// Attrs holds typed attributes written by data-layer extractors.
	Attrs plugins.Values

	hostPort string
}

// New returns an endpoint snapshot with its host:port precomputed.
func New(name, address string, port int, labels map[string]string) *Endpoint {
	e := &Endpoint{Name: name, Address: address, Port: port, Labels: labels}
	e.hostPort = e.computeHostPort()
	return e
}

// HostPort returns "ip:port" (IPv6 bracketed), the form used in
// x-gateway-destination-endpoint.
func (e *Endpoint) HostPort() string {
	if e.hostPort != "" {
		return e.hostPort
	}
	return e.computeHostPort()
}

func (e *Endpoint) computeHostPort() string {
	return net.JoinHostPort(e.Address, strconv.Itoa(e.Port))
}

// WithMetrics returns a copy of e carrying m: the way to publish new metrics
// without mutating a snapshot others may be reading.
func (e *Endpoint) WithMetrics(m Metrics) *Endpoint {
	c := *e
	c.Metrics = m
	if c.hostPort == "" {
		c.hostPort = c.computeHostPort()
	}
	return &c
}

// Metrics are the engine metrics the stock plugins use. UpdateTime zero means
// the endpoint was never scraped.
//
// Staleness: UpdateTime is when the values were read. When a later collection
// fails (timeout, connection refused, malformed or oversized text, a missing
// family, a NaN or negative value) the data layer keeps the last good values,
// sets Stale, records LastError and counts Failures; the next good collection
// clears all three. A stale set is not Usable, so the stock scorers treat the
// endpoint as their worst candidate until it recovers. A consumer with its own
// policy (e.g. a saturation detector that tolerates one missed scrape) may
// still read the values and decide with Age.
type Metrics struct {
	Waiting   int     // requests waiting in the engine queue
	Running   int     // requests running
	KVUsage   float64 // KV-cache usage, 0..1
	LoRA      LoRA
	BlockSize int // engine KV block size in tokens (0 = unknown)
	GPUBlocks int // engine GPU KV blocks (0 = unknown)

	UpdateTime time.Time

	// Stale is set when the latest collection failed; the values above are
	// then the last good ones, read at UpdateTime.
	Stale bool
	// LastError says why the latest collection failed ("" when it succeeded).
	LastError string
	// Failures counts the collections that failed in a row (0 after a success).
	Failures int
}

// Age returns how old the values are at now: now − UpdateTime. A set that was
// never collected has the largest possible age.
func (m *Metrics) Age(now time.Time) time.Duration {
	if m.UpdateTime.IsZero() {
		return math.MaxInt64
	}
	return now.Sub(m.UpdateTime)
}

// LoRA is the engine's adapter state.
type LoRA struct {
	Active  []string // adapters loaded and running
	Waiting []string // adapters requested, waiting to load
	Max     int      // max adapters loaded at once (0 = unknown)
}

// Usable reports whether m holds a scrape that plugins may trust: scraped at
// least once, not stale (the latest collection succeeded), and no NaN,
// infinite or negative value. Scorers treat an endpoint with unusable metrics
// as the worst candidate.
func (m *Metrics) Usable() bool {
	if m.UpdateTime.IsZero() || m.Stale || m.Waiting < 0 || m.Running < 0 || m.LoRA.Max < 0 {
		return false
	}
	return !math.IsNaN(m.KVUsage) && !math.IsInf(m.KVUsage, 0) && m.KVUsage >= 0
}

// Has reports whether name is active and whether it is waiting on the endpoint.
func (l *LoRA) Has(name string) (active, waiting bool) {
	for _, a := range l.Active {
		if a == name {
			active = true
		}
	}
	for _, w := range l.Waiting {
		if w == name {
			waiting = true
		}
	}
	return
}

// EndpointListener is implemented by plugins that keep per-endpoint state (a
// prefix index, a KV-event subscriber, in-flight counters). The data layer
// calls it when an endpoint joins or leaves the pool, from one goroutine, in
// order; implementations must not block and must not call back into the
// Store's writers. EndpointAdded is called before the endpoint is published
// to the scheduler, EndpointRemoved after it was withdrawn, so a request never
// sees an endpoint whose state is missing. An endpoint whose address or port
// changes is removed and added again; a change of labels alone is not
// reported. Key per-endpoint state by Name or HostPort, not by pointer: every
// metrics update publishes a new *Endpoint.
type EndpointListener interface {
	EndpointAdded(e *Endpoint)
	EndpointRemoved(e *Endpoint)
}
