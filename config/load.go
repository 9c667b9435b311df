package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Load parses an EndpointPickerConfig document strictly and checks its
// structure: unknown fields, wrong value kinds, missing or duplicate names,
// bad weights and references to undefined plugins are errors carrying their
// YAML path. A Kubernetes ConfigMap whose data holds one such document is
// accepted too, so an existing ConfigMap loads unchanged. Empty input is the
// empty configuration, which Defaults turns into the built-in default.
//
// Load applies no system defaults (only a missing plugin name becomes its
// type); Build does, through Defaults. Errors are *Error values joined with
// errors.Join.
func Load(data []byte) (*Config, error) {
	return load(data, 0)
}

// LoadFile reads and loads the file at path.
func LoadFile(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Load(data)
}

func load(data []byte, lineOffset int) (*Config, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &Config{}, nil // no configuration at all
		}
		return nil, &Error{Err: fmt.Errorf("invalid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &Error{Line: extra.Line + lineOffset, Err: errors.New("more than one YAML document; want one EndpointPickerConfig")}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if isNull(root) {
		return &Config{}, nil
	}
	root = resolve(root)
	if inner, line, ok, err := configMapData(root); ok {
		if err != nil {
			return nil, err
		}
		return load([]byte(inner), lineOffset+line)
	}
	d := &decoder{lineOffset: lineOffset}
	cfg := d.config(root)
	if err := d.err(); err != nil {
		return nil, err
	}
	normalize(cfg)
	if err := validate(cfg, true); err != nil {
		return nil, err
	}
	return cfg, nil
}

// configMapData extracts the configuration from a ConfigMap: its data must
// hold exactly one entry. line is the line before the entry's text.
func configMapData(root *yaml.Node) (text string, line int, ok bool, err error) {
	if root.Kind != yaml.MappingNode {
		return "", 0, false, nil
	}
	var kind string
	var data *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch root.Content[i].Value {
		case "kind":
			kind = resolve(root.Content[i+1]).Value
		case "data":
			data = resolve(root.Content[i+1])
		}
	}
	if kind != "ConfigMap" {
		return "", 0, false, nil
	}
	d := &decoder{}
	d.object(root, "",
		field{"apiVersion", func(*yaml.Node, string) {}},
		field{"kind", func(*yaml.Node, string) {}},
		field{"metadata", func(*yaml.Node, string) {}},
		field{"data", func(*yaml.Node, string) {}},
	)
	if err := d.err(); err != nil {
		return "", 0, true, err
	}
	if data == nil || data.Kind != yaml.MappingNode || len(data.Content) != 2 {
		return "", 0, true, &Error{Path: "data", Line: root.Line,
			Err: errors.New("a ConfigMap must hold exactly one entry: the EndpointPickerConfig document")}
	}
	v := resolve(data.Content[1])
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
		return "", 0, true, &Error{Path: "data." + data.Content[0].Value, Line: v.Line, Err: errors.New("want the configuration as a string")}
	}
	line = v.Line - 1
	if v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		line = v.Line // block scalars start on the line after the indicator
	}
	return v.Value, line, true, nil
}

