package scorers_test

import (
	"fmt"

	"github.com/eppkit/eppkit/scheduling/schedulingtest"
	"github.com/eppkit/eppkit/scheduling/scorers"
)

// The queue scorer normalises waiting queues over the candidates: the
// shortest queue scores 1, the longest 0.
func ExampleQueue() {
	eps := schedulingtest.Eps(
		schedulingtest.Ep("a").Waiting(10),
		schedulingtest.Ep("b").Waiting(0),
		schedulingtest.Ep("c").Waiting(4),
	)
	fmt.Println(schedulingtest.Score(&scorers.Queue{}, nil, eps...))
	// Output: [0 1 0.6]
}

// The LoRA affinity scorer ranks endpoints for the requested adapter.
func ExampleLoRAAffinity() {
	eps := schedulingtest.Eps(
		schedulingtest.Ep("active").LoRA([]string{"sql"}, nil, 2),
		schedulingtest.Ep("free-slot").LoRA([]string{"chat"}, nil, 2),
		schedulingtest.Ep("loading").LoRA([]string{"chat"}, []string{"sql"}, 2),
		schedulingtest.Ep("full").LoRA([]string{"chat", "math"}, nil, 2),
	)
	req := schedulingtest.Req("llama-3").Target("sql").Build()
	fmt.Println(schedulingtest.Score(&scorers.LoRAAffinity{}, req, eps...))
	// Output: [1 0.8 0.6 0]
}
