package config

import (
	"fmt"
	"strings"

	"github.com/eppkit/eppkit/plugins"
)

// Defaults applies the system defaults to cfg, in place. It is the only place
// defaults are applied; Build calls it on a copy of the configuration and
// Runtime.Config shows the result. In order:
//
//  1. No plugins and no profiles (no configuration at all): queue-scorer
//     weight 2, kv-cache-utilization-scorer weight 2, prefix-cache-scorer
//     weight 3 in a "default" profile.
//  2. No profiles: one "default" profile with every configured filter, scorer
//     and picker, in configuration order.
//  3. A scorer referenced without a weight: weight 1.
//  4. One profile and no profile handler: single-profile-handler.
//  5. A profile without a picker: max-score-picker.
//  6. Flow control: fcfs-ordering-policy, global-strict-fairness-policy and
//     static-usage-limit-policy, also as the usage-limit policy and as every
//     priority band's unset fairness and ordering policy.
//  7. No parsers: openai-parser, anthropic-parser, vllmhttp-parser.
//  8. No saturation detector: utilization-detector.
//  9. No data-layer sources (and injectDefaults not false):
//     metrics-data-source feeding core-metrics-extractor.
//
// A default plugin is found by name: when the configuration already has a
// plugin named like the default type (e.g. "max-score-picker") that plugin is
// used, whatever its parameters; otherwise a plugin of that type and name is
// appended with no parameters. reg tells which plugins are filters, scorers,
// pickers and profile handlers (planned types by their category); it may be
// nil, then only planned types are recognised.
func Defaults(cfg *Config, reg *plugins.Registry) error {
	normalize(cfg)
	cat := newCatalog(reg)
	rolesOfName := func(name string) roles {
		if p, ok := cfg.Plugin(name); ok {
			return cat.roles(p.Type)
		}
		return 0
	}
	var conflict error
	// ensureAs returns the name of the default plugin of type typ, adding it
	// unless a plugin of that name exists; that plugin must fill role need.
	ensureAs := func(typ string, need roles) string {
		for i, p := range cfg.Plugins {
			if p.Name == typ {
				if need != 0 && cat.roles(p.Type)&need == 0 && conflict == nil {
					conflict = &Error{Path: join(index("plugins", i), "name"), Line: p.line, Err: fmt.Errorf(
						"%q is the name of the default %s, but this plugin has type %s: rename it", typ, typ, p.Type)}
				}
				return typ
			}
		}
		cfg.Plugins = append(cfg.Plugins, PluginSpec{Name: typ, Type: typ, origin: fromDefault})
		return typ
	}
	ensure := func(typ string) string { return ensureAs(typ, 0) }
	if cfg.APIVersion == "" {
		cfg.APIVersion = APIVersion
	}
	if cfg.Kind == "" {
		cfg.Kind = Kind
	}

	// 1. No configuration at all.
	if len(cfg.Plugins) == 0 && len(cfg.SchedulingProfiles) == 0 {
		prof := SchedulingProfile{Name: "default"}
		for _, d := range []struct {
			typ    string
			weight float64
		}{{typeQueueScorer, 2}, {typeKVCacheUtilizationScorer, 2}, {typePrefixCacheScorer, 3}} {
			ensure(d.typ)
			prof.Plugins = append(prof.Plugins, ProfilePlugin{PluginRef: d.typ, Weight: &d.weight})
		}
		cfg.SchedulingProfiles = []SchedulingProfile{prof}
	}

	// 2. No profiles: a default profile with every filter, scorer and picker.
	if len(cfg.SchedulingProfiles) == 0 {
		prof := SchedulingProfile{Name: "default"}
		var pickers []string
		for _, p := range cfg.Plugins {
			r := cat.roles(p.Type)
			if r&roleProfileMember != 0 {
				prof.Plugins = append(prof.Plugins, ProfilePlugin{PluginRef: p.Name})
			}
			if r&rolePicker != 0 {
				pickers = append(pickers, fmt.Sprintf("%q", p.Name))
			}
		}
		if len(pickers) > 1 {
			return &Error{Path: "schedulingProfiles", Err: fmt.Errorf(
				"missing, and a default profile cannot hold the %d configured pickers %s: add a profile that names one",
				len(pickers), strings.Join(pickers, ", "))}
		}
		cfg.SchedulingProfiles = []SchedulingProfile{prof}
	}

	// 3. Scorer weights.
	for i := range cfg.SchedulingProfiles {
		for j := range cfg.SchedulingProfiles[i].Plugins {
			pp := &cfg.SchedulingProfiles[i].Plugins[j]
			if pp.Weight == nil && rolesOfName(pp.PluginRef)&roleScorer != 0 {
				w := 1.0
				pp.Weight = &w
			}
		}
	}

	// 4. One profile and no handler.
	if len(cfg.SchedulingProfiles) == 1 {
		hasHandler := false
		for _, p := range cfg.Plugins {
			hasHandler = hasHandler || cat.roles(p.Type)&roleHandler != 0
		}
		if !hasHandler {
			ensureAs(typeSingleProfileHandler, roleHandler)
		}
	}

	// 5. A profile without a picker.
	for i := range cfg.SchedulingProfiles {
		prof := &cfg.SchedulingProfiles[i]
		hasPicker := false
		for _, pp := range prof.Plugins {
			hasPicker = hasPicker || rolesOfName(pp.PluginRef)&rolePicker != 0
		}
		if !hasPicker {
			prof.Plugins = append(prof.Plugins, ProfilePlugin{PluginRef: ensureAs(typeMaxScorePicker, rolePicker)})
		}
	}

	// 6. Flow-control policies.
	ordering, fairness, usage := ensure(typeFCFSOrdering), ensure(typeGlobalStrictFairness), ensure(typeStaticUsageLimit)
	if cfg.FlowControl == nil {
		cfg.FlowControl = &FlowControl{}
	}
	fc := cfg.FlowControl
	if fc.UsageLimitPolicyPluginRef == "" {
		fc.UsageLimitPolicyPluginRef = usage
		fc.defaultUsageLimit = usage
	}
	bands := []*PriorityBand{fc.DefaultPriorityBand, fc.DefaultNegativePriorityBand}
	for i := range fc.PriorityBands {
		bands = append(bands, &fc.PriorityBands[i])
	}
	for _, b := range bands {
		if b == nil {
			continue
		}
		if b.FairnessPolicyRef == "" {
			b.FairnessPolicyRef = fairness
		}
		if b.OrderingPolicyRef == "" {
			b.OrderingPolicyRef = ordering
		}
	}

	// 7. Parsers.
	if cfg.RequestHandler == nil {
		cfg.RequestHandler = &RequestHandler{}
	}
	if len(cfg.RequestHandler.Parsers) == 0 {
		for _, typ := range defaultParsers {
			cfg.RequestHandler.Parsers = append(cfg.RequestHandler.Parsers, PluginRef{PluginRef: ensureAs(typ, roleParser)})
		}
	}

	// 8. Saturation detector.
	if fc.SaturationDetector == nil || fc.SaturationDetector.PluginRef == "" {
		fc.SaturationDetector = &PluginRef{PluginRef: ensure(typeUtilizationDetector)}
	} else if fc.SaturationDetector.PluginRef == typeUtilizationDetector {
		ensure(typeUtilizationDetector)
	}

	// 9. Data layer.
	dl := cfg.DataLayer
	optedOut := dl != nil && dl.InjectDefaults != nil && !*dl.InjectDefaults
	if !optedOut && (dl == nil || len(dl.Sources) == 0) {
		if dl == nil {
			dl = &DataLayer{}
			cfg.DataLayer = dl
		}
		dl.Sources = append(dl.Sources, DataSource{
			PluginRef:  ensure(typeMetricsDataSource),
			Extractors: []PluginRef{{PluginRef: ensure(typeCoreMetricsExtractor)}},
		})
	}
	return conflict
}
