// Package scorers holds the stock scheduling scorers. Each rates every
// candidate endpoint in [0,1] (higher is better) from the endpoint's engine
// metrics or from data producers, with the exact formulas of llm-d-router:
//
//	queue-scorer                 (maxW − W)/(maxW − minW) over the candidates' waiting queues; all equal → 1
//	running-requests-size-scorer the same on running requests
//	kv-cache-utilization-scorer  1 − kvUsage
//	lora-affinity-scorer         1.0 adapter active, 0.8 free adapter slot, 0.6 adapter waiting to load, 0 full
//	load-aware-scorer            W = 0 → 0.5; else 0.5·(1 − min(W,T)/T)
//	prefix-cache-scorer          (1−w)·matched/total + w·min(1, matchedTokens/scale)², from a prefix producer
//	no-hit-lru-scorer            cold requests: 1 − rank/(n−1) by least recent cold pick; warm: 0.5
//	active-request-scorer        from this picker's in-flight count n: idle → 1, else (max n − n)/max n
//	token-load-scorer            1 − min(t, T)/T, t = in-flight tokens + this request's uncached tokens
//	session-affinity-scorer      1 for the endpoint named by the session token, 0 otherwise
//
// An endpoint whose metrics are not usable (never scraped, or NaN, infinite or
// negative values: see datalayer.Metrics.Usable) scores 0, the worst, and takes
// no part in the min-max normalisation of the others.
//
// Every scorer is a plain struct whose exported fields are its parameters, is
// safe for concurrent use, works as its zero value (parameters then take their
// defaults) and does not allocate in Score.
package scorers
