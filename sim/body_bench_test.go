package sim

import "testing"

// BenchmarkAppendBody builds the body of one tenants request (7,200
// tokens: 28.8 KB of prompt text), as the feeder does for every arrival.
func BenchmarkAppendBody(b *testing.B) {
	g := Tenants{Seed: 1, Arrivals: Ramp{From: 10, To: 10, Duration: 1e12}}.New()
	r, _ := g.Next()
	var buf []byte
	b.SetBytes(int64(4 * r.PromptTokens))
	for b.Loop() {
		buf = appendBody(buf[:0], r, 16)
	}
}
