package benchmarks

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/eppkit/eppkit/kvindex"
)

// BenchmarkP3IndexMemory inserts 1,000,000 (block, endpoint) entries over 64
// endpoints as distinct chains of 2,048 blocks and reports the heap held per
// entry (HeapInuse delta after a forced GC / entries).
func BenchmarkP3IndexMemory(b *testing.B) {
	const entries, chainLen, nEps = 1_000_000, 2048, 64
	names := make([]string, nEps)
	for i := range names {
		names[i] = fmt.Sprintf("10.0.0.%d:8000", i)
	}
	chain := make([]uint64, chainLen)
	b.ReportAllocs()
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		x := kvindex.NewPrefixIndex(kvindex.PrefixIndexConfig{})
		for c, added := 0, 0; added < entries; c++ {
			n := min(chainLen, entries-added)
			for i := range n { // distinct chains: any distinct values will do
				chain[i] = uint64(c)<<32 | uint64(i) + 0x9e3779b97f4a7c15
			}
			x.Add(names[c%nEps], chain[:n])
			added += n
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if x.Len() != entries {
			b.Fatalf("index holds %d entries, want %d", x.Len(), entries)
		}
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/entries, "bytes/entry")
		runtime.KeepAlive(x)
	}
}
