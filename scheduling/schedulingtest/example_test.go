package schedulingtest_test

import (
	"fmt"

	"github.com/eppkit/eppkit/scheduling/pickers"
	"github.com/eppkit/eppkit/scheduling/schedulingtest"
	"github.com/eppkit/eppkit/scheduling/scorers"
)

// A policy unit test: which endpoint does queue ×2 + kv-cache ×1 choose?
func Example() {
	eps := schedulingtest.Eps(
		schedulingtest.Ep("busy").Waiting(12).KV(0.2),
		schedulingtest.Ep("full").Waiting(2).KV(0.9),
		schedulingtest.Ep("idle").Waiting(3).KV(0.1),
	)
	policy := schedulingtest.Profile("default").
		Scorer(&scorers.Queue{}, 2).Scorer(&scorers.KVCacheUtilization{}, 1).
		Picker(&pickers.MaxScore{}).Build()
	picked, _ := schedulingtest.Schedule(policy, nil, eps...)
	fmt.Println(picked[0].Name)
	// Output: idle
}

// Score shows one scorer's view of the candidates, clamped as the runtime
// clamps it.
func ExampleScore() {
	eps := schedulingtest.Eps(
		schedulingtest.Ep("a").Waiting(8),
		schedulingtest.Ep("b").Waiting(2),
		schedulingtest.Ep("stale").NoMetrics(),
	)
	fmt.Println(schedulingtest.Score(&scorers.Queue{}, nil, eps...))
	// Output: [0 1 0]
}

// A trace explains the decision: each scorer's scores, the totals and why
// the picker chose.
func ExampleSchedule_trace() {
	eps := schedulingtest.Eps(
		schedulingtest.Ep("a").Waiting(4).KV(0.5),
		schedulingtest.Ep("b").Waiting(0).KV(0.75),
	)
	policy := schedulingtest.Profile("default").
		Scorer(&scorers.Queue{}, 1).Scorer(&scorers.KVCacheUtilization{}, 1).
		Picker(&pickers.MaxScore{}).Build()
	req := schedulingtest.Req("llama-3").Trace().Build()
	picked, _ := schedulingtest.Schedule(policy, req, eps...)

	pt := req.Trace.Profiles[0]
	for _, s := range pt.Scorers {
		fmt.Println(s.Scorer, s.Scores)
	}
	fmt.Println("totals", pt.Totals, "picked", picked[0].Name)
	// Output:
	// scorers.Queue [0 1]
	// scorers.KVCacheUtilization [0.5 0.25]
	// totals [0.5 1.25] picked b
}
