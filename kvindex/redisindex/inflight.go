package redisindex

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/eppkit/eppkit/kvindex"
)

// Defaults of InFlightConfig.
const (
	// DefaultInFlightInterval is how often a replica publishes its counts
	// and reads the others'.
	DefaultInFlightInterval = 50 * time.Millisecond
	// DefaultInFlightExpiryIntervals is the default expiry in intervals:
	// ten, so that a live replica's counts survive a few late publishes (a
	// GC pause, a slow server) and a dead one's are gone in half a second
	// at the default interval.
	DefaultInFlightExpiryIntervals = 10
)

// InFlightCounts reports a replica's own in-flight counts: it calls yield
// once per endpoint with what the replica sent there and has not seen
// finish. It is called from InFlight's background goroutine and must not
// block.
type InFlightCounts func(yield func(endpoint string, requests, tokens int64))

// InFlightConfig says how an InFlight shares a replica's counts.
type InFlightConfig struct {
	// ReplicaID names this replica among those sharing the counts; it must
	// be unique among them. "" means a random one, new for every InFlight.
	ReplicaID string
	// Interval is how often the replica publishes its counts and reads the
	// others', in one round trip. 0 means DefaultInFlightInterval.
	Interval time.Duration
	// Expiry is how long a replica's published counts count without a new
	// publish: a replica that died, or lost the server, drops out of the
	// others' view after it, and a view read longer ago than it is ignored.
	// It must be at least twice Interval; 0 means
	// DefaultInFlightExpiryIntervals × Interval.
	Expiry time.Duration
	// Local reports the replica's own counts (required).
	Local InFlightCounts
}

// withDefaults checks icfg and fills in its defaults.
func (icfg InFlightConfig) withDefaults() (InFlightConfig, error) {
	if icfg.Local == nil {
		return icfg, errors.New("redisindex: InFlightConfig.Local is required")
	}
	if icfg.Interval < 0 || icfg.Expiry < 0 {
		return icfg, errors.New("redisindex: InFlightConfig.Interval and Expiry must be ≥ 0")
	}
	if icfg.Interval == 0 {
		icfg.Interval = DefaultInFlightInterval
	}
	if icfg.Expiry == 0 {
		icfg.Expiry = DefaultInFlightExpiryIntervals * icfg.Interval
	}
	if icfg.Expiry < 2*icfg.Interval {
		return icfg, fmt.Errorf("redisindex: InFlightConfig.Expiry %v must be at least twice Interval %v", icfg.Expiry, icfg.Interval)
	}
	if icfg.ReplicaID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand)
		icfg.ReplicaID = hex.EncodeToString(b[:])
	}
	return icfg, nil
}

// InFlight shares per-endpoint in-flight counts among the replicas of a
// picker, so that their load scorers agree. Each replica publishes its own
// counts every Interval to a hash of its own,
//
//	<prefix>f:r:<replica>   hash: endpoint → "requests tokens", expiring after Expiry
//	<prefix>f:replicas      set: the replicas that published
//
// and in the same round trip (one script) reads every other replica's
// hash, which it caches: Remote answers from the cache, without I/O. A
// replica that stops publishing — it died, or lost the server — has its
// hash expire on the server after Expiry (the server's clock, so clocks
// need not agree), and drops out of every view. While the server is
// unreachable, Remote reports nothing once the last view is older than
// Expiry: each replica then sees its own counts only. A round trip is
// bounded by Config.WriteTimeout and Expiry, whichever is shorter; errors
// mark the backend down as for the indexes (Config.DownAfter), and
// BackendStats counts them.
//
// Its methods are safe for concurrent use.
type InFlight struct {
	c        *conn
	icfg     InFlightConfig
	setKey   string
	hashKey  string
	hashPref string
	expiryMS string

	view atomic.Pointer[inflightView]

	// Owned by the sync goroutine.
	published map[string]inflightCount // what the server holds of ours
	dirty     bool                     // the server may not hold it: publish it all
}

type inflightCount struct{ requests, tokens int64 }

// inflightView is the other replicas' counts, summed, as read at time at.
type inflightView struct {
	at     time.Time
	counts map[string]inflightCount
}

// NewInFlight returns the shared counts of the replica icfg describes, in
// the server cfg names, and starts publishing and reading them in the
// background until Close. It does not wait for the server: one that is down
// is retried every Interval (or after RetryAfter, once marked down).
func NewInFlight(cfg Config, icfg InFlightConfig) (*InFlight, error) {
	icfg, err := icfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c, err := newConn(cfg)
	if err != nil {
		return nil, err
	}
	f := &InFlight{
		c:         c,
		icfg:      icfg,
		setKey:    c.cfg.KeyPrefix + "f:replicas",
		hashPref:  c.cfg.KeyPrefix + "f:r:",
		hashKey:   c.cfg.KeyPrefix + "f:r:" + icfg.ReplicaID,
		expiryMS:  strconv.FormatInt(max(1, icfg.Expiry.Milliseconds()), 10),
		published: map[string]inflightCount{},
		dirty:     true,
	}
	c.wg.Add(1)
	go f.run()
	return f, nil
}

