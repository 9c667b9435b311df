package prefix_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eppkit/eppkit/kvindex/redisindex/redistest"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/requestcontrol/producers/prefix"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/schedulingtest"
)

// BenchmarkRequestBackends is what one request costs the approximate
// producer — hashing the prompt, the lookup, the pick's credit — with each
// index backend, over 8 endpoints one of which holds the prompt: the
// difference of the p99s is what sharing the index adds to a request. The
// Redis backends need a local redis-server (skipped without one), which
// shares the machine's cores with the benchmark; memory-busy-redis is the
// control for that: the in-memory index, while a second producer writes
// the same credits to the server untimed (as the Redis backends do), so
// the server takes the same CPU from the benchmark.
func BenchmarkRequestBackends(b *testing.B) {
	srv := redistest.Start(b)
	eps := make([]*scheduling.Endpoint, 8)
	for i := range eps {
		eps[i] = schedulingtest.Ep(fmt.Sprint("e", i)).Build()
	}
	for _, blocks := range []int{64, 2048} {
		// 256 prompt bytes a block: a shared system prompt, a unique tail.
		system := strings.Repeat("You are a helpful assistant. ", blocks*256/30)
		for _, backend := range []string{"memory", "memory-busy-redis", "redis", "redis-mirror"} {
			b.Run(fmt.Sprintf("blocks=%d/%s", blocks, backend), func(b *testing.B) {
				var p *prefix.Approx
				switch backend {
				case "redis":
					p = benchRedisProducer(b, srv.Addr, fmt.Sprintf("bench-%d:", blocks), false)
				case "redis-mirror":
					p = benchRedisProducer(b, srv.Addr, fmt.Sprintf("bench-m%d:", blocks), true)
				default:
					p = newBenchProducer(b, "")
				}
				var busy *prefix.Approx // memory-busy-redis: what redis-mirror writes, unread
				if backend == "memory-busy-redis" {
					busy = benchRedisProducer(b, srv.Addr, fmt.Sprintf("bench-b%d:", blocks), false)
				}
				req := func(i int) *scheduling.Request {
					return schedulingtest.Req("m").Body(&parsers.Body{Model: "m", Messages: []parsers.Message{
						{Role: "system", Content: system}, {Role: "user", Content: fmt.Sprint("question ", i%16)}}}).Build()
				}
				res := &scheduling.Result{Primary: "default", Profiles: []scheduling.ProfileResult{{Profile: "default", Endpoints: eps[3:4]}}}
				for i := range 16 { // warm: every prompt credited to endpoint 3
					r := req(i)
					if err := p.Produce(ctx, r, eps); err != nil {
						b.Fatal(err)
					}
					p.PreRequest(ctx, r, res)
				}
				if err := p.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				st0 := p.BackendStats()
				lat := make([]time.Duration, 0, 1<<16)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					r := req(i)
					start := time.Now()
					if err := p.Produce(ctx, r, eps); err != nil {
						b.Fatal(err)
					}
					p.PreRequest(ctx, r, res)
					lat = append(lat, time.Since(start))
					if busy != nil {
						busy.PreRequest(ctx, r, res)
					}
				}
				b.StopTimer()
				r := req(0)
				if err := p.Produce(ctx, r, eps); err != nil {
					b.Fatal(err)
				}
				m, _ := plugins.Get(&r.Data, scheduling.PrefixMatchKey(scheduling.DefaultPrefixProducer))
				if m == nil || m.Matched[3] != float64(m.TotalBlocks) {
					b.Fatalf("matched %v of %d", m.Matched, m.TotalBlocks)
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
				st := p.BackendStats()
				if st.Errors != 0 || st.Dropped != 0 {
					b.Fatalf("backend stats %+v", st)
				}
				if backend == "redis-mirror" {
					// the share of the timed lookups the mirror answered
					local, remote := st.MirrorLookups-st0.MirrorLookups, st.Lookups-st0.Lookups
					b.ReportMetric(float64(local)/float64(local+remote), "mirror-share")
				}
			})
		}
	}
}

func newBenchProducer(tb testing.TB, params string) *prefix.Approx {
	return pluginstest.Build[*prefix.Approx](tb, std.Registry(), scheduling.DefaultPrefixProducer, params)
}

func benchRedisProducer(tb testing.TB, addr, keyPrefix string, mirror bool) *prefix.Approx {
	return newBenchProducer(tb, fmt.Sprintf(`{"indexBackend":"redis","redis":{"address":%q,"keyPrefix":%q,"timeout":"1s","mirror":%t}}`, addr, keyPrefix, mirror))
}
