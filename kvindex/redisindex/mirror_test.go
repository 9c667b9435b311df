package redisindex_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/kvindex/kvindextest"
	"github.com/eppkit/eppkit/kvindex/redisindex"
	"github.com/eppkit/eppkit/kvindex/redisindex/redistest"
)

// TestWithMirror runs the tests of replicas, eviction, ids and the sweep
// again with every index keeping a mirror, so that their lookups read the
// replica's copy (after a flush) rather than the server.
func TestWithMirror(t *testing.T) {
	mirrored = true
	defer func() { mirrored = false }()
	for _, tc := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"TwoReplicasSharePrefixes", TestTwoReplicasSharePrefixes},
		{"ConcurrentReplicasKeepCapacity", TestConcurrentReplicasKeepCapacity},
		{"TwoReplicasShareEvents", TestTwoReplicasShareEvents},
		{"HoldersMirrorSets", TestHoldersMirrorSets},
		{"DroppedIDsSwept", TestDroppedIDsSwept},
		{"EventBatchesAgainstMemory", TestEventBatchesAgainstMemory},
		{"EventEntryLimit", TestEventEntryLimit},
		{"EventRemovedBlocksForgotten", TestEventRemovedBlocksForgotten},
		{"EventIDsSwept", TestEventIDsSwept},
		{"TTL", TestTTL},
	} {
		t.Run(tc.name, tc.f)
	}
}

// TestMirrorFollowsWriters: a replica with a mirror finds what another
// replica's credits, capacity changes and removals leave on the server,
// from its copy, without a round trip; so does a replica started later
// (which loads the copy); and after the sweep has freed the ids of removed
// endpoints and newcomers took them, the copy has none of the old bits.
func TestMirrorFollowsWriters(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	cfg.TTL = 400 * time.Millisecond // the sweep runs every 100ms
	icfg := kvindex.PrefixIndexConfig{DefaultCapacity: 30}
	w := newPrefix(t, cfg, icfg)
	mcfg := cfg
	mcfg.Mirror = true
	rd := newPrefix(t, mcfg, icfg)
	r := rand.New(rand.NewPCG(3, 3))
	eps := endpointNames("10.0.1", 70) // ids past 64: bitmaps wider than 8 bytes
	chains := branchingChains(r, 70)
	compare := func(what string, x *redisindex.PrefixIndex) {
		t.Helper()
		flush(t, w)
		flush(t, x)
		before := x.BackendStats()
		for _, ch := range chains {
			if got, want := matchPrefix(t, x, ch, eps...), matchPrefix(t, w, ch, eps...); !slices.Equal(got, want) {
				t.Fatalf("%s: the mirror matched %v, the server %v", what, got, want)
			}
		}
		after := x.BackendStats()
		if after.MirrorLookups-before.MirrorLookups != uint64(len(chains)) || after.Lookups != before.Lookups {
			t.Fatalf("%s: %d lookups from the mirror, %d from the server; want %d, 0", what,
				after.MirrorLookups-before.MirrorLookups, after.Lookups-before.Lookups, len(chains))
		}
	}
	for step := range 600 {
		ep := eps[r.IntN(len(eps))]
		x := w
		if r.IntN(4) == 0 {
			x = rd // the mirroring replica writes too
		}
		switch op := r.IntN(30); {
		case op < 26:
			ch := chains[r.IntN(len(chains))]
			x.Add(ep, ch[:1+r.IntN(len(ch))])
		case op < 29:
			x.SetCapacity(ep, r.IntN(40))
		default:
			x.RemoveEndpoint(ep)
		}
		if step%10 == 9 {
			compare(fmt.Sprint("step ", step), rd)
		}
	}
	late := newPrefix(t, mcfg, icfg)
	compare("a replica started late", late)
	if st := late.BackendStats(); st.MirrorLoads != 1 {
		t.Fatalf("the late replica loaded its copy %d times, want 1", st.MirrorLoads)
	}

	// Every endpoint goes; once the sweep freed their ids, newcomers take
	// them.
	for _, ep := range eps {
		w.RemoveEndpoint(ep)
	}
	flush(t, w)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	eventually(t, "ids not freed", func() bool {
		n, err := c.HLen(context.Background(), cfg.KeyPrefix+"ao").Result()
		return err == nil && n == 0
	})
	for i, ep := range eps {
		w.Add(ep, chains[i%len(chains)][:5])
	}
	compare("newcomers with freed ids", rd)
	compare("newcomers with freed ids, late replica", late)
	if st := rd.BackendStats(); st.MirrorLoads != 1 {
		t.Fatalf("the mirror loaded its copy %d times, want 1 (it never fell behind)", st.MirrorLoads)
	}
}