func (d *decoder) config(root *yaml.Node) *Config {
	cfg := &Config{}
	var deprecatedSD *PluginRef
	var deprecatedParser *PluginRef
	var sdLine, parserLine int
	d.object(root, "",
		field{"apiVersion", func(v *yaml.Node, p string) {
			d.str(v, p, &cfg.APIVersion)
			if cfg.APIVersion != "" && cfg.APIVersion != APIVersion && cfg.APIVersion != LegacyAPIVersion {
				d.fail(v, p, "unsupported apiVersion %q: want %s (or %s)", cfg.APIVersion, APIVersion, LegacyAPIVersion)
			}
		}},
		field{"kind", func(v *yaml.Node, p string) {
			d.str(v, p, &cfg.Kind)
			if cfg.Kind != "" && cfg.Kind != Kind {
				d.fail(v, p, "unsupported kind %q: want %s", cfg.Kind, Kind)
			}
		}},
		field{"featureGates", func(v *yaml.Node, p string) {
			d.list(v, p, func(i int, v *yaml.Node, p string) {
				var g string
				d.str(v, p, &g)
				if g == "" {
					return
				}
				name, _, ok := parseGate(g)
				switch {
				case !ok:
					d.fail(v, p, "invalid feature gate %q: want name, name=true or name=false", g)
				case !slices.Contains(knownGates, name):
					cfg.warnings = append(cfg.warnings, Warning{Path: p, Line: d.line(v),
						Message: fmt.Sprintf("unknown feature gate %q; ignored (known: %s)", name, strings.Join(knownGates, ", "))})
				}
				cfg.FeatureGates = append(cfg.FeatureGates, g)
			})
		}},
		field{"plugins", func(v *yaml.Node, p string) {
			d.list(v, p, func(i int, v *yaml.Node, p string) {
				spec := PluginSpec{line: d.line(v)}
				d.object(v, p,
					field{"name", func(v *yaml.Node, p string) { d.str(v, p, &spec.Name) }},
					field{"type", func(v *yaml.Node, p string) { d.str(v, p, &spec.Type) }},
					field{"parameters", func(v *yaml.Node, p string) { spec.Parameters = d.params(v, p) }},
				)
				cfg.Plugins = append(cfg.Plugins, spec)
			})
		}},
		field{"schedulingProfiles", func(v *yaml.Node, p string) {
			d.list(v, p, func(i int, v *yaml.Node, p string) {
				prof := SchedulingProfile{line: d.line(v)}
				d.object(v, p,
					field{"name", func(v *yaml.Node, p string) { d.str(v, p, &prof.Name) }},
					field{"plugins", func(v *yaml.Node, p string) {
						d.list(v, p, func(i int, v *yaml.Node, p string) {
							pp := ProfilePlugin{line: d.line(v)}
							d.object(v, p,
								field{"pluginRef", func(v *yaml.Node, p string) { d.str(v, p, &pp.PluginRef) }},
								field{"weight", func(v *yaml.Node, p string) {
									if w, ok := d.number(v, p); ok {
										pp.Weight = &w
									}
								}},
							)
							prof.Plugins = append(prof.Plugins, pp)
						})
					}},
				)
				cfg.SchedulingProfiles = append(cfg.SchedulingProfiles, prof)
			})
		}},
		field{"dataLayer", func(v *yaml.Node, p string) { cfg.DataLayer = d.dataLayer(v, p) }},
		field{"flowControl", func(v *yaml.Node, p string) { cfg.FlowControl = d.flowControl(v, p) }},
		field{"requestHandler", func(v *yaml.Node, p string) {
			rh := &RequestHandler{}
			d.object(v, p, field{"parsers", func(v *yaml.Node, p string) {
				d.list(v, p, func(i int, v *yaml.Node, p string) {
					rh.Parsers = append(rh.Parsers, d.ref(v, p))
				})
			}})
			cfg.RequestHandler = rh
		}},
		// Deprecated llm-d fields, migrated with a warning.
		field{"saturationDetector", func(v *yaml.Node, p string) {
			r := d.ref(v, p)
			deprecatedSD, sdLine = &r, d.line(v)
		}},
		field{"parser", func(v *yaml.Node, p string) {
			r := d.ref(v, p)
			deprecatedParser, parserLine = &r, d.line(v)
		}},
	)
	if cfg.APIVersion == "" {
		d.fail(root, "apiVersion", "missing: want %s", APIVersion)
	}
	if cfg.Kind == "" {
		d.fail(root, "kind", "missing: want %s", Kind)
	}
	if deprecatedSD != nil {
		msg := "deprecated: use flowControl.saturationDetector"
		if cfg.FlowControl == nil {
			cfg.FlowControl = &FlowControl{}
		}
		if cfg.FlowControl.SaturationDetector == nil {
			cfg.FlowControl.SaturationDetector = deprecatedSD
		} else {
			msg += " (both are set; flowControl.saturationDetector is used)"
		}
		cfg.warnings = append(cfg.warnings, Warning{Path: "saturationDetector", Line: sdLine, Message: msg})
	}
	if deprecatedParser != nil {
		msg := "deprecated: use requestHandler.parsers"
		if cfg.RequestHandler == nil || len(cfg.RequestHandler.Parsers) == 0 {
			cfg.RequestHandler = &RequestHandler{Parsers: []PluginRef{*deprecatedParser}}
		} else {
			msg += " (both are set; requestHandler.parsers is used)"
		}
		cfg.warnings = append(cfg.warnings, Warning{Path: "parser", Line: parserLine, Message: msg})
	}
	return cfg
}

