package redisindex_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/kvindex/kvindextest"
	"github.com/eppkit/eppkit/kvindex/redisindex"
	"github.com/eppkit/eppkit/kvindex/redisindex/redistest"
)

func matchPrefix(t *testing.T, x kvindex.PrefixStore, chain []uint64, eps ...string) []int {
	t.Helper()
	if mirrored { // TestWithMirror: the reader's copy has read what other replicas wrote
		kvindextest.Sync(t, x)
	}
	m := make([]int, len(eps))
	if err := x.MatchContext(context.Background(), chain, eps, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func matchEvents(t *testing.T, x kvindex.EventStore, keys []uint64, eps ...string) []float64 {
	t.Helper()
	kvindextest.Sync(t, x) // a mirror has read what was applied
	m := make([]float64, len(eps))
	if err := x.MatchContext(context.Background(), keys, eps, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func flush(t *testing.T, x *redisindex.PrefixIndex) {
	t.Helper()
	kvindextest.Sync(t, x)
}

// TestTwoReplicasSharePrefixes: what replica A credits, replica B finds;
// capacity and eviction hold for the endpoint whoever credits it; a replica
// started later sees it all.
func TestTwoReplicasSharePrefixes(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	icfg := kvindex.PrefixIndexConfig{DefaultCapacity: 10}
	a, b := newPrefix(t, cfg, icfg), newPrefix(t, cfg, icfg)
	c1, c2 := kvindextest.Chain(1, 6), kvindextest.Chain(2, 6)
	a.Add("e1", c1)
	flush(t, a)
	if got := matchPrefix(t, b, c1, "e0", "e1"); !slices.Equal(got, []int{0, 6}) {
		t.Fatalf("replica B matched %v, want [0 6]", got)
	}
	b.Add("e1", c2) // 12 blocks > 10: c1's tail goes, whoever credited it
	flush(t, b)
	for _, x := range []*redisindex.PrefixIndex{a, b} {
		if got := matchPrefix(t, x, c1, "e1"); got[0] != 4 {
			t.Fatalf("c1 matched %v after eviction, want 4", got)
		}
		if got := matchPrefix(t, x, c2, "e1"); got[0] != 6 {
			t.Fatalf("c2 matched %v, want 6", got)
		}
	}
	b.SetCapacity("e1", 3) // a capacity set by one replica binds all
	flush(t, b)
	a.Add("e1", c1)
	flush(t, a)
	if got := matchPrefix(t, a, c1, "e1"); got[0] != 3 {
		t.Fatalf("c1 matched %v under capacity 3 set by the other replica", got)
	}
	late := newPrefix(t, cfg, icfg)
	if got := matchPrefix(t, late, c1, "e1"); got[0] != 3 {
		t.Fatalf("a late replica matched %v, want 3", got)
	}
	a.RemoveEndpoint("e1")
	flush(t, a)
	if got := matchPrefix(t, late, c1, "e1"); got[0] != 0 {
		t.Fatalf("a removed endpoint still matches %v", got)
	}
}

// TestConcurrentReplicasKeepCapacity: replicas crediting one endpoint at
// once never leave it above its capacity, and what it holds stays a set
// of prefixes.
func TestConcurrentReplicasKeepCapacity(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	icfg := kvindex.PrefixIndexConfig{DefaultCapacity: 20}
	xs := []*redisindex.PrefixIndex{newPrefix(t, cfg, icfg), newPrefix(t, cfg, icfg), newPrefix(t, cfg, icfg)}
	var chains [][]uint64
	for i := range 12 {
		chains = append(chains, kvindextest.Chain(uint64(i), 7))
	}
	var wg sync.WaitGroup
	for r, x := range xs {
		wg.Go(func() {
			for i := range 40 {
				x.Add("e", chains[(i*5+r)%len(chains)])
			}
			flush(t, x)
		})
	}
	wg.Wait()
	total := 0
	for _, c := range chains {
		m := matchPrefix(t, xs[0], c, "e")[0]
		total += m
		// Prefix-closed: every shorter prefix of a matched run matches too.
		if m > 0 && matchPrefix(t, xs[1], c[:m-1+1], "e")[0] != m {
			t.Fatalf("run of %d not closed under prefixes", m)
		}
	}
	if total == 0 || total > 20 {
		t.Fatalf("the endpoint holds %d blocks, want 1..20", total)
	}
	n, err := srv.Do(time.Second, "ZCARD", cfg.KeyPrefix+"a:e")
	if err != nil || n == "0" {
		t.Fatalf("ZCARD %q %v", n, err)
	}
	if size, _ := strconv.Atoi(n); size > 20 {
		t.Fatalf("sorted set holds %d blocks over capacity 20", size)
	}
}

// TestTwoReplicasShareEvents: events applied by one replica are seen by
// the other; both applying the same stream is idempotent; a lagging
// replica cannot undo newer events; a late replica resolves parents and
// base models from the server.
func TestTwoReplicasShareEvents(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	a, b := newEvents(t, cfg, kvindex.EventIndexConfig{}), newEvents(t, cfg, kvindex.EventIndexConfig{})
	e := kvindextest.Engine{Seed: 3, BlockTokens: 16}
	toks := kvindextest.Tokens(1, 16*8)
	keys := a.BlockKeys(nil, "m", "", toks, 0)
	stream := []*kvindex.Batch{
		{Model: "m", Seq: 0, Events: []kvindex.Event{e.Stored(toks, 0, 4, "GPU")}},
		{Model: "m", Seq: 1, Events: []kvindex.Event{e.Stored(toks, 4, 6, "GPU")}},
		{Model: "m", Seq: 2, Events: []kvindex.Event{e.Removed(toks, 5, 6, "GPU")}},
	}
	a.Apply("e1", stream[0])
	if got := matchEvents(t, b, keys, "e0", "e1"); !slices.Equal(got, []float64{0, 4}) {
		t.Fatalf("replica B matched %v, want [0 4]", got)
	}
	a.Apply("e1", stream[1])
	a.Apply("e1", stream[2])
	// B follows the same engine, behind A: its copies change nothing.
	for _, batch := range stream {
		b.Apply("e1", batch)
	}
	if got := matchEvents(t, a, keys, "e1"); got[0] != 5 {
		t.Fatalf("after both replicas applied the stream: matched %v, want 5", got)
	}
	if _, stale := b.Stats(); stale != 2 {
		t.Fatalf("replica B skipped %d stale batches, want 2", stale)
	}
	// A late replica continues the chain from a parent A stored.
	late := newEvents(t, cfg, kvindex.EventIndexConfig{})
	late.Apply("e1", &kvindex.Batch{Model: "m", Seq: 3, Events: []kvindex.Event{e.Stored(toks, 5, 8, "GPU")}})
	if got := matchEvents(t, b, keys, "e1"); got[0] != 8 {
		t.Fatalf("after the late replica's store: matched %v, want 8", got)
	}
	if st, _ := late.Stats(); st.UnknownParents != 0 || st.BlocksStored != 3 {
		t.Fatalf("late replica stats %+v", st)
	}
	// An engine restart (the subscriber clears it) resets the sequence.
	b.ClearEndpoint("e1")
	a.Apply("e1", &kvindex.Batch{Model: "m", Seq: 0, Events: []kvindex.Event{e.Stored(toks, 0, 2, "GPU")}})
	if got := matchEvents(t, late, keys, "e1"); got[0] != 2 {
		t.Fatalf("after a restart: matched %v, want 2", got)
	}
}

// TestLateReplicaLearnsBaseModels: with the engines' own hashes, a replica
// that applied no events learns which models are base models from the
// server.
func TestLateReplicaLearnsBaseModels(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	icfg := kvindex.EventIndexConfig{Algorithm: kvindex.HashSHA256CBOR, HashSeed: "0"}
	a := newEvents(t, cfg, icfg)
	toks := kvindextest.Tokens(2, 64)
	hs := kvindex.NewVLLMHasher("0").AppendHashes(nil, toks, 16, "", "", 0)
	a.Apply("e1", kvindextest.Batch("base", kvindex.Event{Kind: kvindex.BlockStored, BlockHashes: hs, TokenIDs: toks, BlockSize: 16}))
	b := newEvents(t, cfg, icfg)
	if err := b.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := matchEvents(t, b, b.BlockKeys(nil, "base", "", toks, 0), "e1"); got[0] != 4 {
		t.Fatalf("matched %v, want 4", got)
	}
}

// TestTTL: the data of an endpoint no replica writes for ages out; a live
// replica keeps its endpoints' data alive.
func TestTTL(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	cfg.TTL = 300 * time.Millisecond
	icfg := kvindex.PrefixIndexConfig{}
	live, dead, reader := newPrefix(t, cfg, icfg), newPrefix(t, cfg, icfg), newPrefix(t, cfg, icfg)
	ev := newEvents(t, cfg, kvindex.EventIndexConfig{})
	c := kvindextest.Chain(1, 5)
	live.Add("kept", c)
	dead.Add("gone", c)
	flush(t, live)
	flush(t, dead)
	e := kvindextest.Engine{Seed: 1, BlockTokens: 16}
	toks := kvindextest.Tokens(1, 64)
	ev.Apply("kept", kvindextest.Batch("m", e.Stored(toks, 0, 4, "GPU")))
	if pttl, err := srv.Do(time.Second, "PTTL", cfg.KeyPrefix+"a:gone"); err != nil || pttl == "-1" || pttl == "-2" {
		t.Fatalf("PTTL %q %v: the key has no TTL", pttl, err)
	}
	_ = dead.Close() // a replica that died: nobody refreshes "gone"
	deadline := time.Now().Add(5 * time.Second)
	for matchPrefix(t, reader, c, "gone")[0] != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the dead replica's data did not expire")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * cfg.TTL)
	if got := matchPrefix(t, reader, c, "kept"); got[0] != 5 {
		t.Fatalf("a live replica's endpoint expired: matched %v", got)
	}
	if got := matchEvents(t, ev, ev.BlockKeys(nil, "m", "", toks, 0), "kept"); got[0] != 4 {
		t.Fatalf("a live replica's events expired: matched %v", got)
	}
}

// TestServerRestart: while the server is down lookups fail fast (no data,
// counted) and requests go on; once it is back the indexes recover by
// themselves, scripts reloaded.
func TestServerRestart(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	cfg.Timeout = 200 * time.Millisecond
	cfg.RetryAfter = 100 * time.Millisecond
	a, b := newPrefix(t, cfg, kvindex.PrefixIndexConfig{}), newPrefix(t, cfg, kvindex.PrefixIndexConfig{})
	ev := newEvents(t, cfg, kvindex.EventIndexConfig{})
	c := kvindextest.Chain(1, 8)
	a.Add("e", c)
	flush(t, a)
	if got := matchPrefix(t, b, c, "e"); got[0] != 8 {
		t.Fatalf("matched %v before the restart", got)
	}

	srv.Stop()
	m := []int{-1}
	for range 5 {
		start := time.Now()
		err := b.MatchContext(context.Background(), c, []string{"e"}, m)
		if err == nil || m[0] != 0 {
			t.Fatalf("with the server down: matched %v, error %v", m, err)
		}
		if d := time.Since(start); d > cfg.Timeout+500*time.Millisecond {
			t.Fatalf("a lookup took %v with the server down (timeout %v)", d, cfg.Timeout)
		}
	}
	a.Add("e", c) // dropped, counted
	flush(t, a)
	e := kvindextest.Engine{Seed: 1, BlockTokens: 16}
	toks := kvindextest.Tokens(1, 64)
	ev.Apply("e", kvindextest.Batch("m", e.Stored(toks, 0, 4, "GPU")))
	if st := b.BackendStats(); st.Errors == 0 || st.Skipped == 0 || !st.Down {
		t.Fatalf("reader stats while down: %+v (want errors, skips, down)", st)
	}
	if st := a.BackendStats(); st.Dropped == 0 {
		t.Fatalf("writer stats while down: %+v (want dropped writes)", st)
	}
	if st := ev.BackendStats(); st.Dropped == 0 {
		t.Fatalf("event stats while down: %+v (want a dropped batch)", st)
	}

	srv.Restart() // empty, no scripts loaded
	deadline := time.Now().Add(10 * time.Second)
	for {
		a.Add("e", c)
		flush(t, a)
		if b.MatchContext(context.Background(), c, []string{"e"}, m) == nil && m[0] == 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery after the restart: matched %v, stats %+v", m, b.BackendStats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	ev.Apply("e", kvindextest.Batch("m", e.Stored(toks, 0, 4, "GPU")))
	if got := matchEvents(t, ev, ev.BlockKeys(nil, "m", "", toks, 0), "e"); got[0] != 4 {
		t.Fatalf("events after the restart: matched %v", got)
	}
	if st := b.BackendStats(); st.Down {
		t.Fatalf("still marked down after recovery: %+v", st)
	}
}

// TestScriptCacheFlushed: after SCRIPT FLUSH (a failover to a fresh node)
// lookups and queued writes reload the scripts.
func TestScriptCacheFlushed(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	x := newPrefix(t, cfg, kvindex.PrefixIndexConfig{})
	ev := newEvents(t, cfg, kvindex.EventIndexConfig{})
	c := kvindextest.Chain(1, 3)
	x.Add("e", c)
	flush(t, x)
	matchPrefix(t, x, c, "e")
	for range 2 {
		if _, err := srv.Do(time.Second, "SCRIPT", "FLUSH"); err != nil {
			t.Fatal(err)
		}
		x.RemoveEndpoint("e")
		x.Add("e", c[:2])
		flush(t, x)
		if got := matchPrefix(t, x, c, "e"); got[0] != 2 {
			t.Fatalf("matched %v after SCRIPT FLUSH, want 2 (remove, then add, in order)", got)
		}
		e := kvindextest.Engine{Seed: 1, BlockTokens: 16}
		toks := kvindextest.Tokens(1, 32)
		ev.Apply("e", kvindextest.Batch("m", e.Stored(toks, 0, 2, "GPU")))
		if got := matchEvents(t, ev, ev.BlockKeys(nil, "m", "", toks, 0), "e"); got[0] != 2 {
			t.Fatalf("events matched %v after SCRIPT FLUSH", got)
		}
	}
	if st := x.BackendStats(); st.Errors != 0 || st.Dropped != 0 {
		t.Fatalf("stats %+v: reloading scripts is not an error", st)
	}
}

// TestSlowServer: a server that stops answering (DEBUG SLEEP) costs a lookup
// at most the timeout; after repeated timeouts the backend is marked down
// and lookups return at once; when it answers again lookups recover.
func TestSlowServer(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	cfg.Timeout = 100 * time.Millisecond
	cfg.RetryAfter = 300 * time.Millisecond
	x := newPrefix(t, cfg, kvindex.PrefixIndexConfig{})
	ev := newEvents(t, cfg, kvindex.EventIndexConfig{})
	c := kvindextest.Chain(1, 4)
	x.Add("e", c)
	flush(t, x)
	matchPrefix(t, x, c, "e")
	matchEvents(t, ev, c, "e") // both pools hold a connection

	slept := make(chan error, 1)
	go func() {
		_, err := srv.Do(10*time.Second, "DEBUG", "SLEEP", "1.5")
		slept <- err
	}()
	time.Sleep(100 * time.Millisecond) // the server is asleep
	m, mf := []int{-1}, []float64{-1}
	for i := range redisindex.DefaultDownAfter {
		start := time.Now()
		err := x.MatchContext(context.Background(), c, []string{"e"}, m)
		d := time.Since(start)
		if err == nil || m[0] != 0 {
			t.Fatalf("lookup %d on a sleeping server: matched %v, error %v", i, m, err)
		}
		if d < cfg.Timeout/2 || d > cfg.Timeout+300*time.Millisecond {
			t.Fatalf("lookup %d took %v; the timeout is %v", i, d, cfg.Timeout)
		}
	}
	start := time.Now()
	err := x.MatchContext(context.Background(), c, []string{"e"}, m)
	if !errors.Is(err, redisindex.ErrUnavailable) || time.Since(start) > 20*time.Millisecond {
		t.Fatalf("after %d timeouts: error %v after %v, want ErrUnavailable at once", redisindex.DefaultDownAfter, err, time.Since(start))
	}
	start = time.Now()
	if err := ev.MatchContext(context.Background(), c, []string{"e"}, mf); err == nil || time.Since(start) > cfg.Timeout+300*time.Millisecond {
		t.Fatalf("event lookup on a sleeping server: error %v after %v", err, time.Since(start))
	}
	st := x.BackendStats()
	if st.Timeouts < uint64(redisindex.DefaultDownAfter) || st.Skipped == 0 || !st.Down {
		t.Fatalf("stats %+v", st)
	}
	if err := <-slept; err != nil {
		t.Fatalf("DEBUG SLEEP: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for x.MatchContext(context.Background(), c, []string{"e"}, m) != nil || m[0] != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("no recovery: matched %v, stats %+v", m, x.BackendStats())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWritesNeverBlock: updates are queued; when the writer is stuck on a
// sleeping server the queue fills and further updates are dropped and
// counted, without blocking the caller.
func TestWritesNeverBlock(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	cfg.QueueSize = 2
	cfg.WriteTimeout = 3 * time.Second
	x := newPrefix(t, cfg, kvindex.PrefixIndexConfig{})
	c := kvindextest.Chain(1, 64)
	x.Add("e", c)
	flush(t, x)
	slept := make(chan error, 1)
	go func() {
		_, err := srv.Do(10*time.Second, "DEBUG", "SLEEP", "1")
		slept <- err
	}()
	time.Sleep(100 * time.Millisecond)
	x.Add("e", c) // the writer takes it and waits on the server
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	for i := range 20 {
		x.Add(fmt.Sprint("e", i), c)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("20 Adds took %v with the server asleep", d)
	}
	if st := x.BackendStats(); st.Dropped < 20-2 {
		t.Fatalf("dropped %d of 20 updates with a queue of 2", st.Dropped)
	}
	<-slept
	flush(t, x)
}

// TestContextCancelled: a lookup abandoned by its caller returns at once
// and does not count against the backend.
func TestContextCancelled(t *testing.T) {
	srv := redistest.Start(t)
	x := newPrefix(t, testConfig(srv), kvindex.PrefixIndexConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := []int{-1}
	if err := x.MatchContext(ctx, kvindextest.Chain(1, 3), []string{"e"}, m); err == nil || m[0] != 0 {
		t.Fatalf("matched %v, error %v", m, err)
	}
	if st := x.BackendStats(); st.Errors != 0 {
		t.Fatalf("a cancelled lookup counted as a backend error: %+v", st)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []redisindex.Config{
		{},
		{Address: "localhost"},
		{Address: "localhost:6379", DB: -1},
		{Address: "localhost:6379", Timeout: -time.Second},
	} {
		if _, err := redisindex.NewPrefixIndex(cfg, kvindex.PrefixIndexConfig{}); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
		if _, err := redisindex.NewEventIndex(cfg, kvindex.EventIndexConfig{}); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	ok := redisindex.Config{Address: "127.0.0.1:6379"}
	if _, err := redisindex.NewEventIndex(ok, kvindex.EventIndexConfig{Algorithm: "md5"}); err == nil {
		t.Error("unknown algorithm accepted")
	}
	if _, err := redisindex.NewEventIndex(ok, kvindex.EventIndexConfig{CPUWeight: -1}); err == nil {
		t.Error("negative weight accepted")
	}
}
