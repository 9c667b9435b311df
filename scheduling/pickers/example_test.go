package pickers_test

import (
	"context"
	"fmt"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling/pickers"
	"github.com/eppkit/eppkit/scheduling/schedulingtest"
)

// The max-score picker returns the best endpoint, then fallbacks by total.
func ExampleMaxScore() {
	p := &pickers.MaxScore{MaxNumOfEndpoints: 2}
	_ = p.Init(context.Background(), plugins.Deps{Rand: plugins.NewRand(7)})

	eps := schedulingtest.Eps(schedulingtest.Ep("a"), schedulingtest.Ep("b"), schedulingtest.Ep("c"))
	picked := schedulingtest.Pick(p, nil, eps, 0.4, 1.9, 1.2)
	fmt.Println(schedulingtest.Names(picked))
	// Output: [b c]
}
