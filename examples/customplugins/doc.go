// Package customplugins shows the other extension points a plugin author
// fills, one small file each, in the same shape as the scorer of
// examples/customscorer: a struct whose exported fields are its YAML
// parameters, one method per extension point, registered in one line.
//
//	FreshMetrics   a scheduling filter: drop endpoints whose metrics are too old (fresh.go)
//	PromptTokens   a data producer writing a typed key, and KVHeadroom, a scorer
//	               consuming it; the producer is auto-created when only the
//	               scorer is configured (headroom.go)
//	SmallestFirst  a flow-control ordering policy (smallest.go)
//
// docs/writing-a-plugin.md walks through them; the tests show each one under
// the matching test kit.
package customplugins
