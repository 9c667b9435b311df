// Package indexbackend holds what the prefix producers and the
// inflight-load-producer share to choose where their index (or counts)
// live: the indexBackend and redis parameters, their defaults and checks,
// and the kvindex/redisindex configuration built from them.
package indexbackend
