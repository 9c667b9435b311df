package config

import (
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/flowcontrol"
	"github.com/eppkit/eppkit/requestcontrol"
)

// flowControl builds the flow controller from the flowControl section (the
// flowControl feature gate is on) and makes it dir's admission gate:
// requests wait in its queues until dispatched. The gate is also appended
// to the response-complete hooks, after every plugin's, so a completing
// request wakes the dispatcher once its load is released. The controller is
// Runtime.FlowControl, started here (unless Options.ManualDispatch) and
// stopped by Runtime.Close.
//
// A policy or detector of a type this build lacks is reported and the
// default takes its place; a plugin of the wrong kind is an error at its
// reference's path.
func (b *builder) flowControl(dir *requestcontrol.Director) error {
	fc := b.rt.Config.FlowControl // never nil after Defaults
	var l errList
	cfg := flowcontrol.Config{
		MaxRequests:   quantityValue(fc.MaxRequests),
		MaxBytes:      quantityValue(fc.MaxBytes),
		RequestTTL:    ttlValue(fc.DefaultRequestTTL),
		NoEndpointTTL: ttlValue(fc.NoEndpointRequestTTL),
		Clock:         b.opts.Clock,
		Logger:        b.log.With("component", "flow-control"),
		// The pool is read when dispatching, so a Pool set on the Director
		// after Build (before serving) is the one used.
		Endpoints: func() []*datalayer.Endpoint {
			if dir.Pool == nil {
				return nil
			}
			return dir.Pool.Endpoints()
		},
	}
	if u, ok := flowPlugin[flowcontrol.UsageLimitPolicy](b, &l, "flowControl.usageLimitPolicyPluginRef",
		fc.usageLimitLine, fc.UsageLimitPolicyPluginRef, "a usage-limit policy", "the default static-usage-limit-policy is used"); ok {
		cfg.UsageLimit = u
	}
	if sd := fc.SaturationDetector; sd != nil {
		if d, ok := flowPlugin[flowcontrol.SaturationDetector](b, &l, "flowControl.saturationDetector.pluginRef",
			sd.line, sd.PluginRef, "a saturation detector", "without a detector requests are dispatched at once, within the capacity limits"); ok {
			cfg.Saturation = d
		}
	}
	band := func(path string, pb *PriorityBand) *flowcontrol.BandConfig {
		bc := &flowcontrol.BandConfig{Priority: pb.Priority, MaxRequests: quantityValue(pb.MaxRequests), MaxBytes: quantityValue(pb.MaxBytes)}
		if p, ok := flowPlugin[flowcontrol.FairnessPolicy](b, &l, join(path, "fairnessPolicyRef"), pb.line,
			pb.FairnessPolicyRef, "a fairness policy", "the default global-strict-fairness-policy is used"); ok {
			bc.Fairness = p
		}
		if p, ok := flowPlugin[flowcontrol.OrderingPolicy](b, &l, join(path, "orderingPolicyRef"), pb.line,
			pb.OrderingPolicyRef, "an ordering policy", "the default fcfs-ordering-policy is used"); ok {
			bc.Ordering = p
		}
		return bc
	}
	for i := range fc.PriorityBands {
		cfg.Bands = append(cfg.Bands, *band(index("flowControl.priorityBands", i), &fc.PriorityBands[i]))
	}
	if fc.DefaultPriorityBand != nil {
		cfg.DefaultBand = band("flowControl.defaultPriorityBand", fc.DefaultPriorityBand)
	}
	if fc.DefaultNegativePriorityBand != nil {
		cfg.NegativeBand = band("flowControl.defaultNegativePriorityBand", fc.DefaultNegativePriorityBand)
	}
	if fc.EnableEviction {
		b.warn("flowControl.enableEviction", 0, "eviction of dispatched requests is not supported; ignored")
	}
	if err := l.err(); err != nil {
		return err
	}
	ctl, err := flowcontrol.New(cfg)
	if err != nil {
		return &Error{Path: "flowControl", Err: err}
	}
	b.rt.FlowControl = ctl
	if !b.opts.ManualDispatch {
		ctl.Start()
	}
	gate := &requestcontrol.FlowAdmitter{Controller: ctl, Logger: cfg.Logger}
	dir.Admission = gate
	dir.ResponseCompletes = append(dir.ResponseCompletes,
		requestcontrol.Named[requestcontrol.ResponseComplete]{Name: "flow-control", Plugin: gate})
	return nil
}

// flowPlugin returns the plugin called ref as a T (kind, with its article,
// names T in messages). A plugin this build lacks is reported with what
// happens instead (fallback); one that is not a T is an error at path.
func flowPlugin[T any](b *builder, l *errList, path string, line int, ref, kind, fallback string) (T, bool) {
	var zero T
	p, ok := b.rt.Plugin(ref)
	if !ok {
		b.warn(path, line, "plugin %q: %s; %s", ref, b.unavailable[ref], fallback)
		return zero, false
	}
	v, ok := p.(T)
	if !ok {
		l.add(path, line, "plugin %q (type %s) is not %s", ref, b.typeOf(ref), kind)
		return zero, false
	}
	return v, true
}

// quantityValue returns q's value, 0 when unset (validate rejects an
// explicit 0).
func quantityValue(q *Quantity) int64 {
	if q == nil {
		return 0
	}
	return q.Value()
}

// ttlValue maps a YAML TTL to flowcontrol's: unset is the default (0), "0s"
// disables expiry.
func ttlValue(d *time.Duration) time.Duration {
	switch {
	case d == nil:
		return 0
	case *d == 0:
		return flowcontrol.NoTTL
	}
	return *d
}

// flowControlSettings reports whether the section sets anything besides
// the saturation detector, which the admission gate uses with the gate off
// too, and besides what Defaults fills in (a configuration that went through
// Defaults before Build, as httpproxy.WithDiscovery's does, has a section the
// user did not write).
func flowControlSettings(fc *FlowControl) bool {
	return fc != nil && (fc.MaxBytes != nil || fc.MaxRequests != nil || fc.DefaultRequestTTL != nil ||
		fc.NoEndpointRequestTTL != nil || fc.DefaultPriorityBand != nil || fc.DefaultNegativePriorityBand != nil ||
		len(fc.PriorityBands) > 0 || fc.EnableEviction ||
		fc.UsageLimitPolicyPluginRef != "" && fc.UsageLimitPolicyPluginRef != fc.defaultUsageLimit)
}
