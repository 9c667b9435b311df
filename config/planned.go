package config

import (
	"sort"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// Plugin types the system defaults refer to.
const (
	typeQueueScorer              = "queue-scorer"
	typeKVCacheUtilizationScorer = "kv-cache-utilization-scorer"
	typePrefixCacheScorer        = "prefix-cache-scorer"
	typeSingleProfileHandler     = "single-profile-handler"
	typeMaxScorePicker           = "max-score-picker"
	typeFCFSOrdering             = "fcfs-ordering-policy"
	typeGlobalStrictFairness     = "global-strict-fairness-policy"
	typeStaticUsageLimit         = "static-usage-limit-policy"
	typeUtilizationDetector      = "utilization-detector"
	typeMetricsDataSource        = "metrics-data-source"
	typeCoreMetricsExtractor     = "core-metrics-extractor"
	typeOpenAIParser             = "openai-parser"
	typeAnthropicParser          = "anthropic-parser"
	typeVLLMHTTPParser           = "vllmhttp-parser"
)

// defaultParsers are the parsers used when the configuration names none.
var defaultParsers = []string{typeOpenAIParser, typeAnthropicParser, typeVLLMHTTPParser}

// planned lists plugin types that are part of the product but may be missing
// from a build's registry (they arrive in later work, or a custom build leaves
// them out). A configuration that uses one still loads: the plugin is reported
// as not available and not used, never silently ignored. A type that is
// neither registered nor planned is an error. The category tells Defaults
// where such a plugin would go (a planned scorer still joins the default
// profile, then is dropped from it with a warning).
var planned = map[string]string{
	// scheduling
	typePrefixCacheScorer:          "scorer",
	"precise-prefix-cache-scorer":  "scorer",
	"active-request-scorer":        "scorer",
	"token-load-scorer":            "scorer",
	"session-affinity-scorer":      "scorer",
	"no-hit-lru-scorer":            "scorer",
	"prefix-cache-affinity-filter": "filter",
	"utilization-filter":           "filter",
	"prefill-filter":               "filter",
	"decode-filter":                "filter",
	"disagg-profile-handler":       "profile-handler",
	// request handling
	typeAnthropicParser:  "parser",
	typeVLLMHTTPParser:   "parser",
	"sglang-parser":      "parser",
	"passthrough-parser": "parser",
	// flow control
	typeFCFSOrdering:               "ordering-policy",
	"edf-ordering-policy":          "ordering-policy",
	"slo-deadline-ordering-policy": "ordering-policy",
	typeGlobalStrictFairness:       "fairness-policy",
	"round-robin-fairness-policy":  "fairness-policy",
	typeStaticUsageLimit:           "usage-limit-policy",
	"priority-holdback-policy":     "usage-limit-policy",
	typeUtilizationDetector:        "saturation-detector",
	"concurrency-detector":         "saturation-detector",
	// data layer
	typeMetricsDataSource:    "data-source",
	typeCoreMetricsExtractor: "extractor",
	"models-data-source":     "data-source",
	"models-data-extractor":  "extractor",
	"file-discovery":         "discovery",
	"static-discovery":       "discovery",
}

// PlannedType is a plugin type the product defines that a build may lack.
type PlannedType struct {
	Type     string
	Category string
}

// PlannedTypes returns the planned plugin types sorted by name. Types that
// reg registers are left out; reg may be nil.
func PlannedTypes(reg *plugins.Registry) []PlannedType {
	var out []PlannedType
	for t, c := range planned {
		if reg != nil {
			if _, ok := reg.Lookup(t); ok {
				continue
			}
		}
		out = append(out, PlannedType{t, c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// roles is the set of scheduling and request-handling slots a plugin fills.
type roles uint8

const (
	roleFilter roles = 1 << iota
	roleScorer
	rolePicker
	roleHandler
	roleParser
)

const roleProfileMember = roleFilter | roleScorer | rolePicker

func rolesOf(p any) roles {
	var r roles
	if _, ok := p.(scheduling.Filter); ok {
		r |= roleFilter
	}
	if _, ok := p.(scheduling.Scorer); ok {
		r |= roleScorer
	}
	if _, ok := p.(scheduling.Picker); ok {
		r |= rolePicker
	}
	if _, ok := p.(scheduling.ProfileHandler); ok {
		r |= roleHandler
	}
	if _, ok := p.(parsers.Parser); ok {
		r |= roleParser
	}
	return r
}

func categoryRoles(category string) roles {
	switch category {
	case "filter":
		return roleFilter
	case "scorer":
		return roleScorer
	case "picker":
		return rolePicker
	case "profile-handler":
		return roleHandler
	case "parser":
		return roleParser
	}
	return 0
}

// catalog tells which slots a plugin type fills, before any instance of the
// configuration exists: a registered type by a throwaway instance built with
// no parameters (interfaces belong to the Go type, not to the parameters),
// falling back to its registered category; a planned type by its category.
type catalog struct {
	reg   *plugins.Registry
	cache map[string]roles
}

func newCatalog(reg *plugins.Registry) *catalog {
	return &catalog{reg: reg, cache: map[string]roles{}}
}

func (c *catalog) roles(typ string) roles {
	if r, ok := c.cache[typ]; ok {
		return r
	}
	var r roles
	if info, ok := c.lookup(typ); ok {
		if p, err := c.reg.Build(typ, typ, nil); err == nil {
			r = rolesOf(p)
		} else {
			r = categoryRoles(info.Category)
		}
	} else {
		r = categoryRoles(planned[typ])
	}
	c.cache[typ] = r
	return r
}

func (c *catalog) lookup(typ string) (*plugins.Info, bool) {
	if c.reg == nil {
		return nil, false
	}
	return c.reg.Lookup(typ)
}
