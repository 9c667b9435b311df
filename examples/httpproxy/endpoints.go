package httpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/plugins"
)

// Endpoints is where the pool's endpoints come from: a fixed list, or a
// file in file-discovery's format (reloaded when it changes).
type Endpoints struct {
	Targets []datalayer.Target
	File    string
}

// ParseEndpoints reads an --endpoints argument: the path of an existing
// endpoints file, or a comma-separated list of host:port (a host name is
// resolved to its first address; each endpoint is named after its
// host:port).
func ParseEndpoints(ctx context.Context, arg string) (Endpoints, error) {
	if arg == "" {
		return Endpoints{}, errors.New("httpproxy: no endpoints")
	}
	if st, err := os.Stat(arg); err == nil && !st.IsDir() {
		return Endpoints{File: arg}, nil
	}
	var eps Endpoints
	for _, hp := range strings.Split(arg, ",") {
		hp = strings.TrimSpace(hp)
		host, port, err := net.SplitHostPort(hp)
		if err != nil {
			return Endpoints{}, fmt.Errorf("httpproxy: endpoint %q: want host:port or an existing file", hp)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return Endpoints{}, fmt.Errorf("httpproxy: endpoint %q: bad port", hp)
		}
		if net.ParseIP(host) == nil {
			addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			if err != nil || len(addrs) == 0 {
				return Endpoints{}, fmt.Errorf("httpproxy: endpoint %q: cannot resolve %s: %v", hp, host, err)
			}
			host = addrs[0].Unmap().String()
		}
		eps.Targets = append(eps.Targets, datalayer.Target{Name: hp, Address: host, Port: p})
	}
	return eps, nil
}

// discoveryName is the name WithDiscovery gives its discovery plugin.
const discoveryName = "endpoints-discovery"

// WithDiscovery returns a copy of cfg (nil: the default configuration)
// whose data layer discovers eps: a static-discovery or file-discovery
// plugin named "endpoints-discovery", referenced from dataLayer.discovery.
// The system defaults are applied first (config.Defaults), so adding the
// plugin does not stand in for an empty configuration's defaults. A
// configuration with a discovery of its own is an error.
func WithDiscovery(cfg *config.Config, reg *plugins.Registry, eps Endpoints) (*config.Config, error) {
	if cfg == nil {
		cfg = &config.Config{}
	}
	c := cfg.Clone()
	if c.DataLayer != nil && c.DataLayer.Discovery != nil {
		return nil, fmt.Errorf("httpproxy: the configuration discovers endpoints itself (dataLayer.discovery: %s); do not give endpoints too",
			c.DataLayer.Discovery.PluginRef)
	}
	if _, taken := c.Plugin(discoveryName); taken {
		return nil, fmt.Errorf("httpproxy: the configuration already has a plugin named %q", discoveryName)
	}
	if err := config.Defaults(c, reg); err != nil {
		return nil, err
	}
	spec := config.PluginSpec{Name: discoveryName}
	var params any
	switch {
	case eps.File != "":
		spec.Type = "file-discovery"
		params = map[string]any{"path": eps.File, "watchFile": true}
	case len(eps.Targets) > 0:
		spec.Type = "static-discovery"
		params = map[string]any{"endpoints": eps.Targets}
	default:
		return nil, errors.New("httpproxy: no endpoints")
	}
	var err error
	if spec.Parameters, err = json.Marshal(params); err != nil {
		return nil, err
	}
	c.Plugins = append(c.Plugins, spec)
	if c.DataLayer == nil {
		c.DataLayer = &config.DataLayer{}
	}
	c.DataLayer.Discovery = &config.PluginRef{PluginRef: discoveryName}
	return c, nil
}
