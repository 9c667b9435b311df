package redisindex_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/kvindex/kvindextest"
	"github.com/eppkit/eppkit/kvindex/redisindex"
	"github.com/eppkit/eppkit/kvindex/redisindex/redistest"
)

// The benchmarks run against a local redis-server (skipped without one);
// on loopback a round trip is tens of microseconds, so they measure what a
// lookup adds to a request, not what a network adds.

func benchConfig(srv *redistest.Server) redisindex.Config {
	cfg := testConfig(srv)
	cfg.QueueSize = 1 << 16
	return cfg
}

// latencies records one duration per operation and reports percentiles.
type latencies []time.Duration

func (l *latencies) time(f func()) {
	start := time.Now()
	f()
	*l = append(*l, time.Since(start))
}

func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	slices.Sort(l)
	at := func(q float64) float64 {
		return float64(l[min(len(l)-1, int(q*float64(len(l))))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// serverTime resets the server's command statistics and returns a func
// that reports, per operation since then, the server's own time in EVALSHA
// (the script's work, without the round trip) as server-µs, and the CPU
// time of the whole server process (reading the request and writing the
// reply included) as server-cpu-µs.
func serverTime(b *testing.B, srv *redistest.Server) func() {
	if _, err := srv.Do(time.Second, "CONFIG", "RESETSTAT"); err != nil {
		b.Fatal(err)
	}
	cpu0 := serverCPU(b, srv)
	return func() {
		b.ReportMetric((serverCPU(b, srv)-cpu0)*1e6/float64(b.N), "server-cpu-µs")
		info, err := srv.Do(time.Second, "INFO", "commandstats")
		if err != nil {
			b.Fatal(err)
		}
		if v, ok := infoField(info, "cmdstat_evalsha:", "usec_per_call="); ok {
			b.ReportMetric(v, "server-µs")
		}
	}
}

// serverCPU returns the server's user and system CPU time in seconds.
func serverCPU(b *testing.B, srv *redistest.Server) float64 {
	info, err := srv.Do(time.Second, "INFO", "cpu")
	if err != nil {
		b.Fatal(err)
	}
	user, _ := infoField(info, "used_cpu_user:", "")
	sys, _ := infoField(info, "used_cpu_sys:", "")
	return user + sys
}

// infoField finds the INFO line starting with line and returns the number
// after field in it (field "": the whole rest of the line).
func infoField(info, line, field string) (float64, bool) {
	for _, l := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), line)
		if !ok {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, field); ok {
				x, err := strconv.ParseFloat(v, 64)
				return x, err == nil
			}
		}
	}
	return 0, false
}

// mirrorShare returns a func that fails the benchmark if a mirror answered
// some lookups and the server others (the mirror fell behind), and reports
// which answered them all.
func mirrorShare(b *testing.B, stats func() kvindex.BackendStats) func() {
	st0 := stats()
	return func() {
		st := stats()
		local, remote := st.MirrorLookups-st0.MirrorLookups, st.Lookups-st0.Lookups
		if local != 0 && remote != 0 {
			b.Fatalf("%d lookups from the mirror, %d from the server", local, remote)
		}
	}
}

// lookupFixture credits endpoint 0 with the whole chain and every other
// endpoint with a share of it (a common system prompt held everywhere).
func lookupFixture(blocks, endpoints int) ([]uint64, []string, func(x kvindex.PrefixStore)) {
	chain := kvindextest.Chain(1, blocks)
	eps := make([]string, endpoints)
	for i := range eps {
		eps[i] = fmt.Sprintf("10.0.0.%d:8000", i)
	}
	fill := func(x kvindex.PrefixStore) {
		x.SetCapacity(eps[0], 1<<20)
		x.Add(eps[0], chain)
		for i := 1; i < len(eps); i++ {
			x.Add(eps[i], chain[:blocks/(i+1)])
		}
	}
	return chain, eps, fill
}

// BenchmarkRedisLookup2048 looks a 2,048-block chain up (one round trip)
// over 8 and 64 endpoints, against the in-memory index and Redis; the
// difference of the p99s is what sharing the index adds to a request.
func BenchmarkRedisLookup2048(b *testing.B) {
	benchLookup(b, 2048)
}

// BenchmarkRedisLookup64 is the same for a typical prompt of 64 blocks
// (4,096 tokens at 64 tokens a block).
func BenchmarkRedisLookup64(b *testing.B) {
	benchLookup(b, 64)
}

