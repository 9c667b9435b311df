package filters_test

import (
	"fmt"

	"github.com/eppkit/eppkit/scheduling/filters"
	"github.com/eppkit/eppkit/scheduling/schedulingtest"
)

// A label selector keeps decode endpoints outside us-west.
func ExampleLabelSelector() {
	eps := schedulingtest.Eps(
		schedulingtest.Ep("a").Label("llm-d.ai/role", "decode").Label("zone", "us-east"),
		schedulingtest.Ep("b").Label("llm-d.ai/role", "prefill"),
		schedulingtest.Ep("c").Label("llm-d.ai/role", "decode").Label("zone", "us-west"),
	)
	sel := &filters.LabelSelector{
		MatchLabels: map[string]string{"llm-d.ai/role": "decode"},
		MatchExpressions: []filters.LabelRequirement{
			{Key: "zone", Operator: filters.NotIn, Values: []string{"us-west"}},
		},
	}
	fmt.Println(schedulingtest.Names(schedulingtest.Filter(sel, nil, eps...)))
	// Output: [a]
}
