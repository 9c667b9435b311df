// Package datalayer holds what the picker knows about model-server endpoints:
// the Endpoint snapshot (identity, labels, rank, Metrics and typed
// attributes) that every scheduling plugin reads, and the machinery that
// keeps it current.
//
// # Snapshots
//
// An *Endpoint handed to plugins is an immutable snapshot: the data layer
// publishes a new value when anything about the endpoint changes and never
// mutates a published one, so plugins may read it from any goroutine without
// locks and without copying. The Store holds the current list behind an
// atomic pointer: Store.Endpoints (and Runtime.Endpoints) is one atomic load,
// no lock, no allocation, and the list it returns stays consistent for as
// long as the caller keeps it.
//
// # Membership
//
// A Pool selects endpoints from the Targets a discovery Source reports: by
// labels, one endpoint per target port (rank = the port's index). Sources
// report the complete set each time; Store.Set diffs it against the current
// endpoints (added, updated, removed) and tells every EndpointListener — the
// plugins that keep per-endpoint state — before an endpoint is published and
// after it is withdrawn. Stock sources are in package discovery (a static
// list, a watched YAML/JSON file); a build plugs in its own (e.g. a
// Kubernetes informer) by implementing Source.
//
// # Collection
//
// A DataSource collects one kind of data per endpoint (package metrics
// scrapes Prometheus text, package models polls /v1/models); its Extractors
// turn the data into Metrics fields and typed attributes. The Runtime runs
// each source on its Polling interval with a bounded pool of workers — not a
// goroutine per endpoint — and a per-collection timeout: an endpoint whose
// previous collection is still running is skipped, so one slow endpoint
// holds one worker and never delays the others. A single publisher applies
// the extractors to a private copy of each endpoint and publishes the copies
// in batches. A result for an endpoint that left or moved meanwhile is
// dropped.
//
// # Staleness
//
// Every Metrics carries the time its values were read (UpdateTime). A failed
// collection — no answer in time, a refused connection, an HTTP error, an
// oversized or malformed body, a missing metric, a NaN, infinite or negative
// value — keeps the last good values and marks them Stale with LastError
// and a count of Failures (FailureRecorder); Metrics.Usable is then false, so
// scorers treat the endpoint as their worst candidate until a collection
// succeeds again. Consumers with their own policy read Metrics.Age. Failures
// are logged once per run (the first failure and the recovery) and counted
// per source (Runtime.Stats).
package datalayer
