// Package customscorer shows a plugin author's whole job: a scorer in one
// small file (LeastBusy), registered beside the stock set in one line, used
// from the same EndpointPickerConfig YAML as the built-in plugins,
// unit-tested in a few lines with the test kit, and compared against the
// stock configurations in the policy simulator.
//
//	reg := std.Registry()
//	plugins.Register[*customscorer.LeastBusy](reg, "least-busy-scorer", plugins.Category("scorer"))
//
// docs/writing-a-plugin.md walks through it step by step.
package customscorer