func (d *decoder) ref(v *yaml.Node, p string) PluginRef {
	r := PluginRef{line: d.line(v)}
	d.object(v, p, field{"pluginRef", func(v *yaml.Node, p string) { d.str(v, p, &r.PluginRef) }})
	return r
}

func (d *decoder) dataLayer(v *yaml.Node, p string) *DataLayer {
	dl := &DataLayer{}
	d.object(v, p,
		field{"injectDefaults", func(v *yaml.Node, p string) {
			var b bool
			d.boolean(v, p, &b)
			dl.InjectDefaults = &b
		}},
		field{"sources", func(v *yaml.Node, p string) {
			d.list(v, p, func(i int, v *yaml.Node, p string) {
				src := DataSource{line: d.line(v)}
				d.object(v, p,
					field{"pluginRef", func(v *yaml.Node, p string) { d.str(v, p, &src.PluginRef) }},
					field{"extractors", func(v *yaml.Node, p string) {
						d.list(v, p, func(i int, v *yaml.Node, p string) {
							src.Extractors = append(src.Extractors, d.ref(v, p))
						})
					}},
				)
				dl.Sources = append(dl.Sources, src)
			})
		}},
		field{"discovery", func(v *yaml.Node, p string) {
			r := d.ref(v, p)
			dl.Discovery = &r
		}},
	)
	return dl
}

func (d *decoder) flowControl(v *yaml.Node, p string) *FlowControl {
	fc := &FlowControl{}
	d.object(v, p,
		field{"maxBytes", func(v *yaml.Node, p string) { d.quantity(v, p, &fc.MaxBytes) }},
		field{"maxRequests", func(v *yaml.Node, p string) { d.quantity(v, p, &fc.MaxRequests) }},
		field{"defaultRequestTTL", func(v *yaml.Node, p string) { d.duration(v, p, &fc.DefaultRequestTTL) }},
		field{"noEndpointRequestTTL", func(v *yaml.Node, p string) { d.duration(v, p, &fc.NoEndpointRequestTTL) }},
		field{"defaultPriorityBand", func(v *yaml.Node, p string) {
			b := d.band(v, p)
			fc.DefaultPriorityBand = &b
		}},
		field{"defaultNegativePriorityBand", func(v *yaml.Node, p string) {
			b := d.band(v, p)
			fc.DefaultNegativePriorityBand = &b
		}},
		field{"priorityBands", func(v *yaml.Node, p string) {
			d.list(v, p, func(i int, v *yaml.Node, p string) {
				fc.PriorityBands = append(fc.PriorityBands, d.band(v, p))
			})
		}},
		field{"usageLimitPolicyPluginRef", func(v *yaml.Node, p string) {
			d.str(v, p, &fc.UsageLimitPolicyPluginRef)
			fc.usageLimitLine = d.line(v)
		}},
		field{"saturationDetector", func(v *yaml.Node, p string) {
			r := d.ref(v, p)
			fc.SaturationDetector = &r
		}},
		field{"enableEviction", func(v *yaml.Node, p string) { d.boolean(v, p, &fc.EnableEviction) }},
	)
	return fc
}

