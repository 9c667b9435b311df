package customscorer_test

import (
	"testing"

	"github.com/eppkit/eppkit/examples/customscorer"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/scheduling"
	. "github.com/eppkit/eppkit/scheduling/schedulingtest"
)

func TestScore(t *testing.T) {
	eps := Eps(Ep("idle"), Ep("queued").Waiting(1), Ep("running").Running(4), Ep("unscraped").NoMetrics())
	got := Score(&customscorer.LeastBusy{RunningWeight: 0.25}, nil, eps...)
	want := []float64{1, 0.5, 0.5, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("scores = %v, want %v", got, want)
		}
	}
}

// TestConformance: range, length, determinism, no mutation, empty input and
// concurrent use (run with -race).
func TestConformance(t *testing.T) {
	TestScorer(t, func() scheduling.Scorer { return &customscorer.LeastBusy{RunningWeight: 0.25} })
}

// TestLifecycle: the registered type builds with no parameters, rejects
// unknown ones, and decodes and validates its own.
func TestLifecycle(t *testing.T) {
	reg := std.Registry()
	plugins.Register[*customscorer.LeastBusy](reg, "least-busy-scorer", plugins.Category("scorer"))
	pluginstest.TestLifecycle(t, reg, "least-busy-scorer")

	if s := pluginstest.Build[*customscorer.LeastBusy](t, reg, "least-busy-scorer", ``); s.RunningWeight != 0.25 {
		t.Errorf("default runningWeight = %v, want 0.25", s.RunningWeight)
	}
	if s := pluginstest.Build[*customscorer.LeastBusy](t, reg, "least-busy-scorer", `{"runningWeight": 1}`); s.RunningWeight != 1 {
		t.Errorf("runningWeight = %v, want 1", s.RunningWeight)
	}
	if _, err := reg.Build("least-busy-scorer", "lb", []byte(`{"runningWeight": -1}`)); err == nil {
		t.Error("a negative runningWeight was accepted")
	}
}
