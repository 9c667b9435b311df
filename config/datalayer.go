package config

import "github.com/eppkit/eppkit/datalayer"

// dataLayer wires the dataLayer section: the discovery source, each data
// source with its extractors, and every plugin that keeps per-endpoint state
// as a listener, into Runtime.DataLayer. Plugins that are not available in
// this build were reported already and are left out.
func (b *builder) dataLayer() error {
	rt := b.rt
	dl := rt.Config.DataLayer
	if dl == nil {
		dl = &DataLayer{}
	}
	var l errList
	cfg := datalayer.Config{Pool: b.opts.Pool, Logger: b.log.With("component", "datalayer")}
	if d := dl.Discovery; d != nil {
		if p, ok := rt.Plugin(d.PluginRef); ok {
			if src, ok := p.(datalayer.Source); ok {
				cfg.Discovery = src
			} else {
				l.add("dataLayer.discovery.pluginRef", d.line, "plugin %q (type %s) is not a discovery source", d.PluginRef, b.typeOf(d.PluginRef))
			}
		}
	}
	for i, s := range dl.Sources {
		path := index("dataLayer.sources", i)
		p, ok := rt.Plugin(s.PluginRef)
		if !ok {
			continue
		}
		src, ok := p.(datalayer.DataSource)
		if !ok {
			l.add(join(path, "pluginRef"), s.line, "plugin %q (type %s) is not a data source", s.PluginRef, b.typeOf(s.PluginRef))
			continue
		}
		sc := datalayer.DataSourceConfig{Name: s.PluginRef, Source: src}
		for j, e := range s.Extractors {
			p, ok := rt.Plugin(e.PluginRef)
			if !ok {
				continue
			}
			x, ok := p.(datalayer.Extractor)
			if !ok {
				l.add(join(index(join(path, "extractors"), j), "pluginRef"), e.line, "plugin %q (type %s) is not an extractor", e.PluginRef, b.typeOf(e.PluginRef))
				continue
			}
			sc.Extractors = append(sc.Extractors, datalayer.NamedExtractor{Name: e.PluginRef, Extractor: x})
		}
		if _, self := src.(datalayer.Extractor); !self && len(sc.Extractors) == 0 {
			b.warn(join(path, "extractors"), s.line, "data source %q has no extractor: what it collects is not used", s.PluginRef)
		}
		cfg.Sources = append(cfg.Sources, sc)
	}
	for _, p := range rt.Plugins {
		if ln, ok := p.Plugin.(datalayer.EndpointListener); ok {
			cfg.Listeners = append(cfg.Listeners, ln)
		}
	}
	if err := l.err(); err != nil {
		return err
	}
	d, err := datalayer.NewRuntime(cfg)
	if err != nil {
		return &Error{Path: "dataLayer", Err: err}
	}
	rt.DataLayer = d
	if cfg.Discovery != nil && rt.Director != nil && rt.Director.Pool == nil {
		rt.Director.Pool = d
	}
	return nil
}
