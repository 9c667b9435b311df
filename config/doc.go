// Package config loads llm-d's EndpointPickerConfig YAML and builds the
// request pipeline it describes, so an existing llm-d ConfigMap works
// unchanged.
//
// Three steps, each visible:
//
//	cfg, err := config.LoadFile("epp.yaml")                  // parse + check structure
//	rt, err := config.Build(ctx, cfg, std.Registry(), config.Options{Logger: log})
//	defer rt.Close()
//	yaml, _ := rt.Config.Effective()                          // what actually runs
//
// Load decodes the document strictly from YAML nodes: an unknown field at any
// level, a value of the wrong kind, a missing or duplicate name, a weight that
// is not > 0 or a reference to an undefined plugin is an *Error carrying the
// YAML path and line, e.g.
//
//	config: schedulingProfiles[0].plugins[2].weight: must be > 0 (got 0) (line 14)
//
// Load reports every such error at once (joined with errors.Join; Errors
// lists them). A Kubernetes ConfigMap holding the document in its data is
// accepted as is. Plugin parameters stay JSON (PluginSpec.Parameters) until
// the registry decodes them into the plugin's struct.
//
// Defaults is the one place system defaults are applied (SPEC §4.1): the
// built-in scoring set when there is no configuration, a default profile, a
// profile handler and pickers, flow-control policies, parsers, a saturation
// detector and the metrics data source. Build applies it to a copy; the
// result, plus the producers the data graph adds, is Runtime.Config.
//
// Build instantiates every plugin through a plugins.Registry, initialises them
// in configuration order with their Deps (a logger, the clock, a random source
// seeded from Options.Seed and the instance name), resolves the data-key graph
// (auto-adding default producers, logged one line each), and wires scheduling
// profiles, the profile handler, the parser Selector and a
// requestcontrol.Director: every plugin's hooks (pre-request, response,
// custom admitters) in configuration order, producers in graph order, and
// the admission gate over flowControl.saturationDetector. The Director's
// pool, objectives and model rewrites are the caller's to set.
//
// Older GAIE and llm-d configurations give prefix-cache-scorer the prefix
// index's parameters (hashBlockSize, maxPrefixBlocksToMatch,
// lruCapacityPerServer...); Build moves them to the
// approx-prefix-cache-producer the scorer reads, declaring it if needed,
// with a warning per scorer, and the effective configuration shows them
// there.
//
// With the flowControl feature gate on, the admission gate is flow control
// instead: Runtime.FlowControl, a flowcontrol.Controller built from the
// flowControl section (limits, TTLs, priority bands and their policies, the
// usage-limit policy and the saturation detector), its dispatcher started.
// Requests wait in its queues until dispatched; completing requests wake it;
// Runtime.Close drains it. Zero limits, unknown or wrong-kind policy
// references and bad TTLs are errors at their YAML path.
//
// The dataLayer section becomes Runtime.DataLayer (a datalayer.Runtime):
// the discovery source, each data source with its extractors, and every
// plugin that keeps per-endpoint state (datalayer.EndpointListener) as a
// listener; Options.Pool selects the endpoints. Start it to discover and
// collect. When dataLayer.discovery is set, the data layer is also the
// Director's pool.
//
// LoadObjectives and LoadModelRewrites read InferenceObjective and
// InferenceModelRewrite resources (YAML documents in the shape of the CRDs)
// with the same strict, path-and-line errors.
//
// Plugin types the product defines but a build may lack (PlannedTypes:
// prefix-cache-scorer, the flow-control policies, the data-layer sources…)
// are never silently ignored: the configuration loads, the plugin is reported
// in Runtime.Warnings as "not available in this build (planned)" and is left
// out (a profile drops it with its own warning). A type that is neither
// registered nor planned is an error.
package config
