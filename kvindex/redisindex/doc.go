// Package redisindex keeps kvindex's prefix indexes in Redis (or Valkey),
// so that several replicas of a picker route as one: what one replica
// learns — the approximate index from its picks, the precise index from the
// engines' KV events — every other finds, and a replica that starts late
// sees it all. PrefixIndex implements kvindex.PrefixStore and EventIndex
// kvindex.EventStore; both pass the conformance suites of kvindextest, so
// they stand in for the in-memory indexes without a change in routing.
// InFlight shares the replicas' in-flight request and token counts, so that
// their load scorers agree.
//
// # Data model
//
// Every key starts with Config.KeyPrefix (default "eppkit:"); replicas of
// one picker share it.
//
//	<prefix>a:<endpoint>    sorted set: the endpoint's block hashes (8 bytes), approximate index
//	<prefix>a:cap           hash: endpoint → capacity in blocks
//	<prefix>ai:<endpoint>   string: the endpoint's id, a small number
//	<prefix>ah              hash: block hash → bitmap of the ids of the endpoints that hold it
//	<prefix>ao              hash: id → endpoint, for every id in use or not yet swept
//	<prefix>pi:<endpoint>   string: the endpoint's id, precise index
//	<prefix>ph              hash: block key → bitmap, two bits per id: held on the GPU, on the CPU (any other tier)
//	<prefix>po              hash: id → endpoint, for every id in use or not yet swept
//	<prefix>p:m:<endpoint>  hash: engine hash → block key; "seq": the last batch applied; "n": entries held
//	<prefix>al, <prefix>pl  stream: the change log of each index's holders and ids (mirrors read it)
//	<prefix>ae, <prefix>pe  hash: the log's epoch and its last entry number
//	<prefix>p:models        set: base models seen in events (exact keys)
//	<prefix>f:r:<replica>   hash: endpoint → "requests tokens" a replica has in flight, expiring
//	<prefix>f:replicas      set: the replicas that publish in-flight counts
//
// In the approximate index a block's score is seq·2¹⁶ + (2¹⁶ − 1 − depth),
// seq one more than the endpoint's newest credit: newer credits outrank
// older ones and, within one credit, a block outranks the blocks after it.
// Trimming the lowest scores to the endpoint's capacity therefore evicts the
// least recently credited prefixes, tails first, exactly as
// kvindex.PrefixIndex does, and what an endpoint holds stays closed under
// prefixes. The holders hash mirrors the sets block by block, so the
// holders of a chain's blocks shrink along the chain, and a lookup finds
// every candidate's run by bisecting the chain once for all of them: about
// k·log₂(n/k) lookups of the hash for k distinct run lengths, whatever the
// number of endpoints. A removed endpoint's id (or that of one whose data
// expired) is dropped at once and its bits are cleared in the background by
// a scan of the holders hash (the sweep, every refresh period), after which
// the id is reused.
//
// The precise index keeps, for each block key, which endpoints hold it in
// which tier (as kvindex.EventIndex does in memory), and per endpoint the
// engine hashes' keys so removals and later parents resolve. An engine may
// evict any block, so a lookup reads the holders of the request's keys in
// order until no candidate's run goes on — once for all endpoints, in
// growing chunks — counting a run of blocks with the same holders at once.
// A cleared or removed endpoint's id is dropped and swept as in the
// approximate index. Keys are kvindex.EventKeys' — computed by the replica
// that applies the events, from token ids — so every replica looks
// requests up with the same keys.
//
// # Round trips
//
// A lookup is one round trip: a server-side Lua script (EVALSHA, loaded
// once and again when the server lost it) walks the request's chain for
// every candidate endpoint. A batch of KV events is one round trip too,
// applied atomically. Credits of the approximate index after a pick are
// queued and written in the background, many to a pipeline, in the order
// they were made; a full queue drops them and counts them.
//
// # Mirrors
//
// Every script that changes a holders hash or the endpoints' ids also
// appends what it changed to the index's change log, a stream whose entries
// are numbered without gaps within an epoch. With Config.Mirror a replica
// keeps a copy of the holders and ids, loaded once and kept by applying
// the log's entries in order, and looks requests up in it without a round
// trip while it is current (it read the log's end within MirrorStale);
// otherwise, and while it loads, lookups go to the server. A gap in the
// numbering (the log was trimmed past the copy), a new epoch (the server
// lost the index) or an entry it cannot read makes it load again. Flush
// waits until the mirror has read everything the server had.
//
// # Replicas
//
// Updates are idempotent: sets, not counters, hold who holds what, so two
// replicas applying the same engine's events leave the index as one would.
// A replica that lags behind another on the same engine cannot undo newer
// events: each endpoint remembers the sequence number of the last batch
// applied, and older batches are skipped (a cleared endpoint — an engine
// restart — starts again from any number). Capacities and evictions are
// decided in the server, atomically, whoever credits the endpoint.
//
// Every key has a TTL (Config.TTL, default an hour). A replica extends it
// for the endpoints it writes for while they are in its pool, so the data
// of endpoints that every replica has forgotten — or of a replica that died
// — ages out.
//
// # In-flight counts
//
// Each replica publishes its own counts, every InFlightConfig.Interval, to
// a hash of its own whose expiry it extends at each publish (a heartbeat),
// and reads the other replicas' hashes in the same script: one round trip
// per interval whatever the number of endpoints. Readers cache the sum and
// answer from it without I/O; a replica that dies stops extending its
// hash, which the server expires (its clock: replicas' clocks need not
// agree), and it drops out of every view. A replica that closes deletes its
// hash at once.
//
// # Failures
//
// Every call carries a deadline: Config.Timeout on the request path
// (default 50ms), Config.WriteTimeout for writes. A lookup that fails or
// times out returns an error and no data; the producers then go on without
// prefix data for that request. After DownAfter failures in a row the
// backend is marked down for RetryAfter: lookups fail at once rather than
// wait for a timeout, writes are dropped, and the next call after that
// tries the server again, so recovery needs nothing but the server. Errors,
// timeouts, skips and drops are counted (BackendStats) and logged at most
// once every ten seconds.
package redisindex