// ReplicaID returns the replica's name among those sharing the counts.
func (f *InFlight) ReplicaID() string { return f.icfg.ReplicaID }

// Remote returns the requests and tokens the other replicas have in flight
// on endpoint, as last read: zero when none, or when the last view is older
// than Expiry (the server is unreachable).
func (f *InFlight) Remote(endpoint string) (requests, tokens int64) {
	v := f.view.Load()
	if v == nil || time.Since(v.at) > f.icfg.Expiry {
		return 0, 0
	}
	c := v.counts[endpoint]
	return c.requests, c.tokens
}

// BackendStats returns the counters: each successful round trip (a publish
// and a read) counts as a write.
func (f *InFlight) BackendStats() kvindex.BackendStats { return f.c.stats() }

// Close stops the background work, deletes the replica's counts from the
// server (bounded by WriteTimeout; without it they expire after Expiry)
// and closes the connections.
func (f *InFlight) Close() error { return f.c.close() }

// run publishes and reads every Interval until Close, then deletes the
// replica's counts.
func (f *InFlight) run() {
	defer f.c.wg.Done()
	t := time.NewTicker(f.icfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-f.c.stop:
			f.withdraw()
			return
		case <-t.C:
			f.sync()
		}
	}
}

// sync publishes the replica's counts — all of them when they changed or
// the server may have lost them, else only the heartbeat that keeps them
// from expiring — and reads the others', in one round trip.
func (f *InFlight) sync() {
	cur := make(map[string]inflightCount, len(f.published))
	f.icfg.Local(func(endpoint string, requests, tokens int64) {
		if requests != 0 || tokens != 0 {
			cur[endpoint] = inflightCount{requests, tokens}
		}
	})
	if !f.c.up() {
		f.dirty = true
		return
	}
	replace := f.dirty || !maps.Equal(cur, f.published)
	args := make([]any, 0, 4+2*len(cur))
	args = append(args, f.icfg.ReplicaID, f.expiryMS, f.hashPref, "0")
	if replace {
		args[3] = "1"
		for e, c := range cur {
			args = append(args, e, strconv.FormatInt(c.requests, 10)+" "+strconv.FormatInt(c.tokens, 10))
		}
	}
	// A sync slower than Expiry is of no use: the others dropped our
	// counts, and Remote ignores a view that old.
	ctx, cancel := context.WithTimeout(context.Background(), min(f.c.cfg.WriteTimeout, f.icfg.Expiry))
	res, err := inflightSyncScript.Run(ctx, f.c.client, []string{f.setKey, f.hashKey}, args...).Slice()
	cancel()
	var view map[string]inflightCount
	held := false
	if err == nil {
		held, view, err = parseInFlight(res)
	}
	if err := f.c.done(context.Background(), "in-flight sync", err); err != nil {
		f.dirty = true
		return
	}
	f.c.writes.Add(1)
	if replace {
		f.published, f.dirty = cur, false
	}
	if len(cur) > 0 && !held {
		f.dirty = true // the server lost our counts (a restart): publish them again
	}
	f.view.Store(&inflightView{at: time.Now(), counts: view})
}

// parseInFlight reads the sync script's reply: whether the replica's own
// hash exists, then the other replicas' hashes, summed per endpoint.
// Malformed fields are skipped.
func parseInFlight(res []any) (held bool, view map[string]inflightCount, err error) {
	if len(res) == 0 {
		return false, nil, errors.New("in-flight sync: empty reply")
	}
	n, _ := res[0].(int64)
	view = map[string]inflightCount{}
	for _, h := range res[1:] {
		fields, _ := h.([]any)
		for i := 0; i+1 < len(fields); i += 2 {
			e, _ := fields[i].(string)
			v, _ := fields[i+1].(string)
			rs, ts, ok := strings.Cut(v, " ")
			r, err1 := strconv.ParseInt(rs, 10, 64)
			t, err2 := strconv.ParseInt(ts, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				continue
			}
			c := view[e]
			view[e] = inflightCount{c.requests + r, c.tokens + t}
		}
	}
	return n == 1, view, nil
}

// withdraw deletes the replica's counts, if the server is reachable.
func (f *InFlight) withdraw() {
	if !f.c.up() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.c.cfg.WriteTimeout)
	defer cancel()
	pipe := f.c.client.Pipeline()
	pipe.Del(ctx, f.hashKey)
	pipe.SRem(ctx, f.setKey, f.icfg.ReplicaID)
	_, err := pipe.Exec(ctx)
	if errors.Is(err, redis.Nil) {
		err = nil
	}
	_ = f.c.done(context.Background(), "in-flight withdraw", err)
}
