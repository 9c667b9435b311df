// Package inflight holds the inflight-load-producer: it counts, per endpoint,
// the requests and prompt tokens this picker sent and has not seen finish,
// and publishes the counts to every request (scorers.InFlightKey) for the
// active-request and token-load scorers. A request is counted on its primary
// endpoint after the pick; its tokens are released when the first response
// chunk arrives (prefill is done) or, with releaseTokensOn "completion",
// when the response ends; the request itself when the response ends or the
// request fails in any way.
//
// With indexBackend redis (the parameter and the redis block are the prefix
// producers') the replicas of a picker share their counts through
// kvindex/redisindex.InFlight, so their load scorers agree: a request sees
// this replica's own counts, exact, plus the other replicas' as last read,
// at most syncInterval old. The counting itself never waits on the server —
// publishing and reading run in the background — and while the server is
// unreachable, after expiry, each replica sees its own counts only, as with
// the memory backend; errors are counted in BackendStats.
package inflight
