// Package kvindextest holds the conformance suites of kvindex's index
// interfaces: TestPrefixStore checks a kvindex.PrefixStore and
// TestEventStore a kvindex.EventStore against the behaviour of the
// in-memory indexes — the same scenarios, then long random runs compared
// with kvindex.PrefixIndex and kvindex.EventIndex step by step. An index
// kept elsewhere (kvindex/redisindex keeps both in Redis) runs them to
// show it can stand in for the in-memory one.
//
// It also holds what such tests need: Engine, a simulated engine publishing
// KV events; Tokens and Chain, deterministic prompts; Sync, which waits for
// a store's background writes.
package kvindextest
