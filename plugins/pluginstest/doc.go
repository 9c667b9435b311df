// Package pluginstest is the test kit for plugin authors: fake dependencies
// (Deps: a logger writing to the test log, a Clock you advance by hand, a
// seeded random source), Build to create a plugin from JSON parameters the way
// a configuration does, and TestLifecycle, the conformance check every
// registered plugin type should pass:
//
//	func TestLifecycle(t *testing.T) {
//		reg := plugins.NewRegistry()
//		plugins.Register[*MyScorer](reg, "my-scorer")
//		pluginstest.TestLifecycle(t, reg, "my-scorer")
//		s := pluginstest.Build[*MyScorer](t, reg, "my-scorer", `{"threshold": 3}`)
//		// ... use s; it was Init'ed with Deps(t) and is closed when t ends.
//	}
package pluginstest
