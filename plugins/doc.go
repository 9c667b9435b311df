// Package plugins is the eppkit plugin kernel: the Registry that maps plugin
// types to their Go types, the lifecycle every plugin shares (decode, Validate,
// Init, Close), the injected dependencies (Deps: logger, clock, seeded random
// source) and the typed data keys (Key[T]) that data producers and consumers
// use to exchange per-request values.
//
// A plugin is a plain struct whose exported, json-tagged fields are its
// parameters. Registering is one explicit line:
//
//	reg := plugins.NewRegistry()
//	plugins.Register[*MyScorer](reg, "my-scorer", plugins.Category("scorer"))
//
// The registry builds an instance by allocating a new value, calling its
// optional SetDefaults method, strictly decoding the parameters into it
// (an unknown field is an error naming the plugin and the field) and calling
// its optional Validate method. Init and Close are called by the owner of the
// instance (see Init and Close in this package).
//
// Producers declare the keys they produce and consume (Producer). Graph orders
// them deterministically, adds registered default producers for keys no one
// produces, and rejects cycles and type mismatches with errors naming both
// plugins.
//
// The package depends on the standard library only.
package plugins
