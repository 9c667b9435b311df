package requestcontrol

import (
	"net"
	"strconv"

	"github.com/eppkit/eppkit/scheduling"
)

// Pool supplies the ready endpoints of the inference pool. Endpoints is
// called once or twice per request, concurrently: it must be cheap, and the
// slice it returns must not be modified afterwards (return a new slice when
// the pool changes).
type Pool interface {
	Endpoints() []*scheduling.Endpoint
}

// PoolFunc adapts a function to Pool.
type PoolFunc func() []*scheduling.Endpoint

// Endpoints calls f.
func (f PoolFunc) Endpoints() []*scheduling.Endpoint { return f() }

// StaticPool is a fixed list of endpoints.
type StaticPool []*scheduling.Endpoint

// Endpoints returns the list.
func (p StaticPool) Endpoints() []*scheduling.Endpoint { return p }

// Subset returns the endpoints named by the gateway's subset hint: entries
// are "ip:port" (IPv6 bracketed) and match an endpoint's address and port;
// an entry without a port matches every port of the address. A nil hint
// keeps every endpoint (the input slice itself).
func Subset(eps []*scheduling.Endpoint, hint []string) []*scheduling.Endpoint {
	if hint == nil {
		return eps
	}
	type hostPort struct {
		host string
		port int // -1: any
	}
	want := make([]hostPort, 0, len(hint))
	for _, h := range hint {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			want = append(want, hostPort{trimBrackets(h), -1})
			continue
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			continue // not an endpoint: matches nothing
		}
		want = append(want, hostPort{host, p})
	}
	var out []*scheduling.Endpoint
	for _, e := range eps {
		for _, w := range want {
			if sameHost(e.Address, w.host) && (w.port < 0 || w.port == e.Port) {
				out = append(out, e)
				break
			}
		}
	}
	return out
}

func trimBrackets(h string) string {
	if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
		return h[1 : len(h)-1]
	}
	return h
}

// sameHost compares addresses, treating IP spellings ("::1", "0::1") alike.
func sameHost(a, b string) bool {
	if a == b {
		return true
	}
	ia, ib := net.ParseIP(a), net.ParseIP(b)
	return ia != nil && ib != nil && ia.Equal(ib)
}
