package config

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/flowcontrol"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/scheduling"
)

// Options configure Build.
type Options struct {
	// Logger receives the effective configuration, the auto-created
	// producers and the warnings; each plugin gets it with a "plugin"
	// attribute. Nil discards.
	Logger *slog.Logger
	// Clock is handed to every plugin; nil means the wall clock.
	Clock plugins.Clock
	// Seed seeds the random sources: each plugin gets its own source derived
	// from Seed and its instance name, so the same seed gives the same
	// decisions and adding a plugin does not change another's stream.
	Seed uint64
	// Pool selects the endpoints of the data layer's discovery (labels and
	// target ports); the zero Pool takes every target at its own port.
	Pool datalayer.Pool
	// ManualDispatch leaves the flow controller's background dispatcher
	// stopped: the caller dispatches with Runtime.FlowControl.Dispatch (the
	// simulator does, in virtual time).
	ManualDispatch bool
}

// Runtime is a built configuration: the plugin instances, initialised, wired
// into a request pipeline. Close it to release the plugins.
type Runtime struct {
	// Config is the effective configuration: the user's, plus system defaults
	// and auto-created producers. Config.Effective prints it.
	Config *Config
	// Director runs producers, the scheduler and pre-request hooks.
	Director *requestcontrol.Director
	// Selector picks the parser for a request path.
	Selector *parsers.Selector
	// Plugins are the instantiated plugins in initialisation order: the
	// configured ones in configuration order, then the auto-created producers.
	Plugins []Instance
	// ProducerOrder names the data producers in the order they run.
	ProducerOrder []string
	// AutoCreated are the default producers the data graph added.
	AutoCreated []AutoProducer
	// Warnings are what was accepted but not used, or deprecated.
	Warnings []Warning
	// DataLayer runs the dataLayer section: discovery, data sources and
	// their extractors, and the endpoint listeners. Start it to collect;
	// Close stops it. When a discovery source is configured it is also the
	// Director's Pool.
	DataLayer *datalayer.Runtime
	// FlowControl queues requests when the flowControl feature gate is on
	// (nil otherwise): it is the Director's admission gate, its dispatcher
	// runs from Build, and Close drains it.
	FlowControl *flowcontrol.Controller

	closeOnce sync.Once
	closeErr  error
}

// Instance is one plugin instance.
type Instance struct {
	Name, Type string
	Plugin     any
}

// AutoProducer is a default producer the data graph created because a
// configured plugin consumes a key nobody produces.
type AutoProducer struct {
	Name, Type string
	Keys       []string // the data keys it produces
	For        []string // the plugins consuming them
}

// String returns "NAME (type T) produces KEYS for CONSUMERS".
func (a AutoProducer) String() string {
	return fmt.Sprintf("%s (type %s) produces %s for %s", a.Name, a.Type,
		strings.Join(a.Keys, ", "), strings.Join(a.For, ", "))
}

// Plugin returns the instance called name.
func (r *Runtime) Plugin(name string) (any, bool) {
	for _, p := range r.Plugins {
		if p.Name == name {
			return p.Plugin, true
		}
	}
	return nil, false
}

// Close drains flow control (waiting requests get 503 rejected-shutting-down),
// stops the data layer, then closes every plugin in reverse initialisation
// order. It is safe to call more than once.
func (r *Runtime) Close() error {
	r.closeOnce.Do(func() {
		if r.FlowControl != nil {
			_ = r.FlowControl.Close()
		}
		var dlErr error
		if r.DataLayer != nil {
			dlErr = r.DataLayer.Close()
		}
		ps := make([]any, len(r.Plugins))
		for i, p := range r.Plugins {
			ps[i] = p.Plugin
		}
		r.closeErr = errors.Join(dlErr, plugins.CloseAll(ps))
	})
	return r.closeErr
}

