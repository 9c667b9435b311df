package flowcontrol

// GlobalStrict is the global-strict-fairness-policy, the default: a band
// serves the flow whose head item comes first in the band's order, across
// all its flows (with FCFS ordering, one FIFO for the whole band). It
// honours the order exactly but is not fair between flows: a flow that
// sends more is served more. It has no parameters.
type GlobalStrict struct{}

var _ FairnessPolicy = (*GlobalStrict)(nil)

// Pick returns the band's best flow.
func (*GlobalStrict) Pick(b *Band) *Flow { return b.Best() }

// RoundRobin is the round-robin-fairness-policy: a band serves its
// non-empty flows in turn, one item each, so flows that keep items queued
// get equal shares of the dispatches whatever their offered load. A flow
// that becomes non-empty joins the rotation last. It has no parameters.
type RoundRobin struct{}

var _ FairnessPolicy = (*RoundRobin)(nil)

// Pick returns the band's next flow in rotation.
func (*RoundRobin) Pick(b *Band) *Flow { return b.Next() }
