package schedulingtest

import (
	"hash/fnv"
	"maps"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/scheduling"
)

// ScrapeTime is the metrics update time of endpoints built here unless
// UpdatedAt sets another.
var ScrapeTime = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// DefaultPort is the port of endpoints built without Addr.
const DefaultPort = 8000

// EndpointBuilder builds a *datalayer.Endpoint fluently. Start with Ep.
type EndpointBuilder struct {
	name    string
	addr    string
	port    int
	labels  map[string]string
	rank    int
	metrics datalayer.Metrics
	noMet   bool
	with    []func(*datalayer.Endpoint)
}

// Ep starts an endpoint named name with empty queues, an empty KV cache, no
// LoRA adapters, usable metrics and a default address derived from name.
func Ep(name string) *EndpointBuilder {
	return &EndpointBuilder{name: name, port: DefaultPort, metrics: datalayer.Metrics{UpdateTime: ScrapeTime}}
}

// Waiting sets the number of requests waiting in the engine queue.
func (b *EndpointBuilder) Waiting(n int) *EndpointBuilder { b.metrics.Waiting = n; return b }

// Running sets the number of running requests.
func (b *EndpointBuilder) Running(n int) *EndpointBuilder { b.metrics.Running = n; return b }

// KV sets the KV-cache usage (0..1).
func (b *EndpointBuilder) KV(usage float64) *EndpointBuilder { b.metrics.KVUsage = usage; return b }

// LoRA sets the active and waiting adapters and the maximum loaded at once.
func (b *EndpointBuilder) LoRA(active, waiting []string, maxLoaded int) *EndpointBuilder {
	b.metrics.LoRA = datalayer.LoRA{Active: slices.Clone(active), Waiting: slices.Clone(waiting), Max: maxLoaded}
	return b
}

// Blocks sets the engine's KV block size in tokens and its GPU block count.
func (b *EndpointBuilder) Blocks(blockSize, gpuBlocks int) *EndpointBuilder {
	b.metrics.BlockSize, b.metrics.GPUBlocks = blockSize, gpuBlocks
	return b
}

// Label sets label k to v.
func (b *EndpointBuilder) Label(k, v string) *EndpointBuilder {
	if b.labels == nil {
		b.labels = map[string]string{}
	}
	b.labels[k] = v
	return b
}

// Addr sets the address and port.
func (b *EndpointBuilder) Addr(address string, port int) *EndpointBuilder {
	b.addr, b.port = address, port
	return b
}

// Rank sets the endpoint's rank (its target port's index within the pod).
func (b *EndpointBuilder) Rank(r int) *EndpointBuilder { b.rank = r; return b }

// UpdatedAt sets the metrics update time (to test staleness).
func (b *EndpointBuilder) UpdatedAt(t time.Time) *EndpointBuilder { b.metrics.UpdateTime = t; return b }

// NoMetrics marks the endpoint as never scraped: its metrics are unusable.
func (b *EndpointBuilder) NoMetrics() *EndpointBuilder { b.noMet = true; return b }

// With registers fn to adjust the endpoint at the end of Build, e.g. to set
// typed attributes.
func (b *EndpointBuilder) With(fn func(*datalayer.Endpoint)) *EndpointBuilder {
	b.with = append(b.with, fn)
	return b
}

// Build returns a new endpoint; each call returns a distinct value.
func (b *EndpointBuilder) Build() *scheduling.Endpoint {
	addr := b.addr
	if addr == "" {
		addr = defaultAddr(b.name, 0)
	}
	return b.build(addr)
}

func (b *EndpointBuilder) build(addr string) *scheduling.Endpoint {
	e := datalayer.New(b.name, addr, b.port, maps.Clone(b.labels))
	e.Rank = b.rank
	e.Metrics = b.metrics
	e.Metrics.LoRA.Active = slices.Clone(b.metrics.LoRA.Active)
	e.Metrics.LoRA.Waiting = slices.Clone(b.metrics.LoRA.Waiting)
	if b.noMet {
		e.Metrics.UpdateTime = time.Time{}
	}
	for _, fn := range b.with {
		fn(e)
	}
	return e
}

// Eps builds the endpoints in order. Endpoints without Addr get distinct
// default addresses even if two names hash alike.
func Eps(bs ...*EndpointBuilder) []*scheduling.Endpoint {
	out := make([]*scheduling.Endpoint, len(bs))
	used := map[string]bool{}
	for _, b := range bs {
		if b.addr != "" {
			used[net.JoinHostPort(b.addr, strconv.Itoa(b.port))] = true
		}
	}
	for i, b := range bs {
		addr := b.addr
		for probe := 0; addr == ""; probe++ {
			a := defaultAddr(b.name, probe)
			if hp := net.JoinHostPort(a, strconv.Itoa(b.port)); !used[hp] {
				used[hp], addr = true, a
			}
		}
		out[i] = b.build(addr)
	}
	return out
}

// defaultAddr derives an address in 10.0.0.0/8 from name.
func defaultAddr(name string, probe int) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	v := h.Sum32() + uint32(probe)*2654435761
	ip := net.IPv4(10, byte(v>>16), byte(v>>8), byte(v%254)+1)
	return ip.String()
}

// Names returns the endpoints' names, handy in assertions and examples.
func Names(eps []*scheduling.Endpoint) []string {
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = e.Name
	}
	return out
}