func benchLookup(b *testing.B, blocks int) {
	srv := redistest.Start(b)
	for _, n := range []int{8, 64} {
		chain, eps, fill := lookupFixture(blocks, n)
		for _, backend := range []string{"memory", "redis", "redis-mirror"} {
			b.Run(fmt.Sprintf("N=%d/%s", n, backend), func(b *testing.B) {
				var x kvindex.PrefixStore = kvindex.NewPrefixIndex(kvindex.PrefixIndexConfig{})
				if backend != "memory" {
					cfg := benchConfig(srv)
					cfg.Mirror = backend == "redis-mirror"
					r := newPrefix(b, cfg, kvindex.PrefixIndexConfig{})
					defer mirrorShare(b, r.BackendStats)()
					x = r
				}
				fill(x)
				kvindextest.Sync(b, x)
				if backend == "redis" {
					defer serverTime(b, srv)()
				}
				matched := make([]int, len(eps))
				ctx := context.Background()
				lat := make(latencies, 0, 1<<16)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					lat.time(func() {
						if err := x.MatchContext(ctx, chain, eps, matched); err != nil {
							b.Fatal(err)
						}
					})
				}
				b.StopTimer()
				if matched[0] != blocks {
					b.Fatalf("matched %d of %d", matched[0], blocks)
				}
				lat.report(b)
			})
		}
	}
}

// BenchmarkRedisEventLookup2048 looks 2,048 request keys up in the precise
// index over 8 endpoints, one holding them all, the others a share.
func BenchmarkRedisEventLookup2048(b *testing.B) {
	srv := redistest.Start(b)
	const blocks = 2048
	e := kvindextest.Engine{Seed: 1, BlockTokens: 16}
	toks := kvindextest.Tokens(1, blocks*16)
	eps := make([]string, 8)
	for i := range eps {
		eps[i] = fmt.Sprintf("10.0.0.%d:8000", i)
	}
	for _, backend := range []string{"memory", "redis", "redis-mirror"} {
		b.Run(backend, func(b *testing.B) {
			var x kvindex.EventStore
			if backend != "memory" {
				cfg := benchConfig(srv)
				cfg.Mirror = backend == "redis-mirror"
				r := newEvents(b, cfg, kvindex.EventIndexConfig{})
				defer mirrorShare(b, r.BackendStats)()
				x = r
			} else {
				x, _ = kvindex.NewEventIndex(kvindex.EventIndexConfig{})
			}
			for i, ep := range eps {
				x.Apply(ep, kvindextest.Batch("m", e.Stored(toks, 0, blocks/(i+1), "GPU")))
			}
			kvindextest.Sync(b, x)
			keys := x.BlockKeys(nil, "m", "", toks, blocks)
			if backend == "redis" {
				defer serverTime(b, srv)()
			}
			matched := make([]float64, len(eps))
			lat := make(latencies, 0, 1<<16)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				lat.time(func() {
					if err := x.MatchContext(context.Background(), keys, eps, matched); err != nil {
						b.Fatal(err)
					}
				})
			}
			b.StopTimer()
			if matched[0] != blocks {
				b.Fatalf("matched %v of %d", matched[0], blocks)
			}
			lat.report(b)
		})
	}
}

