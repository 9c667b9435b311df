// Package schedulingtest is the test kit for scheduling plugins and policies:
// fluent builders for endpoints and requests, one-call helpers that run a
// plugin exactly as the scheduler does, canned plugins, and conformance
// suites that every scorer, filter and picker should pass.
//
// A policy unit test is a few lines:
//
//	eps := schedulingtest.Eps(schedulingtest.Ep("a").Waiting(8), schedulingtest.Ep("b").Waiting(2))
//	scores := schedulingtest.Score(&scorers.Queue{}, nil, eps...) // [0 1]
//
// and a new scorer proves it keeps the Scorer contract with one line:
//
//	func TestConformance(t *testing.T) {
//		schedulingtest.TestScorer(t, func() scheduling.Scorer { return &MyScorer{} })
//	}
//
// Endpoints built here have usable metrics (an update time is set) unless
// NoMetrics is called, and distinct default addresses derived from their
// names. The helpers do not call a plugin's Init: stock plugins work without
// it (pickers then use a source seeded with 1). To test a plugin as the
// configuration builds it, use pluginstest.Build.
//
// The conformance suites (TestScorer, TestFilter, TestPicker) include a
// concurrent-use check that is only meaningful under go test -race.
package schedulingtest
