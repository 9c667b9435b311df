// Package scorers holds the stock scheduling scorers. Each rates every
// candidate endpoint in [0,1] (higher is better) from the endpoint's engine
// metrics, with the exact formulas of llm-d-router:
//
//	queue-scorer                 (maxW − W)/(maxW − minW) over the candidates' waiting queues; all equal → 1
//	running-requests-size-scorer the same on running requests
//	kv-cache-utilization-scorer  1 − kvUsage
//	lora-affinity-scorer         1.0 adapter active, 0.8 free adapter slot, 0.6 adapter waiting to load, 0 full
//	load-aware-scorer            W = 0 → 0.5; else 0.5·(1 − min(W,T)/T)
//
// An endpoint whose metrics are not usable (never scraped, or NaN, infinite or
// negative values: see datalayer.Metrics.Usable) scores 0, the worst, and takes
// no part in the min-max normalisation of the others.
//
// Every scorer is a plain struct whose exported fields are its parameters, is
// safe for concurrent use, works as its zero value (parameters then take their
// defaults) and does not allocate in Score.
package scorers