// Build turns cfg into a Runtime: it validates cfg, applies Defaults to a copy
// (cfg itself is not modified), builds every plugin through reg (strict
// parameters, Validate), initialises them with their Deps in configuration
// order, resolves the data-key graph (adding default producers), and wires
// the scheduling profiles, the profile handler, the parsers and a Director.
//
// Prefix index parameters given to prefix-cache-scorer (GAIE's older layout:
// hashBlockSize, maxPrefixBlocksToMatch, lruCapacityPerServer, ...) are moved
// to the approx-prefix-cache-producer it reads, with a warning.
//
// Plugins of planned types that reg lacks are reported in Runtime.Warnings and
// left out (a profile drops them); an unknown type is an error. Errors are
// *Error values with the YAML path, joined with errors.Join. On error every
// plugin already initialised is closed.
func Build(ctx context.Context, cfg *Config, reg *plugins.Registry, opts Options) (*Runtime, error) {
	if reg == nil {
		return nil, errors.New("config: Build: nil registry")
	}
	if cfg == nil {
		cfg = &Config{}
	}
	b := &builder{
		ctx: ctx, reg: reg, opts: opts, log: opts.Logger,
		rt:          &Runtime{Config: cfg.Clone(), Warnings: cfg.Warnings()},
		unavailable: map[string]string{},
	}
	if b.log == nil {
		b.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	eff := b.rt.Config
	normalize(eff)
	if err := validate(eff, true); err != nil {
		return nil, err
	}
	if err := checkTypes(eff, reg); err != nil {
		return nil, err
	}
	moved, err := moveScorerPrefixParams(eff)
	if err != nil {
		return nil, err
	}
	b.rt.Warnings = append(b.rt.Warnings, moved...)
	userFlowControl := flowControlSettings(eff.FlowControl)
	if err := Defaults(eff, reg); err != nil {
		return nil, err
	}
	if err := validate(eff, false); err != nil {
		return nil, err
	}
	b.featureWarnings(userFlowControl)
	if err := b.instantiate(); err != nil {
		return nil, err
	}
	if err := b.wire(); err != nil {
		_ = b.rt.Close()
		return nil, err
	}
	b.report()
	return b.rt, nil
}

type builder struct {
	ctx         context.Context
	reg         *plugins.Registry
	opts        Options
	log         *slog.Logger
	rt          *Runtime
	unavailable map[string]string // plugin name → why it has no instance
}

func (b *builder) warn(path string, line int, format string, args ...any) {
	b.rt.Warnings = append(b.rt.Warnings, Warning{Path: path, Line: line, Message: fmt.Sprintf(format, args...)})
}

// checkTypes rejects plugin types that are neither registered nor planned.
func checkTypes(cfg *Config, reg *plugins.Registry) error {
	var l errList
	for i, p := range cfg.Plugins {
		if _, ok := reg.Lookup(p.Type); ok {
			continue
		}
		if _, ok := planned[p.Type]; ok {
			continue
		}
		known := make([]string, 0, len(planned))
		for _, info := range reg.Types() {
			known = append(known, info.Type)
		}
		for t := range planned {
			known = append(known, t)
		}
		sort.Strings(known)
		hint := ""
		if s := suggest(p.Type, known); strings.HasPrefix(s, " (did you mean") {
			hint = s
		}
		l.add(join(index("plugins", i), "type"), p.line, "plugin %q: %w %q%s", p.Name, plugins.ErrUnknownType, p.Type, hint)
	}
	return l.err()
}

func (b *builder) featureWarnings(userFlowControl bool) {
	if userFlowControl && !b.rt.Config.FeatureEnabled(FeatureFlowControl) {
		b.warn("flowControl", 0, "the %s feature gate is off: this section is checked but not used", FeatureFlowControl)
	}
}

// deps returns the dependencies of the plugin instance called name.
func (b *builder) deps(name string) plugins.Deps {
	h := fnv.New64a()
	h.Write([]byte(name))
	return plugins.Deps{
		Name:   name,
		Logger: b.log.With("plugin", name),
		Clock:  b.opts.Clock,
		Rand:   plugins.NewRand(b.opts.Seed ^ h.Sum64()),
	}.WithDefaults()
}

// instantiate builds every available plugin of the effective configuration,
// then initialises them in order.
func (b *builder) instantiate() error {
	cfg := b.rt.Config
	var l errList
	var built []Instance
	var lines []int
	for i, spec := range cfg.Plugins {
		path := index("plugins", i)
		if spec.origin != fromUser {
			path = spec.source
		}
		if _, ok := b.reg.Lookup(spec.Type); !ok {
			what := "plugin"
			if spec.origin == fromDefault {
				what = "default plugin"
			}
			if _, isPlanned := planned[spec.Type]; isPlanned {
				b.unavailable[spec.Name] = fmt.Sprintf("type %s is not available in this build (planned)", spec.Type)
			} else {
				b.unavailable[spec.Name] = fmt.Sprintf("type %s is not registered", spec.Type)
			}
			b.warn(path, spec.line, "%s %q: %s; it is not used", what, spec.Name, b.unavailable[spec.Name])
			continue
		}
		p, err := b.reg.Build(spec.Type, spec.Name, spec.Parameters)
		if err != nil {
			// The kernel says `plugin "x" (type t): parameters: ...`; the path
			// already says parameters.
			msg := strings.Replace(err.Error(), "): parameters: ", "): ", 1)
			l.add(join(path, "parameters"), spec.line, "%s", msg)
			continue
		}
		built = append(built, Instance{Name: spec.Name, Type: spec.Type, Plugin: p})
		lines = append(lines, spec.line)
	}
	if err := l.err(); err != nil {
		return err
	}
	for i, inst := range built {
		if err := plugins.Init(b.ctx, inst.Plugin, b.deps(inst.Name)); err != nil {
			_ = b.rt.Close()
			return &Error{Path: b.pathOf(inst.Name), Line: lines[i],
				Err: fmt.Errorf("plugin %q (type %s): init: %w", inst.Name, inst.Type, err)}
		}
		b.rt.Plugins = append(b.rt.Plugins, inst)
	}
	return nil
}

// pathOf returns the YAML path of the plugin called name, or "" for a default.
func (b *builder) pathOf(name string) string {
	for i, p := range b.rt.Config.Plugins {
		if p.Name == name && p.origin == fromUser {
			return index("plugins", i)
		}
	}
	return ""
}

// wire resolves the data graph and builds the scheduler, the parsers and the
// Director.
func (b *builder) wire() error {
	rt, cfg := b.rt, b.rt.Config
	nodes := make([]plugins.Node, len(rt.Plugins))
	for i, p := range rt.Plugins {
		nodes[i] = plugins.Node{Name: p.Name, Type: p.Type, Plugin: p.Plugin}
	}
	graph, err := plugins.ResolveGraph(b.reg, nodes, func(info *plugins.Info) (any, error) {
		p, err := b.reg.Build(info.Type, info.Type, nil)
		if err != nil {
			return nil, err
		}
		if err := plugins.Init(b.ctx, p, b.deps(info.Type)); err != nil {
			return nil, fmt.Errorf("init: %w", err)
		}
		rt.Plugins = append(rt.Plugins, Instance{Name: info.Type, Type: info.Type, Plugin: p})
		return p, nil
	})
	if err != nil {
		return &Error{Err: fmt.Errorf("data dependencies: %w", err)}
	}
	for _, n := range graph.Added {
		cfg.Plugins = append(cfg.Plugins, PluginSpec{Name: n.Name, Type: n.Type, origin: fromGraph})
		rt.AutoCreated = append(rt.AutoCreated, autoProducer(n, graph.Nodes))
	}

	dir := &requestcontrol.Director{Logger: b.log}
	for _, n := range graph.Order {
		rt.ProducerOrder = append(rt.ProducerOrder, n.Name)
		if dp, ok := n.Plugin.(requestcontrol.DataProducer); ok {
			dir.Producers = append(dir.Producers, requestcontrol.Named[requestcontrol.DataProducer]{Name: n.Name, Plugin: dp})
		}
	}
	// Every other extension point in configuration order; producers keep
	// the graph's order.
	producers := dir.Producers
	for _, p := range rt.Plugins {
		dir.Use(p.Name, p.Plugin)
	}
	dir.Producers = producers
	sched, err := b.scheduler()
	if err != nil {
		return err
	}
	dir.Scheduler = sched
	if b.rt.Config.FeatureEnabled(FeatureFlowControl) {
		if err := b.flowControl(dir); err != nil {
			return err
		}
	} else {
		dir.Admission = b.admission()
	}
	dir.Rand = b.deps("model-rewrite").Rand
	rt.Director = dir
	sel, err := b.selector()
	if err != nil {
		return err
	}
	rt.Selector = sel
	dir.Parsers = sel
	return b.dataLayer()
}

// admission returns the admission gate with the flowControl feature gate
// off: the default saturation admission over the configured saturation
// detector (flowControl.saturationDetector). A detector that is not
// available in this build means no gate (its warning says so).
func (b *builder) admission() requestcontrol.Admitter {
	fc := b.rt.Config.FlowControl
	if fc == nil || fc.SaturationDetector == nil {
		return nil
	}
	p, ok := b.rt.Plugin(fc.SaturationDetector.PluginRef)
	if !ok {
		return nil
	}
	det, ok := p.(requestcontrol.SaturationDetector)
	if !ok {
		b.warn("flowControl.saturationDetector.pluginRef", 0, "plugin %q (type %s) is not a saturation detector; no admission gate",
			fc.SaturationDetector.PluginRef, b.typeOf(fc.SaturationDetector.PluginRef))
		return nil
	}
	return &requestcontrol.SaturationAdmitter{Detector: det, Logger: b.log.With("plugin", fc.SaturationDetector.PluginRef)}
}

func autoProducer(n plugins.Node, all []plugins.Node) AutoProducer {
	a := AutoProducer{Name: n.Name, Type: n.Type}
	keys := map[string]bool{}
	if p, ok := n.Plugin.(plugins.Producer); ok {
		for _, k := range p.Produces() {
			a.Keys = append(a.Keys, k.KeyName())
			keys[k.KeyName()] = true
		}
	}
	for _, c := range all {
		cons, ok := c.Plugin.(plugins.Consumer)
		if !ok || c.Name == n.Name {
			continue
		}
		for _, k := range cons.Consumes() {
			if keys[k.KeyName()] {
				a.For = append(a.For, c.Name)
				break
			}
		}
	}
	return a
}

// scheduler builds the profiles and finds the profile handler.
func (b *builder) scheduler() (*scheduling.Scheduler, error) {
	rt, cfg := b.rt, b.rt.Config
	var l errList
	var profiles []*scheduling.Profile
	for i, prof := range cfg.SchedulingProfiles {
		ppath := index("schedulingProfiles", i)
		sp := &scheduling.Profile{Name: prof.Name}
		pickerAt := -1
		for j, pp := range prof.Plugins {
			path := index(join(ppath, "plugins"), j)
			p, ok := rt.Plugin(pp.PluginRef)
			if !ok {
				b.warn(join(path, "pluginRef"), pp.line, "plugin %q: %s; dropped from profile %q",
					pp.PluginRef, b.unavailable[pp.PluginRef], prof.Name)
				continue
			}
			used := false
			if f, ok := p.(scheduling.Filter); ok {
				sp.Filters = append(sp.Filters, scheduling.NamedFilter{Name: pp.PluginRef, Filter: f})
				used = true
			}
			if s, ok := p.(scheduling.Scorer); ok {
				w := 1.0
				if pp.Weight != nil {
					w = *pp.Weight
				}
				sp.Scorers = append(sp.Scorers, scheduling.WeightedScorer{Name: pp.PluginRef, Scorer: s, Weight: w})
				used = true
			} else if pp.Weight != nil {
				b.warn(join(path, "weight"), pp.line, "plugin %q is not a scorer; its weight is ignored", pp.PluginRef)
			}
			if pk, ok := p.(scheduling.Picker); ok {
				if sp.Picker != nil {
					l.add(join(path, "pluginRef"), pp.line, "profile %q has two pickers, %q (plugins[%d]) and %q: keep one",
						prof.Name, sp.PickerName, pickerAt, pp.PluginRef)
				} else {
					sp.Picker, sp.PickerName, pickerAt = pk, pp.PluginRef, j
				}
				used = true
			}
			if !used {
				l.add(join(path, "pluginRef"), pp.line, "plugin %q (type %s) is not a filter, scorer or picker",
					pp.PluginRef, b.typeOf(pp.PluginRef))
			}
		}
		if sp.Picker == nil {
			l.add(ppath, prof.line, "profile %q has no usable picker", prof.Name)
		}
		profiles = append(profiles, sp)
	}
	handler, err := b.handler()
	if err != nil {
		l.addErr(err)
	}
	if err := l.err(); err != nil {
		return nil, err
	}
	s, err := scheduling.New(handler, profiles...)
	if err != nil {
		return nil, &Error{Path: "schedulingProfiles", Err: err}
	}
	return s, nil
}

// handler returns the one profile handler among the instances.
func (b *builder) handler() (scheduling.ProfileHandler, error) {
	var found []Instance
	for _, p := range b.rt.Plugins {
		if _, ok := p.Plugin.(scheduling.ProfileHandler); ok {
			found = append(found, p)
		}
	}
	switch {
	case len(found) > 1:
		return nil, &Error{Path: b.pathOf(found[1].Name), Err: fmt.Errorf(
			"two profile handlers, %q (type %s) and %q (type %s): configure one",
			found[0].Name, found[0].Type, found[1].Name, found[1].Type)}
	case len(found) == 1:
		return found[0].Plugin.(scheduling.ProfileHandler), nil
	}
	cat := newCatalog(b.reg)
	for i, p := range b.rt.Config.Plugins {
		if why, ok := b.unavailable[p.Name]; ok && cat.roles(p.Type)&roleHandler != 0 {
			path := index("plugins", i)
			if p.origin != fromUser {
				path = ""
			}
			return nil, &Error{Path: path, Line: p.line, Err: fmt.Errorf("profile handler %q: %s", p.Name, why)}
		}
	}
	return nil, &Error{Path: "plugins", Err: fmt.Errorf(
		"no profile handler: %d scheduling profiles need one that decides which run (e.g. header-profile-handler)",
		len(b.rt.Config.SchedulingProfiles))}
}

// selector builds the parser selector from requestHandler.parsers.
func (b *builder) selector() (*parsers.Selector, error) {
	var l errList
	var ps []parsers.Parser
	for i, r := range b.rt.Config.RequestHandler.Parsers {
		path := join(index("requestHandler.parsers", i), "pluginRef")
		p, ok := b.rt.Plugin(r.PluginRef)
		if !ok {
			continue // reported as unavailable with the plugin
		}
		parser, ok := p.(parsers.Parser)
		if !ok {
			l.add(path, r.line, "plugin %q (type %s) is not a parser", r.PluginRef, b.typeOf(r.PluginRef))
			continue
		}
		ps = append(ps, parser)
	}
	if err := l.err(); err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		b.warn("requestHandler.parsers", 0, "no parser is available in this build: every request will be rejected (400)")
	}
	return parsers.NewSelector(ps...), nil
}

func (b *builder) typeOf(name string) string {
	if p, ok := b.rt.Config.Plugin(name); ok {
		return p.Type
	}
	return "?"
}

// report logs the effective configuration, the auto-created producers and
// the warnings.
func (b *builder) report() {
	if y, err := b.rt.Config.Effective(); err == nil {
		b.log.Info("effective configuration", "config", string(y))
	}
	for _, a := range b.rt.AutoCreated {
		b.log.Info("auto-created default producer", "plugin", a.Name, "type", a.Type, "produces", a.Keys, "for", a.For)
	}
	for _, w := range b.rt.Warnings {
		b.log.Warn("configuration: " + w.String())
	}
}
