// Package inflight holds the inflight-load-producer: it counts, per endpoint,
// the requests and prompt tokens this picker sent and has not seen finish,
// and publishes the counts to every request (scorers.InFlightKey) for the
// active-request and token-load scorers. A request is counted on its primary
// endpoint after the pick; its tokens are released when the first response
// chunk arrives (prefill is done) or, with releaseTokensOn "completion",
// when the response ends; the request itself when the response ends or the
// request fails in any way.
package inflight
