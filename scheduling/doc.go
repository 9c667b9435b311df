// Package scheduling picks endpoints for a request: the extension points
// Filter, Scorer, Picker and ProfileHandler, the Profile that chains them, the
// Scheduler that runs profiles, and the decision Trace that explains a pick.
//
// One profile run is: filters in order (each may remove candidates), then every
// scorer fills an index-aligned buffer with scores in [0,1] (the runtime clamps
// them, NaN counts as 0), the runtime sums weight × score per endpoint, and the
// picker chooses from the totals. A ProfileHandler decides which profiles run
// and which one's result is primary; sequencing (decode, then maybe prefill) is
// ordinary Go in its single method.
//
// Plugins receive []*datalayer.Endpoint snapshots they must not modify, and a
// *Request whose Data holds the typed per-request state producers wrote. The
// same Scheduler is used concurrently by many requests; plugins must be safe
// for concurrent use.
//
// Tracing costs nothing when Request.Trace is nil: no trace data is built.
package scheduling
