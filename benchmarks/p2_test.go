package benchmarks

import (
	"runtime"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/eppkit/eppkit/kvindex"
)

// rawNsPerOp times n plain xxhash64 passes over s (at least 1,000), for a
// ratio measured in the same run as the benchmark it divides.
func rawNsPerOp(s string, n int) float64 {
	n = max(n, 1000)
	var sink uint64
	start := time.Now()
	for range n {
		sink ^= xxhash.Sum64String(s)
	}
	el := time.Since(start)
	runtime.KeepAlive(sink)
	return float64(el.Nanoseconds()) / float64(n)
}

// BenchmarkP2Hash measures prompt characters → chained block hashes with the
// approximate producer's defaults (64-token blocks of 256 bytes, at most 2,048
// blocks), against plain xxhash64 over the same bytes in the same run.
func BenchmarkP2Hash(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"6k", 6_000}, {"32k", 32_000}, {"128k", 128_000}} {
		prompt := newTextGen().text(size.n)
		raw := func(b *testing.B) {
			b.SetBytes(int64(len(prompt)))
			b.ReportAllocs()
			var sink uint64
			for b.Loop() {
				sink ^= xxhash.Sum64String(prompt)
			}
			_ = sink
		}
		b.Run(size.name, func(b *testing.B) {
			dst := make([]uint64, 0, kvindex.DefaultMaxBlocks)
			var h kvindex.ChainHasher
			b.SetBytes(int64(len(prompt)))
			b.ReportAllocs()
			for b.Loop() {
				h.Reset("m", "", kvindex.DefaultBlockTokens, kvindex.DefaultMaxBlocks)
				h.WriteString(prompt)
				dst = h.AppendSum(dst[:0])
			}
			b.StopTimer()
			ours := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(ours/rawNsPerOp(prompt, b.N), "ratio-to-xxhash")
			b.ReportMetric(float64(len(dst)), "blocks")
		})
		b.Run("xxhash-"+size.name, raw)
	}
}