// BenchmarkRedisApply applies BlockStored batches of 64 blocks, chained to
// the previous batch, then removes them: the steady state of an engine
// under load. It reports block events applied per second, from one
// subscriber goroutine and from eight (one per engine, as the subscriber
// runs them).
func BenchmarkRedisApply(b *testing.B) {
	srv := redistest.Start(b)
	const perBatch = 64
	for _, par := range []int{1, 8} {
		b.Run(fmt.Sprintf("engines=%d", par), func(b *testing.B) {
			x := newEvents(b, benchConfig(srv), kvindex.EventIndexConfig{})
			toks := kvindextest.Tokens(2, 16*perBatch*64)
			// Per engine: 64 chunks of 64 blocks stored in turn, then all
			// removed, and again.
			cycles := make([][]kvindex.Event, par)
			for g := range cycles {
				e := kvindextest.Engine{Seed: uint64(g), BlockTokens: 16}
				for i := range 64 {
					cycles[g] = append(cycles[g], e.Stored(toks, i*perBatch, (i+1)*perBatch, "GPU"))
				}
				cycles[g] = append(cycles[g], e.Removed(toks, 0, 64*perBatch, "GPU"))
			}
			defer serverTime(b, srv)()
			var next atomic.Int64
			b.ResetTimer()
			start := time.Now()
			done := make(chan struct{})
			var events atomic.Int64
			ops := int64(b.N)
			for g := range par {
				go func() {
					defer func() { done <- struct{}{} }()
					ep := fmt.Sprintf("10.1.0.%d:8000", g)
					evs := cycles[g]
					for seq := uint64(0); ; seq++ {
						if next.Add(1) > ops {
							return
						}
						ev := evs[seq%uint64(len(evs))]
						x.Apply(ep, &kvindex.Batch{Model: "m", Seq: seq, Events: []kvindex.Event{ev}})
						events.Add(int64(len(ev.BlockHashes)))
					}
				}()
			}
			for range par {
				<-done
			}
			elapsed := time.Since(start)
			b.StopTimer()
			if st := x.BackendStats(); st.Errors != 0 || st.Dropped != 0 {
				b.Fatalf("backend stats %+v", st)
			}
			if st, stale := x.Stats(); st.UnknownParents != 0 || stale != 0 {
				b.Fatalf("stats %+v, %d stale", st, stale)
			}
			b.ReportMetric(float64(events.Load())/elapsed.Seconds(), "block-events/s")
		})
	}
}

// BenchmarkRedisAdd credits 2,048-block chains to one endpoint through the
// writer: one at a time (Flush after each: every block refreshed per
// credit), and 64 at a time over 16 prompts (the writer merges what it
// batches: a block once per batch). It reports the blocks credited per
// second — the server-side cost of picks, which requests do not wait for.
func BenchmarkRedisAdd(b *testing.B) {
	srv := redistest.Start(b)
	chains := make([][]uint64, 16)
	for i := range chains {
		chains[i] = kvindextest.Chain(uint64(i), 2048)
	}
	for _, every := range []int{1, 64} {
		b.Run(fmt.Sprintf("flush=%d", every), func(b *testing.B) {
			x := newPrefix(b, benchConfig(srv), kvindex.PrefixIndexConfig{DefaultCapacity: 1 << 20})
			i := 0
			for b.Loop() {
				x.Add("e", chains[i%len(chains)])
				i++
				if i%every == 0 {
					kvindextest.Sync(b, x)
				}
			}
			kvindextest.Sync(b, x)
			b.StopTimer()
			if st := x.BackendStats(); st.Dropped != 0 || st.Errors != 0 {
				b.Fatalf("stats %+v", st)
			}
			b.ReportMetric(float64(b.N)*2048/b.Elapsed().Seconds(), "block-credits/s")
		})
	}
}

// BenchmarkMirrorLoad is what a replica starting with Config.Mirror pays:
// the time to load its copy of an approximate index of 131,072 distinct
// blocks (64 endpoints, each holding its own 2,048-block chain), and the
// heap the copy takes per block.
func BenchmarkMirrorLoad(b *testing.B) {
	srv := redistest.Start(b)
	cfg := benchConfig(srv)
	const endpoints, blocks = 64, 2048
	w := newPrefix(b, cfg, kvindex.PrefixIndexConfig{DefaultCapacity: blocks})
	for i := range endpoints {
		w.Add(fmt.Sprintf("10.0.0.%d:8000", i), kvindextest.Chain(uint64(i), blocks))
	}
	kvindextest.Sync(b, w)
	cfg.Mirror = true
	var heap uint64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		x, err := redisindex.NewPrefixIndex(cfg, kvindex.PrefixIndexConfig{})
		if err != nil {
			b.Fatal(err)
		}
		kvindextest.Sync(b, x)
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = after.HeapAlloc - before.HeapAlloc
		got := []int{0}
		if err := x.MatchContext(context.Background(), kvindextest.Chain(3, blocks), []string{"10.0.0.3:8000"}, got); err != nil || got[0] != blocks {
			b.Fatalf("matched %v, %v", got, err)
		}
		if st := x.BackendStats(); st.MirrorLookups != 1 {
			b.Fatalf("stats %+v: the lookup did not read the copy", st)
		}
		_ = x.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "load-ms")
	b.ReportMetric(float64(heap)/(endpoints*blocks), "heap-B/block")
}
