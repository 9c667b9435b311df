package config_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/flowcontrol/flowcontroltest"
	"github.com/eppkit/eppkit/requestcontrol"
)

const flowControlOn = header + `featureGates: [flowControl]
plugins:
- {type: queue-scorer}
- {name: rr, type: round-robin-fairness-policy}
- {name: edf, type: edf-ordering-policy}
- {name: holdback, type: priority-holdback-policy, parameters: {minCeiling: 0.3}}
flowControl:
  maxRequests: 100
  defaultRequestTTL: 0s
  usageLimitPolicyPluginRef: holdback
  defaultNegativePriorityBand: {maxRequests: 1}
  priorityBands:
  - {priority: 10, fairnessPolicyRef: rr, orderingPolicyRef: edf}
  - {priority: 0, maxBytes: 1Mi}
`

func inbound(body string, headers map[string]string) *requestcontrol.Inbound {
	return &requestcontrol.Inbound{Path: "/v1/chat/completions", Headers: headers, Body: []byte(body)}
}

const chat = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`

// With the gate on, the Director's admission is flow control, built from the
// section, and completions wake it.
func TestFlowControlWiring(t *testing.T) {
	rt := mustBuild(t, flowControlOn)
	if rt.FlowControl == nil {
		t.Fatal("no flow controller")
	}
	if _, ok := rt.Director.Admission.(*requestcontrol.FlowAdmitter); !ok {
		t.Errorf("admission is %T", rt.Director.Admission)
	}
	hooks := rt.Director.ResponseCompletes
	if len(hooks) == 0 || hooks[len(hooks)-1].Name != "flow-control" {
		t.Errorf("flow control is not the last response-complete hook: %v", hooks)
	}
	var bands []int
	for _, b := range rt.FlowControl.Stats().Bands {
		bands = append(bands, b.Priority)
	}
	if len(bands) != 2 || bands[0] != 10 || bands[1] != 0 {
		t.Errorf("bands %v, want [10 0]", bands)
	}

	now := time.Now()
	rt.Director.Pool = requestcontrol.StaticPool{
		datalayer.New("a", "10.0.0.1", 8000, nil).WithMetrics(datalayer.Metrics{UpdateTime: now}),
	}
	x, err := rt.Director.HandleRequest(context.Background(), inbound(chat, nil))
	if err != nil {
		t.Fatal(err)
	}
	x.Close(nil)
	if s, _ := rt.FlowControl.Stats().Band(0); s.Dispatched != 1 {
		t.Errorf("band 0: %+v", s)
	}
}

// An empty pool is saturated: requests wait, and Close drains them with 503
// rejected-shutting-down.
func TestFlowControlCloseDrains(t *testing.T) {
	rt, err := build(t, flowControlOn, config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rt.Director.Pool = requestcontrol.StaticPool{}
	done := make(chan error)
	go func() {
		_, err := rt.Director.HandleRequest(context.Background(), inbound(chat, map[string]string{requestcontrol.HeaderFairnessID: "t"}))
		done <- err
	}()
	for rt.FlowControl.Stats().Queued == 0 {
		runtime.Gosched()
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	err = <-done
	rej := requestcontrol.Reject(err)
	if rej.Status != 503 || rej.Reason != requestcontrol.ReasonShutdown {
		t.Errorf("got %v", err)
	}
}

func TestFlowControlConfigErrors(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"zero global limit", header + "flowControl:\n  maxRequests: 0\n",
			"flowControl.maxRequests: must be > 0; leave it out for no limit"},
		{"zero band limit", header + "flowControl:\n  priorityBands:\n  - {priority: 1, maxBytes: 0}\n",
			"flowControl.priorityBands[0].maxBytes: must be > 0; leave it out for the band default of 1G (line 5)"},
		{"zero template limit", header + "flowControl:\n  defaultPriorityBand: {maxRequests: 0}\n",
			"flowControl.defaultPriorityBand.maxRequests: must be > 0"},
		{"negative limit", header + "flowControl:\n  maxBytes: -1Gi\n",
			`flowControl.maxBytes: invalid quantity "-1Gi": must not be negative`},
		{"bad TTL", header + "flowControl:\n  defaultRequestTTL: soon\n",
			`flowControl.defaultRequestTTL: invalid duration "soon"`},
		{"negative TTL", header + "flowControl:\n  defaultRequestTTL: -1s\n",
			"flowControl.defaultRequestTTL: must not be negative"},
		{"unknown policy", header + "flowControl:\n  priorityBands:\n  - {priority: 1, orderingPolicyRef: lifo}\n",
			`flowControl.priorityBands[0].orderingPolicyRef: undefined plugin "lifo"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Load([]byte(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v\nwant %s", err, c.want)
			}
		})
	}
}

