// Package prefix holds the approximate prefix-cache producer: it hashes each
// request's prompt into chained blocks (kvindex.ChainHasher), looks them up in
// a prefix index learned from earlier picks, writes a
// *scheduling.PrefixMatch for prefix scorers and filters, and after the pick
// credits the chosen endpoints with the request's blocks.
//
// The index is the picker's own kvindex.PrefixIndex (indexBackend: memory),
// or one that every replica of the picker shares in Redis (indexBackend:
// redis, kvindex/redisindex): there a lookup is one round trip bounded by
// redis.timeout, credits are written in the background, and when the server
// is down or slow the request goes on without prefix data (the scorers see
// none) while BackendStats counts the errors.
package prefix
