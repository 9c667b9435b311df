package customscorer_test

import (
	"testing"

	"github.com/eppkit/eppkit/examples/customscorer"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/schedulingtest"
)

func TestConformance(t *testing.T) {
	schedulingtest.TestScorer(t, func() scheduling.Scorer { return &customscorer.PreferLabel{Key: "gpu", Value: "h200"} })
}