func TestFlowControlWrongKindOfPlugin(t *testing.T) {
	for _, c := range []struct{ name, section, want string }{
		{"fairness", "priorityBands:\n  - {priority: 1, fairnessPolicyRef: queue-scorer}",
			`flowControl.priorityBands[0].fairnessPolicyRef: plugin "queue-scorer" (type queue-scorer) is not a fairness policy`},
		{"ordering", "defaultPriorityBand: {orderingPolicyRef: round-robin-fairness-policy}",
			`flowControl.defaultPriorityBand.orderingPolicyRef: plugin "round-robin-fairness-policy" (type round-robin-fairness-policy) is not an ordering policy`},
		{"usage limit", "usageLimitPolicyPluginRef: fcfs-ordering-policy",
			`flowControl.usageLimitPolicyPluginRef: plugin "fcfs-ordering-policy" (type fcfs-ordering-policy) is not a usage-limit policy`},
		{"detector", "saturationDetector: {pluginRef: queue-scorer}",
			`flowControl.saturationDetector.pluginRef: plugin "queue-scorer" (type queue-scorer) is not a saturation detector`},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := header + "featureGates: [flowControl]\nplugins:\n- {type: queue-scorer}\n- {type: round-robin-fairness-policy}\nflowControl:\n  " + c.section + "\n"
			_, err := build(t, in, config.Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v\nwant %s", err, c.want)
			}
		})
	}
}

// With the gate off, a section that only names the saturation detector is
// in use (the admission gate's) and draws no warning.
func TestFlowControlGateOffDetectorOnly(t *testing.T) {
	rt := mustBuild(t, header+"plugins: [{type: queue-scorer}, {type: concurrency-detector}]\nflowControl:\n  saturationDetector: {pluginRef: concurrency-detector}\n")
	if w := warnings(rt); w != "" || rt.FlowControl != nil {
		t.Errorf("warnings %q, flow control %v", w, rt.FlowControl)
	}
	if _, ok := rt.Director.Admission.(*requestcontrol.SaturationAdmitter); !ok {
		t.Errorf("admission %T", rt.Director.Admission)
	}
}

// defaultRequestTTL: unset is 60s, "0s" disables expiry.
func TestFlowControlTTL(t *testing.T) {
	for _, c := range []struct {
		section string
		expires bool
	}{{"", true}, {"flowControl: {defaultRequestTTL: 0s}\n", false}} {
		clock := &flowcontroltest.Clock{}
		rt, err := build(t, header+"featureGates: [flowControl]\nplugins: [{type: queue-scorer}]\n"+c.section, config.Options{Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		rt.Director.Pool = requestcontrol.StaticPool{} // empty: saturated
		// A pass sees the empty pool before anything is queued: the wait for
		// expiry counts from the pass that first sees the pool empty, which
		// must not be the one after the clock moves.
		rt.FlowControl.Dispatch(context.Background(), 0)
		done := make(chan error, 1)
		go func() {
			_, err := rt.Director.HandleRequest(context.Background(), inbound(chat, nil))
			done <- err
		}()
		for rt.FlowControl.Stats().Queued == 0 {
			runtime.Gosched()
		}
		clock.Advance(time.Minute)
		rt.FlowControl.Dispatch(context.Background(), 0)
		if expired := rt.FlowControl.Stats().Queued == 0; expired != c.expires {
			t.Errorf("%q: expired after a minute: %v", c.section, expired)
		}
		_ = rt.Close()
		<-done
	}
}