func (d *decoder) band(v *yaml.Node, p string) PriorityBand {
	b := PriorityBand{line: d.line(v)}
	d.object(v, p,
		field{"priority", func(v *yaml.Node, p string) { d.integer(v, p, &b.Priority) }},
		field{"maxBytes", func(v *yaml.Node, p string) { d.quantity(v, p, &b.MaxBytes) }},
		field{"maxRequests", func(v *yaml.Node, p string) { d.quantity(v, p, &b.MaxRequests) }},
		field{"fairnessPolicyRef", func(v *yaml.Node, p string) { d.str(v, p, &b.FairnessPolicyRef) }},
		field{"orderingPolicyRef", func(v *yaml.Node, p string) { d.str(v, p, &b.OrderingPolicyRef) }},
	)
	return b
}

var knownGates = []string{FeatureFlowControl}

// parseGate splits "name", "name=true" or "name=false".
func parseGate(g string) (name string, on, ok bool) {
	name, val, hasVal := strings.Cut(strings.TrimSpace(g), "=")
	if name == "" {
		return "", false, false
	}
	if !hasVal {
		return name, true, true
	}
	switch strings.ToLower(val) {
	case "true":
		return name, true, true
	case "false":
		return name, false, true
	}
	return "", false, false
}

// normalize fills a missing plugin name with its type. It is part of the
// schema (llm-d does the same), not a system default.
func normalize(cfg *Config) {
	for i := range cfg.Plugins {
		if cfg.Plugins[i].Name == "" {
			cfg.Plugins[i].Name = cfg.Plugins[i].Type
		}
	}
}

// implicitRefs are plugin names a flow-control reference may use without
// declaring them: Defaults adds plugins of these types under these names.
var implicitRefs = []string{
	typeFCFSOrdering, typeGlobalStrictFairness, typeStaticUsageLimit, typeUtilizationDetector,
}

