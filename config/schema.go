package config

import (
	"encoding/json"
	"slices"
	"time"
)

// API versions and kind of the configuration document. Both llm-d's group and
// the Gateway API Inference Extension's older group are accepted.
const (
	APIVersion       = "llm-d.ai/v1alpha1"
	LegacyAPIVersion = "inference.networking.x-k8s.io/v1alpha1"
	Kind             = "EndpointPickerConfig"
)

// FeatureFlowControl is the feature gate that enables flow control.
const FeatureFlowControl = "flowControl"

// Config is llm-d's EndpointPickerConfig. Load fills it from YAML; Go callers
// may build one directly. Field names follow the YAML keys.
type Config struct {
	APIVersion string
	Kind       string
	// FeatureGates toggles optional features: "name", "name=true" or
	// "name=false" (a bare name means true).
	FeatureGates []string
	// Plugins are the plugin instances to create, in order.
	Plugins []PluginSpec
	// SchedulingProfiles are the named filter/scorer/picker chains.
	SchedulingProfiles []SchedulingProfile
	DataLayer          *DataLayer
	FlowControl        *FlowControl
	RequestHandler     *RequestHandler

	warnings []Warning // found by Load (deprecated fields, unknown gates)
}

// PluginSpec is one plugin instance: its type, its unique name (the type when
// omitted) and its parameters as JSON (nil for none).
type PluginSpec struct {
	Name       string
	Type       string
	Parameters json.RawMessage

	line   int
	origin origin
	source string // fromCompat: the YAML path of the plugin it was declared for
}

// origin says where a plugin spec came from, for messages.
type origin uint8

const (
	fromUser    origin = iota // written in the configuration
	fromDefault               // added by Defaults
	fromGraph                 // auto-created default producer
	fromCompat                // declared to hold a scorer's prefix index parameters (compat.go)
)

// SchedulingProfile is a named chain of filters, scorers and one picker; the
// plugin kinds are recognised from the referenced instances.
type SchedulingProfile struct {
	Name    string
	Plugins []ProfilePlugin

	line int
}

// ProfilePlugin references a plugin instance from a profile. Weight applies
// to scorers (1 when unset).
type ProfilePlugin struct {
	PluginRef string
	Weight    *float64

	line int
}

// PluginRef references a plugin instance by name.
type PluginRef struct {
	PluginRef string

	line int
}

// DataLayer configures metrics sources, their extractors and discovery.
type DataLayer struct {
	// InjectDefaults false disables the default metrics source and extractor.
	InjectDefaults *bool
	Sources        []DataSource
	Discovery      *PluginRef
}

// DataSource is a data source and the extractors fed by it.
type DataSource struct {
	PluginRef  string
	Extractors []PluginRef

	line int
}

// FlowControl configures the flow-control layer. It is used only when the
// flowControl feature gate is on (the saturation detector also serves the
// admission gate with it off). Unset global limits mean no limit, unset band
// limits the band defaults (5000 requests, 1G bytes); a zero limit is an
// error (llm-d reads 0 as unset: leave the field out instead).
type FlowControl struct {
	MaxBytes    *Quantity
	MaxRequests *Quantity
	// DefaultRequestTTL bounds how long a request may wait in the queue.
	DefaultRequestTTL *time.Duration
	// NoEndpointRequestTTL bounds the wait while the pool has no endpoints.
	NoEndpointRequestTTL        *time.Duration
	DefaultPriorityBand         *PriorityBand
	DefaultNegativePriorityBand *PriorityBand
	PriorityBands               []PriorityBand
	UsageLimitPolicyPluginRef   string
	SaturationDetector          *PluginRef
	EnableEviction              bool

	usageLimitLine    int
	defaultUsageLimit string // the usage-limit policy Defaults filled in, not the user
}

// PriorityBand configures one priority level.
type PriorityBand struct {
	Priority          int
	MaxBytes          *Quantity
	MaxRequests       *Quantity
	FairnessPolicyRef string
	OrderingPolicyRef string

	line int
}

// RequestHandler configures request parsing.
type RequestHandler struct {
	// Parsers are the parser instances; for the same path suffix the first wins.
	Parsers []PluginRef
}

// Warnings returns what Load accepted with a warning (deprecated fields,
// unknown feature gates). Build adds its own warnings to Runtime.Warnings.
func (c *Config) Warnings() []Warning { return slices.Clone(c.warnings) }

// FeatureEnabled reports whether the feature gate name is on.
func (c *Config) FeatureEnabled(name string) bool {
	on := false
	for _, g := range c.FeatureGates {
		n, v, ok := parseGate(g)
		if ok && n == name {
			on = v
		}
	}
	return on
}

// Plugin returns the spec of the plugin instance called name.
func (c *Config) Plugin(name string) (*PluginSpec, bool) {
	for i := range c.Plugins {
		if c.Plugins[i].Name == name {
			return &c.Plugins[i], true
		}
	}
	return nil, false
}

// Clone returns a deep copy of c.
func (c *Config) Clone() *Config {
	if c == nil {
		return nil
	}
	out := *c
	out.FeatureGates = slices.Clone(c.FeatureGates)
	out.warnings = slices.Clone(c.warnings)
	out.Plugins = slices.Clone(c.Plugins)
	for i := range out.Plugins {
		out.Plugins[i].Parameters = slices.Clone(out.Plugins[i].Parameters)
	}
	out.SchedulingProfiles = slices.Clone(c.SchedulingProfiles)
	for i := range out.SchedulingProfiles {
		p := &out.SchedulingProfiles[i]
		p.Plugins = slices.Clone(p.Plugins)
		for j := range p.Plugins {
			p.Plugins[j].Weight = clonePtr(p.Plugins[j].Weight)
		}
	}
	if c.DataLayer != nil {
		dl := *c.DataLayer
		dl.InjectDefaults = clonePtr(dl.InjectDefaults)
		dl.Sources = slices.Clone(dl.Sources)
		for i := range dl.Sources {
			dl.Sources[i].Extractors = slices.Clone(dl.Sources[i].Extractors)
		}
		dl.Discovery = clonePtr(dl.Discovery)
		out.DataLayer = &dl
	}
	if c.FlowControl != nil {
		fc := *c.FlowControl
		fc.MaxBytes = clonePtr(fc.MaxBytes)
		fc.MaxRequests = clonePtr(fc.MaxRequests)
		fc.DefaultRequestTTL = clonePtr(fc.DefaultRequestTTL)
		fc.NoEndpointRequestTTL = clonePtr(fc.NoEndpointRequestTTL)
		fc.DefaultPriorityBand = cloneBand(fc.DefaultPriorityBand)
		fc.DefaultNegativePriorityBand = cloneBand(fc.DefaultNegativePriorityBand)
		fc.PriorityBands = slices.Clone(fc.PriorityBands)
		for i := range fc.PriorityBands {
			b := &fc.PriorityBands[i]
			b.MaxBytes, b.MaxRequests = clonePtr(b.MaxBytes), clonePtr(b.MaxRequests)
		}
		fc.SaturationDetector = clonePtr(fc.SaturationDetector)
		out.FlowControl = &fc
	}
	if c.RequestHandler != nil {
		rh := RequestHandler{Parsers: slices.Clone(c.RequestHandler.Parsers)}
		out.RequestHandler = &rh
	}
	return &out
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneBand(b *PriorityBand) *PriorityBand {
	if b == nil {
		return nil
	}
	c := *b
	c.MaxBytes, c.MaxRequests = clonePtr(b.MaxBytes), clonePtr(b.MaxRequests)
	return &c
}
