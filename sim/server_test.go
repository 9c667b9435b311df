package sim

import (
	"testing"
	"time"
)

// testParams are round numbers for hand-computed timelines: a step costs
// 1ms + 10µs per prefill token + 100µs per decoding sequence.
func testParams(blocks int) ServerParams {
	return ServerParams{BlockTokens: 16, KVBlocks: blocks, MaxBatchedTokens: 8192, MaxSeqs: 8,
		StepOverhead: time.Millisecond, PrefillPerToken: 10 * time.Microsecond, DecodePerSeq: 100 * time.Microsecond,
		MaxLoRAs: 1, LoRALoad: 5 * time.Millisecond}
}

func units(kind uint64, n int) []uint64 {
	u := make([]uint64, n)
	for i := range u {
		u[i] = unit(kind, 0, uint64(i))
	}
	return u
}

// serve runs one request alone on s from time at until it ends.
func serve(t *testing.T, s *server, at time.Duration, r *Request) *seq {
	t.Helper()
	q := &seq{req: r, arrival: at}
	s.enqueue(q)
	now := at
	for {
		d, ok := s.startStep(now)
		if !ok {
			t.Fatalf("server idle with the request unfinished")
		}
		now += d
		s.finishStep(now)
		if len(s.finished) > 0 {
			if len(s.finished) != 1 || s.finished[0] != q {
				t.Fatalf("finished %v, want the one request", s.finished)
			}
			return q
		}
	}
}

func req(u []uint64, prompt, output int) *Request {
	return &Request{Model: DefaultModel, Units: u, PromptTokens: prompt, OutputTokens: output}
}

func TestServerOneRequest(t *testing.T) {
	s := newServer(testParams(100), DefaultModel)
	q := serve(t, s, 0, req(units(1, 10), 160, 3))
	// Step 1 prefills 160 tokens: 1ms + 1.6ms, and yields the first token.
	// Steps 2 and 3 decode one token each: 1ms + 0.1ms.
	if want := 2600 * time.Microsecond; q.firstToken != want {
		t.Errorf("TTFT %v, want %v", q.firstToken, want)
	}
	if want := 4800 * time.Microsecond; q.done != want {
		t.Errorf("e2e %v, want %v", q.done, want)
	}
	if q.cached != 0 {
		t.Errorf("cached %d, want 0", q.cached)
	}
	if s.kv.used() != 0 || s.kv.cached.len() != 10 {
		t.Errorf("after: %d blocks used, %d cached; want 0 and the 10 prompt blocks", s.kv.used(), s.kv.cached.len())
	}
}

func TestServerSharedPrefix(t *testing.T) {
	s := newServer(testParams(100), DefaultModel)
	a := units(1, 10)
	serve(t, s, 0, req(a, 160, 1))
	// The second request shares the first 8 blocks (128 tokens): it
	// prefills 32 tokens, 1ms + 0.32ms.
	b := append(append([]uint64(nil), a[:8]...), units(2, 2)...)
	q := serve(t, s, 10*time.Millisecond, req(b, 160, 1))
	if q.cached != 128 {
		t.Errorf("cached %d, want 128", q.cached)
	}
	if got, want := q.firstToken-q.arrival, 1320*time.Microsecond; got != want {
		t.Errorf("TTFT %v, want %v", got, want)
	}
	// The same prompt again: everything but the last block is reused (the
	// engine always computes at least one token).
	q = serve(t, s, 20*time.Millisecond, req(a, 160, 1))
	if q.cached != 144 {
		t.Errorf("repeat: cached %d, want 144", q.cached)
	}
	// Another model (LoRA) shares nothing.
	s.p.MaxLoRAs = 1
	r := req(a, 160, 1)
	r.Model = "adapter-1"
	q = serve(t, s, 30*time.Millisecond, r)
	if q.cached != 0 {
		t.Errorf("other model: cached %d, want 0", q.cached)
	}
	// 1ms + 1.6ms + the 5ms LoRA load.
	if got, want := q.firstToken-q.arrival, 7600*time.Microsecond; got != want {
		t.Errorf("LoRA TTFT %v, want %v", got, want)
	}
}

func TestServerEvictionTailFirst(t *testing.T) {
	s := newServer(testParams(20), DefaultModel)
	a := units(1, 10)
	serve(t, s, 0, req(a, 160, 1))                      // blocks 0-9
	serve(t, s, time.Second, req(units(2, 10), 160, 1)) // blocks 10-19, never used before
	// Under pressure, 5 fresh blocks evict the least recently freed: the
	// first request's, tail first.
	serve(t, s, 2*time.Second, req(units(3, 5), 80, 1))
	q := serve(t, s, 3*time.Second, req(a, 160, 1))
	if q.cached != 80 {
		t.Errorf("cached %d, want 80 (the head 5 blocks survive)", q.cached)
	}
}

func TestServerPreemption(t *testing.T) {
	// 12 blocks: two 80-token prompts (5 blocks each) fit, but their
	// decodes outgrow the cache and one is preempted and recomputed.
	s := newServer(testParams(12), DefaultModel)
	q1 := &seq{req: req(units(1, 5), 80, 40)}
	q2 := &seq{req: req(units(2, 5), 80, 40)}
	s.enqueue(q1)
	s.enqueue(q2)
	now, done := time.Duration(0), 0
	for i := 0; i < 1000 && done < 2; i++ {
		d, ok := s.startStep(now)
		if !ok {
			t.Fatal("stalled")
		}
		now += d
		s.finishStep(now)
		done += len(s.finished)
	}
	if done != 2 || s.kv.used() != 0 {
		t.Fatalf("done %d, used %d; want 2 and 0", done, s.kv.used())
	}
	if q1.generated != 40 || q2.generated != 40 {
		t.Errorf("generated %d and %d, want 40", q1.generated, q2.generated)
	}
}

// A chat turn's answer is cached like its prompt: the next turn, whose
// prompt repeats the answer, finds both in the cache.
func TestServerCachesTheAnswer(t *testing.T) {
	s := newServer(testParams(100), DefaultModel)
	prompt, answer := units(1, 4), units(7, 2)
	first := req(prompt, 64, 40) // 40 tokens: two full answer blocks and a partial one
	first.OutputUnits = answer
	serve(t, s, 0, first)
	next := append(append(append([]uint64(nil), prompt...), answer...), units(8, 2)...)
	q := serve(t, s, 10*time.Millisecond, req(next, 128, 1))
	if want := 16 * (len(prompt) + len(answer)); q.cached != want {
		t.Errorf("cached %d tokens, want %d (prompt and answer)", q.cached, want)
	}
	// An answer after a prompt that ends mid-block is not cached.
	s = newServer(testParams(100), DefaultModel)
	odd := req(prompt, 60, 40)
	odd.OutputUnits = answer
	serve(t, s, 0, odd)
	if got := s.kv.cached.len(); got != 3 {
		t.Errorf("%d blocks cached, want the 3 full prompt blocks", got)
	}
}
