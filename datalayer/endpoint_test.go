package datalayer_test

import (
	"math"
	"testing"
	"time"

	"github.com/eppkit/eppkit/datalayer"
)

func TestHostPort(t *testing.T) {
	if got := datalayer.New("a", "10.0.0.1", 8000, nil).HostPort(); got != "10.0.0.1:8000" {
		t.Fatal(got)
	}
	if got := datalayer.New("b", "fd00::1", 8000, nil).HostPort(); got != "[fd00::1]:8000" {
		t.Fatal(got)
	}
	lit := &datalayer.Endpoint{Address: "10.0.0.2", Port: 9}
	if got := lit.HostPort(); got != "10.0.0.2:9" {
		t.Fatal(got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = datalayer.New("a", "10.0.0.1", 1, nil).HostPort() }); n > 3 {
		t.Fatalf("allocs %v", n)
	}
}

func TestWithMetricsCopies(t *testing.T) {
	e := datalayer.New("a", "10.0.0.1", 8000, nil)
	e2 := e.WithMetrics(datalayer.Metrics{Waiting: 3, UpdateTime: time.Unix(1, 0)})
	if e.Metrics.Waiting != 0 || e2.Metrics.Waiting != 3 || e2.HostPort() != e.HostPort() {
		t.Fatal("WithMetrics mutated or lost data")
	}
}

func TestUsable(t *testing.T) {
	now := time.Unix(1, 0)
	cases := []struct {
		m    datalayer.Metrics
		want bool
	}{
		{datalayer.Metrics{}, false},
		{datalayer.Metrics{UpdateTime: now}, true},
		{datalayer.Metrics{UpdateTime: now, Waiting: -1}, false},
		{datalayer.Metrics{UpdateTime: now, Running: -1}, false},
		{datalayer.Metrics{UpdateTime: now, KVUsage: math.NaN()}, false},
		{datalayer.Metrics{UpdateTime: now, KVUsage: math.Inf(1)}, false},
		{datalayer.Metrics{UpdateTime: now, KVUsage: -0.1}, false},
		{datalayer.Metrics{UpdateTime: now, LoRA: datalayer.LoRA{Max: -1}}, false},
		{datalayer.Metrics{UpdateTime: now, Stale: true, LastError: "timeout", Failures: 1}, false},
	}
	for i, c := range cases {
		if got := c.m.Usable(); got != c.want {
			t.Errorf("case %d: Usable = %v", i, got)
		}
	}
}

func TestLoRAHas(t *testing.T) {
	l := datalayer.LoRA{Active: []string{"a"}, Waiting: []string{"b", "a"}}
	if act, wait := l.Has("a"); !act || !wait {
		t.Fatal("a")
	}
	if act, wait := l.Has("c"); act || wait {
		t.Fatal("c")
	}
}

func TestAge(t *testing.T) {
	now := time.Unix(100, 0)
	m := datalayer.Metrics{UpdateTime: now.Add(-time.Second)}
	if m.Age(now) != time.Second {
		t.Error(m.Age(now))
	}
	var never datalayer.Metrics
	if never.Age(now) < 100*365*24*time.Hour {
		t.Error("a set never collected must be as old as can be")
	}
}
