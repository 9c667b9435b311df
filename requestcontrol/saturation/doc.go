// Package saturation holds the stock saturation detectors. Each reports a
// pool's load as a number (0 idle, 1 saturated, above 1 overloaded) for the
// admission gate and flow control, and is also a scheduling filter that
// removes the endpoints over their own limit (the limit times 1 + headroom,
// so scheduling may burst past the pool-level target to follow affinity):
//
//	utilization-detector  mean over endpoints of max(W/queueDepthThreshold, kv/kvCacheUtilThreshold),
//	                      from scraped metrics; stale metrics count as saturated or are ignored
//	concurrency-detector  in-flight requests (or tokens, or the larger of both) over the
//	                      pool's capacity, from the picker's own count, current between scrapes
package saturation
