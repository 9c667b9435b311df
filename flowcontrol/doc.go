// Package flowcontrol queues requests when the pool is saturated and
// dispatches them fairly, by priority, as capacity frees (SPEC §6; the
// behaviour and names of llm-d-router's flow control).
//
// # Model
//
// An Item is one waiting request. Its flow (FlowKey: fairness id ×
// priority) has a queue inside the priority band of its priority. Bands are
// configured explicitly (Config.Bands) or provisioned on first use from a
// template (Config.DefaultBand, Config.NegativeBand for priorities below
// zero). Flows are created on first use and collected after they have been
// empty for Config.FlowIdleTimeout; provisioned bands go with their last
// flow.
//
//	Controller
//	├── band 100 ── flow tenant-a@100: [item, item]   fairness: which flow
//	│            └─ flow tenant-b@100: [item]         ordering: which item
//	├── band 0   ── flow default-flow@0: [item, ...]
//	└── band -1  ── ...
//
// Enqueue checks the limits (each band's MaxRequests and MaxBytes, and the
// global ones) and refuses an item over any of them with ErrAtCapacity: the
// queue never grows without bound. An item leaves the queue exactly once,
// with one Outcome: Dispatched; Rejected at enqueue; Expired after the TTL
// (Config.RequestTTL, 60s by default, or Config.NoEndpointTTL while the pool
// has no endpoints) or at its own deadline; Cancelled the moment its
// caller's context ends; Drained by Close.
//
// # Dispatch
//
// Before each item the dispatcher reads the pool's saturation (a
// SaturationDetector, the same plugin the request-control admission uses)
// and asks the UsageLimitPolicy for every band's ceiling. It walks the
// bands from the highest priority: a band whose ceiling the saturation
// reaches stops the walk, so no lower band overtakes it (no priority
// inversion); otherwise the band's FairnessPolicy picks a flow and the
// flow's head (by the band's OrderingPolicy) is dispatched. It repeats while
// there is room, so one wake-up dispatches as many items as fit.
//
// The background dispatcher (Start) sleeps until something can change the
// answer: Notify (a request completed, metrics were refreshed), an enqueue
// the last pass could not serve, the next TTL expiry, or, while items wait
// for capacity that nothing announces, a slow recheck (Config.Recheck). It
// never spins. Dispatch runs one pass synchronously; with an injected clock
// (Config.Clock) tests and simulators are deterministic and need no sleeps.
//
// # Policies
//
// Each policy is one small method, called with the controller's lock held:
//
//	FairnessPolicy    Pick(band) *Flow            global-strict-fairness-policy (GlobalStrict), round-robin-fairness-policy (RoundRobin)
//	OrderingPolicy    Less(a, b *Item) bool       fcfs-ordering-policy (FCFS), edf-ordering-policy (EDF), slo-deadline-ordering-policy (SLODeadline)
//	UsageLimitPolicy  Ceilings(sat, prios, buf)   static-usage-limit-policy (StaticUsageLimit), priority-holdback-policy (PriorityHoldback)
//
// A Band offers the stock choices in O(1) (Best, the flow with the best
// head; Next, round-robin rotation) and iteration over its flows for
// custom policies. An ordering policy that also implements Keyer is
// evaluated once per item instead of once per comparison. Every operation
// of the stock policies is O(log n) in the items of a flow and the flows of
// a band.
//
// # Observability
//
// Stats returns the queue lengths, bytes, flows, outcome counts and wait
// times per band.
//
// The package depends on plugins and datalayer only; requestcontrol's
// FlowAdmitter puts it in front of the Director, and config.Build wires it
// from the flowControl section when the flowControl feature gate is on.
package flowcontrol
