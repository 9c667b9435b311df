package fakeserver

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// Cluster is several fake servers in one process.
type Cluster struct {
	Servers []*Server
}

// StartCluster starts n servers with cfg on host (e.g. "127.0.0.1"), at
// ports basePort, basePort+1, ... or at free ports when basePort is 0. With
// KV events in bind mode, server i binds the event endpoint's port + i.
func StartCluster(cfg Config, host string, basePort, n int) (*Cluster, error) {
	if n < 1 {
		return nil, errors.New("fakeserver: a cluster needs at least one server")
	}
	c := &Cluster{}
	for i := range n {
		port := 0
		if basePort > 0 {
			port = basePort + i
		}
		sc := cfg
		if cfg.KVEvents != nil && cfg.KVEvents.Bind {
			ev, err := offsetEndpoint(*cfg.KVEvents, i)
			if err != nil {
				_ = c.Close()
				return nil, err
			}
			sc.KVEvents = &ev
		}
		s, err := Start(sc, net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	return c, nil
}

// offsetEndpoint returns ev with its TCP port increased by i.
func offsetEndpoint(ev KVEvents, i int) (KVEvents, error) {
	const scheme = "tcp://"
	if len(ev.Endpoint) < len(scheme) || ev.Endpoint[:len(scheme)] != scheme {
		return ev, fmt.Errorf("fakeserver: kv events endpoint %q: want tcp://host:port", ev.Endpoint)
	}
	host, port, err := net.SplitHostPort(ev.Endpoint[len(scheme):])
	if err != nil {
		return ev, fmt.Errorf("fakeserver: kv events endpoint %q: %w", ev.Endpoint, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return ev, fmt.Errorf("fakeserver: kv events endpoint %q: bad port", ev.Endpoint)
	}
	ev.Endpoint = scheme + net.JoinHostPort(host, strconv.Itoa(p+i))
	return ev, nil
}

// Addrs returns the servers' host:port, in order.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		out[i] = s.Addr()
	}
	return out
}

// Close stops every server.
func (c *Cluster) Close() error {
	var errs []error
	for _, s := range c.Servers {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
