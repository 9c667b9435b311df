package config

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// Effective returns c as a YAML EndpointPickerConfig document, in a stable
// layout meant to be archived and diffed across upgrades. On the Config of a
// Runtime (Runtime.Config) it is the effective configuration: what the user
// wrote, plus every system default and auto-created producer.
func (c *Config) Effective() ([]byte, error) {
	root := mapping()
	put(root, "apiVersion", str(c.APIVersion))
	put(root, "kind", str(c.Kind))
	if len(c.FeatureGates) > 0 {
		gates := sequence()
		for _, g := range c.FeatureGates {
			gates.Content = append(gates.Content, str(g))
		}
		put(root, "featureGates", gates)
	}
	if len(c.Plugins) > 0 {
		ps := sequence()
		for _, p := range c.Plugins {
			m := mapping()
			name := str(p.Name)
			switch p.origin {
			case fromDefault:
				name.LineComment = "system default"
			case fromGraph:
				name.LineComment = "auto-created default producer"
			case fromCompat:
				name.LineComment = "declared for " + p.source + "'s prefix index parameters"
			}
			put(m, "name", name)
			put(m, "type", str(p.Type))
			if len(bytes.TrimSpace(p.Parameters)) > 0 && string(bytes.TrimSpace(p.Parameters)) != "null" {
				var doc yaml.Node
				if err := yaml.Unmarshal(p.Parameters, &doc); err != nil {
					return nil, fmt.Errorf("config: plugin %q: parameters are not valid JSON: %w", p.Name, err)
				}
				if len(doc.Content) == 1 {
					put(m, "parameters", blockStyle(doc.Content[0]))
				}
			}
			ps.Content = append(ps.Content, m)
		}
		put(root, "plugins", ps)
	}
	if len(c.SchedulingProfiles) > 0 {
		profs := sequence()
		for _, sp := range c.SchedulingProfiles {
			m := mapping()
			put(m, "name", str(sp.Name))
			refs := sequence()
			for _, pp := range sp.Plugins {
				r := mapping()
				put(r, "pluginRef", str(pp.PluginRef))
				if pp.Weight != nil {
					put(r, "weight", plain(strconv.FormatFloat(*pp.Weight, 'g', -1, 64)))
				}
				refs.Content = append(refs.Content, r)
			}
			put(m, "plugins", refs)
			profs.Content = append(profs.Content, m)
		}
		put(root, "schedulingProfiles", profs)
	}
	if dl := c.DataLayer; dl != nil {
		m := mapping()
		if dl.InjectDefaults != nil {
			put(m, "injectDefaults", plain(strconv.FormatBool(*dl.InjectDefaults)))
		}
		if len(dl.Sources) > 0 {
			srcs := sequence()
			for _, s := range dl.Sources {
				sm := mapping()
				put(sm, "pluginRef", str(s.PluginRef))
				if len(s.Extractors) > 0 {
					put(sm, "extractors", refList(s.Extractors))
				}
				srcs.Content = append(srcs.Content, sm)
			}
			put(m, "sources", srcs)
		}
		if dl.Discovery != nil {
			put(m, "discovery", ref(dl.Discovery.PluginRef))
		}
		put(root, "dataLayer", m)
	}
	if fc := c.FlowControl; fc != nil {
		m := mapping()
		putQuantity(m, "maxBytes", fc.MaxBytes)
		putQuantity(m, "maxRequests", fc.MaxRequests)
		putDuration(m, "defaultRequestTTL", fc.DefaultRequestTTL)
		putDuration(m, "noEndpointRequestTTL", fc.NoEndpointRequestTTL)
		if fc.DefaultPriorityBand != nil {
			put(m, "defaultPriorityBand", band(fc.DefaultPriorityBand, false))
		}
		if fc.DefaultNegativePriorityBand != nil {
			put(m, "defaultNegativePriorityBand", band(fc.DefaultNegativePriorityBand, false))
		}
		if len(fc.PriorityBands) > 0 {
			bs := sequence()
			for i := range fc.PriorityBands {
				bs.Content = append(bs.Content, band(&fc.PriorityBands[i], true))
			}
			put(m, "priorityBands", bs)
		}
		if fc.UsageLimitPolicyPluginRef != "" {
			put(m, "usageLimitPolicyPluginRef", str(fc.UsageLimitPolicyPluginRef))
		}
		if fc.SaturationDetector != nil {
			put(m, "saturationDetector", ref(fc.SaturationDetector.PluginRef))
		}
		if fc.EnableEviction {
			put(m, "enableEviction", plain("true"))
		}
		put(root, "flowControl", m)
	}
	if rh := c.RequestHandler; rh != nil {
		m := mapping()
		if len(rh.Parsers) > 0 {
			put(m, "parsers", refList(rh.Parsers))
		}
		put(root, "requestHandler", m)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return buf.Bytes(), nil
}

func mapping() *yaml.Node  { return &yaml.Node{Kind: yaml.MappingNode} }
func sequence() *yaml.Node { return &yaml.Node{Kind: yaml.SequenceNode} }

// str is a string scalar; the encoder quotes it when it would read back as
// something else ("true", "123").
func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

// plain is a scalar written as is (numbers, booleans).
func plain(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }

func put(m *yaml.Node, key string, v *yaml.Node) { m.Content = append(m.Content, str(key), v) }

func ref(name string) *yaml.Node {
	m := mapping()
	put(m, "pluginRef", str(name))
	return m
}

func refList(refs []PluginRef) *yaml.Node {
	s := sequence()
	for _, r := range refs {
		s.Content = append(s.Content, ref(r.PluginRef))
	}
	return s
}

func putQuantity(m *yaml.Node, key string, q *Quantity) {
	if q == nil {
		return
	}
	if _, err := strconv.ParseInt(q.String(), 10, 64); err == nil {
		put(m, key, plain(q.String())) // a plain number, as written
		return
	}
	put(m, key, str(q.String()))
}

func putDuration(m *yaml.Node, key string, d *time.Duration) {
	if d != nil {
		put(m, key, str(d.String()))
	}
}

func band(b *PriorityBand, withPriority bool) *yaml.Node {
	m := mapping()
	if withPriority || b.Priority != 0 {
		put(m, "priority", plain(strconv.Itoa(b.Priority)))
	}
	putQuantity(m, "maxBytes", b.MaxBytes)
	putQuantity(m, "maxRequests", b.MaxRequests)
	if b.FairnessPolicyRef != "" {
		put(m, "fairnessPolicyRef", str(b.FairnessPolicyRef))
	}
	if b.OrderingPolicyRef != "" {
		put(m, "orderingPolicyRef", str(b.OrderingPolicyRef))
	}
	return m
}

// blockStyle clears the flow and quoting styles JSON input comes with, so
// parameters print like hand-written YAML.
func blockStyle(n *yaml.Node) *yaml.Node {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
	return n
}