// validate checks the structure of a normalized configuration: required
// fields, unique names, weights, and that every reference names a plugin.
// With implicitOK, flow-control references may name the default policies and
// detector that Defaults adds.
func validate(cfg *Config, implicitOK bool) error {
	var l errList
	names := map[string]int{}
	for i, p := range cfg.Plugins {
		path := index("plugins", i)
		if p.Type == "" {
			l.add(join(path, "type"), p.line, "missing: every plugin needs a type")
			continue
		}
		if first, dup := names[p.Name]; dup {
			l.add(join(path, "name"), p.line, "duplicate plugin name %q (also plugins[%d]); give one of them another name", p.Name, first)
			continue
		}
		names[p.Name] = i
	}
	defined := func(name string) bool { _, ok := names[name]; return ok }
	checkRef := func(path string, line int, ref string, implicit bool) {
		switch {
		case ref == "":
			l.add(path, line, "missing")
		case !defined(ref) && !(implicit && implicitOK && slices.Contains(implicitRefs, ref)):
			l.add(path, line, "undefined plugin %q%s", ref, suggestName(ref, cfg))
		}
	}
	profiles := map[string]int{}
	for i, prof := range cfg.SchedulingProfiles {
		path := index("schedulingProfiles", i)
		if prof.Name == "" {
			l.add(join(path, "name"), prof.line, "missing: every profile needs a name")
		} else if first, dup := profiles[prof.Name]; dup {
			l.add(join(path, "name"), prof.line, "duplicate profile name %q (also schedulingProfiles[%d])", prof.Name, first)
		} else {
			profiles[prof.Name] = i
		}
		refs := map[string]int{}
		for j, pp := range prof.Plugins {
			pp := pp
			ppath := index(join(path, "plugins"), j)
			checkRef(join(ppath, "pluginRef"), pp.line, pp.PluginRef, false)
			if first, dup := refs[pp.PluginRef]; dup && pp.PluginRef != "" {
				l.add(join(ppath, "pluginRef"), pp.line, "plugin %q is already in this profile (plugins[%d])", pp.PluginRef, first)
			}
			refs[pp.PluginRef] = j
			if w := pp.Weight; w != nil && (math.IsNaN(*w) || math.IsInf(*w, 0) || *w <= 0) {
				l.add(join(ppath, "weight"), pp.line, "must be > 0 (got %v)", *w)
			}
		}
	}
	if dl := cfg.DataLayer; dl != nil {
		for i, s := range dl.Sources {
			path := index("dataLayer.sources", i)
			checkRef(join(path, "pluginRef"), s.line, s.PluginRef, false)
			for j, e := range s.Extractors {
				checkRef(join(index(join(path, "extractors"), j), "pluginRef"), e.line, e.PluginRef, false)
			}
		}
		if dl.Discovery != nil {
			checkRef("dataLayer.discovery.pluginRef", dl.Discovery.line, dl.Discovery.PluginRef, false)
		}
	}
	if fc := cfg.FlowControl; fc != nil {
		if fc.DefaultRequestTTL != nil && *fc.DefaultRequestTTL < 0 {
			l.add("flowControl.defaultRequestTTL", 0, "must not be negative")
		}
		if fc.NoEndpointRequestTTL != nil && *fc.NoEndpointRequestTTL < 0 {
			l.add("flowControl.noEndpointRequestTTL", 0, "must not be negative")
		}
		if fc.UsageLimitPolicyPluginRef != "" {
			checkRef("flowControl.usageLimitPolicyPluginRef", fc.usageLimitLine, fc.UsageLimitPolicyPluginRef, true)
		}
		if sd := fc.SaturationDetector; sd != nil && sd.PluginRef != "" {
			checkRef("flowControl.saturationDetector.pluginRef", sd.line, sd.PluginRef, true)
		}
		positive := func(path string, line int, q *Quantity, unset string) {
			if q != nil && q.Value() == 0 {
				l.add(path, line, "must be > 0; leave it out for %s", unset)
			}
		}
		positive("flowControl.maxBytes", 0, fc.MaxBytes, "no limit")
		positive("flowControl.maxRequests", 0, fc.MaxRequests, "no limit")
		checkBand := func(path string, b *PriorityBand) {
			positive(join(path, "maxBytes"), b.line, b.MaxBytes, "the band default of 1G")
			positive(join(path, "maxRequests"), b.line, b.MaxRequests, "the band default of 5000")
			if b.FairnessPolicyRef != "" {
				checkRef(join(path, "fairnessPolicyRef"), b.line, b.FairnessPolicyRef, true)
			}
			if b.OrderingPolicyRef != "" {
				checkRef(join(path, "orderingPolicyRef"), b.line, b.OrderingPolicyRef, true)
			}
		}
		prios := map[int]int{}
		for i := range fc.PriorityBands {
			b := &fc.PriorityBands[i]
			path := index("flowControl.priorityBands", i)
			if first, dup := prios[b.Priority]; dup {
				l.add(join(path, "priority"), b.line, "duplicate priority %d (also priorityBands[%d])", b.Priority, first)
			}
			prios[b.Priority] = i
			checkBand(path, b)
		}
		if fc.DefaultPriorityBand != nil {
			checkBand("flowControl.defaultPriorityBand", fc.DefaultPriorityBand)
		}
		if fc.DefaultNegativePriorityBand != nil {
			checkBand("flowControl.defaultNegativePriorityBand", fc.DefaultNegativePriorityBand)
		}
	}
	if rh := cfg.RequestHandler; rh != nil {
		seen := map[string]int{}
		for i, r := range rh.Parsers {
			path := join(index("requestHandler.parsers", i), "pluginRef")
			checkRef(path, r.line, r.PluginRef, false)
			if first, dup := seen[r.PluginRef]; dup && r.PluginRef != "" {
				l.add(path, r.line, "parser %q is already listed (parsers[%d])", r.PluginRef, first)
			}
			seen[r.PluginRef] = i
		}
	}
	return l.err()
}

// suggestName returns ` (did you mean "x"?)` for a near-miss plugin name.
func suggestName(ref string, cfg *Config) string {
	best, bestD := "", 1<<30
	for _, p := range cfg.Plugins {
		if d := editDistance(ref, p.Name); d < bestD {
			best, bestD = p.Name, d
		}
	}
	if best != "" && bestD <= max(2, len(ref)/4) {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}
