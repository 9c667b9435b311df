package kvindex

import "context"

// PrefixStore is the approximate prefix index as a prefix producer uses it:
// the in-memory PrefixIndex of one picker, or an index that several picker
// replicas share (kvindex/redisindex keeps one in Redis).
//
// MatchContext is called on the request path, concurrently; it must return
// by the time ctx is done. Add, SetCapacity and RemoveEndpoint are called
// after a pick and as the pool changes; they must not block on I/O (a shared
// store queues them and counts what it cannot write) and must not keep their
// arguments. The methods mean what PrefixIndex's do.
type PrefixStore interface {
	// MatchContext is PrefixIndex.Match bounded by ctx. On an error every
	// matched[i] is 0 and the caller has no prefix data for the request.
	MatchContext(ctx context.Context, hashes []uint64, endpoints []string, matched []int) error
	Add(endpoint string, hashes []uint64)
	SetCapacity(endpoint string, blocks int)
	RemoveEndpoint(endpoint string)
}

// EventStore is the precise index as the precise producer and a Subscriber
// use it: the in-memory EventIndex of one picker, or an index that several
// picker replicas share (kvindex/redisindex). Apply and ClearEndpoint (the
// Sink) are called from the subscriber's goroutines; a shared store
// applies a batch to its backend before returning, bounded by its own
// timeout, and applying a batch twice — two replicas following the same
// engine — changes nothing. MatchContext and BlockKeys are called on the
// request path, concurrently. The methods mean what EventIndex's do.
type EventStore interface {
	Sink
	RemoveEndpoint(endpoint string)
	BlockTokens() int
	BlockKeys(dst []uint64, model, salt string, tokens []uint32, maxBlocks int) []uint64
	// MatchContext is EventIndex.Match bounded by ctx. On an error every
	// matched[i] is 0 and the caller has no prefix data for the request.
	MatchContext(ctx context.Context, keys []uint64, endpoints []string, matched []float64) error
}

var (
	_ PrefixStore = (*PrefixIndex)(nil)
	_ EventStore  = (*EventIndex)(nil)
)

// BackendStats counts how a shared index's calls to its backend went, for
// an error metric and the operator. An in-memory index has no backend.
type BackendStats struct {
	// Backend names the backend ("redis").
	Backend string
	// Lookups and Writes count the round trips that succeeded: lookups on
	// the request path, and writes (batched: one write may carry many
	// updates).
	Lookups, Writes uint64
	// Errors counts the round trips that failed, timeouts included; Timeouts
	// those that ran out of time.
	Errors, Timeouts uint64
	// Skipped counts lookups and writes not attempted while the backend was
	// marked down after repeated errors.
	Skipped uint64
	// Dropped counts updates lost: the write queue was full, or their write
	// failed or was skipped.
	Dropped uint64
	// MirrorLookups counts the lookups answered from the replica's own copy
	// of the shared index (a mirror), without a round trip; MirrorLoads the
	// times the mirror loaded a copy (at start, and after it fell behind the
	// backend's change log or the backend lost the index).
	MirrorLookups, MirrorLoads uint64
	// Down reports that the backend is marked down now: lookups return no
	// data at once until it is tried again.
	Down bool
}

// MatchContext calls Match; it never fails and ignores ctx (an in-memory
// lookup takes microseconds).
func (x *PrefixIndex) MatchContext(_ context.Context, hashes []uint64, endpoints []string, matched []int) error {
	x.Match(hashes, endpoints, matched)
	return nil
}

// MatchContext calls Match; it never fails and ignores ctx.
func (x *EventIndex) MatchContext(_ context.Context, keys []uint64, endpoints []string, matched []float64) error {
	x.Match(keys, endpoints, matched)
	return nil
}