// TestMirrorEndpointExpired: an endpoint whose keys expired comes back with
// a new id, before any sweep freed the old one; the mirror follows the new
// id, not the old one's bits.
func TestMirrorEndpointExpired(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv) // a TTL of an hour: no sweep during the test
	cfg.Mirror = true
	x := newPrefix(t, cfg, kvindex.PrefixIndexConfig{})
	short := cfg
	short.TTL, short.Mirror = 200*time.Millisecond, false
	y := newPrefix(t, short, kvindex.PrefixIndexConfig{})
	a := kvindextest.Chain(1, 6)
	y.Add("e", a)
	flush(t, y)
	_ = y.Close()                           // nobody refreshes e any more
	x.Add("other", kvindextest.Chain(2, 3)) // the shared keys get x's TTL again
	flush(t, x)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	eventually(t, "e did not expire", func() bool {
		n, err := c.Exists(context.Background(), cfg.KeyPrefix+"ai:e").Result()
		return err == nil && n == 0
	})
	x.Add("e", a[:1])
	flush(t, x)
	if got := matchPrefix(t, x, a, "e"); got[0] != 1 {
		t.Fatalf("after e expired and came back: matched %v, want [1]", got)
	}
	if st := x.BackendStats(); st.MirrorLookups != 1 || st.MirrorLoads != 1 {
		t.Fatalf("stats %+v: want the lookup from the mirror, loaded once", st)
	}
}

// TestMirrorServerDown: with the server down a mirror answers from its copy
// for at most MirrorStale, then lookups go to the server and fail fast, as
// without a mirror; after a restart that lost the index the mirror loads
// the empty one and follows the writes again.
func TestMirrorServerDown(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	cfg.Timeout = 200 * time.Millisecond
	cfg.RetryAfter = 100 * time.Millisecond
	w := newPrefix(t, cfg, kvindex.PrefixIndexConfig{})
	cfg.Mirror = true
	rd := newPrefix(t, cfg, kvindex.PrefixIndexConfig{})
	c := kvindextest.Chain(1, 8)
	w.Add("e", c)
	flush(t, w)
	flush(t, rd)
	if got := matchPrefix(t, rd, c, "e"); got[0] != 8 {
		t.Fatalf("matched %v before the server went down", got)
	}

	srv.Stop()
	stopped := time.Now()
	m := []int{-1}
	for {
		start := time.Now()
		err := rd.MatchContext(context.Background(), c, []string{"e"}, m)
		if d := time.Since(start); d > cfg.Timeout+500*time.Millisecond {
			t.Fatalf("a lookup took %v with the server down (timeout %v)", d, cfg.Timeout)
		}
		if err != nil {
			if m[0] != 0 {
				t.Fatalf("a failed lookup matched %v", m)
			}
			break
		}
		if m[0] != 8 {
			t.Fatalf("the mirror matched %v with the server down, want its copy's 8", m)
		}
		if time.Since(stopped) > redisindex.MirrorStale+time.Second {
			t.Fatalf("the mirror still answered %v after the server was down", time.Since(stopped))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if since := time.Since(stopped); since < redisindex.MirrorStale-200*time.Millisecond {
		t.Fatalf("lookups failed %v after the server went down; the mirror should answer for about %v", since, redisindex.MirrorStale)
	}

	srv.Restart() // empty
	loads := rd.BackendStats().MirrorLoads
	deadline := time.Now().Add(10 * time.Second)
	for {
		w.Add("e", c[:3])
		flush(t, w)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rd.Flush(ctx)
		cancel()
		if err == nil && rd.MatchContext(context.Background(), c, []string{"e"}, m) == nil && m[0] == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery after the restart: matched %v, stats %+v", m, rd.BackendStats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st := rd.BackendStats(); st.MirrorLoads <= loads {
		t.Fatalf("stats %+v: the mirror did not load the restarted server's index", st)
	}
}
