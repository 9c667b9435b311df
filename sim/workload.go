package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"
)

// Request is one simulated request. Its prompt is a sequence of content
// units of the servers' block size: equal unit ids are equal text, so the
// engine's prefix cache and the approximate producer's hashing agree on
// what is shared.
type Request struct {
	// Arrival is the virtual time of arrival since the start of the run.
	Arrival time.Duration
	// Model is the model name, or a LoRA adapter name.
	Model string
	// Units are the prompt's content units, one per block of tokens; the
	// last one may be partial (PromptTokens need not be a multiple).
	Units        []uint64
	PromptTokens int
	OutputTokens int
	// OutputUnits, when set, are the content units of the answer as a
	// later request's prompt repeats them (the next turn of a chat): the
	// server caches the answer's full blocks under the hashes that prompt
	// will have, as vLLM caches the blocks it generates. They count only
	// when the prompt is a whole number of blocks.
	OutputUnits []uint64
	// Unique, when set, is the number of trailing units that appear in no
	// other request's prompt (a tenant's question). Their blocks are cached,
	// take space, are evicted and reported as any other, but are not
	// indexed for lookup: no other prompt can hit them. Results are the
	// same with or without it; it only saves work.
	Unique int
}

// Workload produces requests in arrival order. Next returns false at the
// end. A Workload is used once; the simulator asks a WorkloadFunc for a
// fresh one per configuration.
type Workload interface {
	Next() (*Request, bool)
}

// WorkloadFunc makes a fresh Workload for one configuration's run.
type WorkloadFunc func() (Workload, error)

// Ramp is an arrival process whose rate moves linearly from From to To
// requests per second over Duration. Inter-arrival times are Poisson by
// default; Burstiness makes them gamma-distributed with that shape, as
// vLLM's benchmark_serving --burstiness does: 1 (or 0) is Poisson, below 1
// arrivals come in bursts separated by lulls, above 1 they are more even.
// The mean rate is the same whatever the burstiness.
type Ramp struct {
	From, To   float64
	Duration   time.Duration
	Burstiness float64
}

func (r Ramp) rate(t time.Duration) float64 {
	f := float64(t) / float64(r.Duration)
	return r.From + (r.To-r.From)*min(max(f, 0), 1)
}

// next returns the arrival after t, or false past the end.
func (r Ramp) next(rng *rand.Rand, t time.Duration) (time.Duration, bool) {
	rate := max(r.rate(t), 1e-3)
	gap := rng.ExpFloat64()
	if k := r.Burstiness; k > 0 && k != 1 {
		gap = gamma(rng, k) / k
	}
	t += time.Duration(gap / rate * float64(time.Second))
	return t, t < r.Duration
}

// gamma draws from the gamma distribution of shape k and scale 1
// (Marsaglia and Tsang; shapes below 1 by the boost k+1 and U^(1/k)).
func gamma(rng *rand.Rand, k float64) float64 {
	boost := 1.0
	if k < 1 {
		boost = math.Pow(1-rng.Float64(), 1/k) // in (0, 1]
		k++
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := 1 - rng.Float64() // in (0, 1]
		if math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return boost * d * v
		}
	}
}

// unit derives a content unit id from a kind and coordinates.
func unit(kind, a, b uint64) uint64 {
	return mix(mix(kind*0x9e3779b97f4a7c15+a) ^ (b + 0x632be59bd9b4e019))
}

// Tenants is the shared-prefix workload of BENCHMARKS.md P7: each request
// belongs to one of Tenants tenants (uniformly), and its prompt is the
// tenant's shared context followed by a unique question.
type Tenants struct {
	Tenants        int // default 150
	ContextTokens  int // default 6,000
	QuestionTokens int // default 1,200
	OutputTokens   int // default 300
	Model          string
	Arrivals       Ramp
	BlockTokens    int
	Seed           uint64
}

func (w *Tenants) defaults() {
	if w.Tenants <= 0 {
		w.Tenants = 150
	}
	if w.ContextTokens <= 0 {
		w.ContextTokens = 6000
	}
	if w.QuestionTokens <= 0 {
		w.QuestionTokens = 1200
	}
	if w.OutputTokens <= 0 {
		w.OutputTokens = 300
	}
	if w.Model == "" {
		w.Model = DefaultModel
	}
	if w.BlockTokens <= 0 {
		w.BlockTokens = 16
	}
}

// CostEstimate returns an estimate of one server's capacity in requests per
// second for a request with the given uncached prompt and output tokens,
// with the step overhead shared by a batch of 32.
func (p ServerParams) CostEstimate(uncachedPrompt, output int) float64 {
	p.defaults()
	per := time.Duration(uncachedPrompt)*p.PrefillPerToken +
		time.Duration(output)*(p.DecodePerSeq+p.StepOverhead/32)
	return 1 / per.Seconds()
}

// Capacity estimates the cluster's capacity (requests/s) for this workload
// when every shared context is cached: the uncached cost is the question.
func (w Tenants) Capacity(servers int, p ServerParams) float64 {
	w.defaults()
	return float64(servers) * p.CostEstimate(w.QuestionTokens, w.OutputTokens)
}

type tenantsGen struct {
	w   Tenants
	rng *rand.Rand
	t   time.Duration
	n   uint64
}

// New returns a fresh generator.
func (w Tenants) New() Workload {
	w.defaults()
	return &tenantsGen{w: w, rng: rand.New(rand.NewPCG(w.Seed, 0x7e7a))}
}

func (g *tenantsGen) Next() (*Request, bool) {
	t, ok := g.w.Arrivals.next(g.rng, g.t)
	g.t = t // past the end, it stays there
	if !ok {
		return nil, false
	}
	bt := g.w.BlockTokens
	tenant := uint64(g.rng.IntN(g.w.Tenants))
	ctx := (g.w.ContextTokens + bt - 1) / bt
	q := (g.w.QuestionTokens + bt - 1) / bt
	units := make([]uint64, 0, ctx+q)
	for j := range ctx {
		units = append(units, unit(1, tenant, uint64(j)))
	}
	for j := range q {
		units = append(units, unit(2, g.n, uint64(j)))
	}
	g.n++
	return &Request{Arrival: t, Model: g.w.Model, Units: units,
		PromptTokens: ctx*bt + g.w.QuestionTokens, // the context is padded to whole blocks
		OutputTokens: g.w.OutputTokens, Unique: q}, true
}

// Chat is a multi-turn chat workload: Sessions conversations are active at
// once; each arrival is the next turn of a random one, whose prompt is the
// whole conversation so far (previous prompt, the previous answer, a new
// message). A session ends after Turns turns and a new one takes its place.
type Chat struct {
	Sessions      int // default 64
	Turns         int // default 8
	SystemTokens  int // default 1,000, shared by every session
	MessageTokens int // default 200
	OutputTokens  int // default 200
	Model         string
	Arrivals      Ramp
	BlockTokens   int
	Seed          uint64
}

type chatSession struct {
	id    uint64
	turn  int
	units []uint64
}

type chatGen struct {
	w        Chat
	rng      *rand.Rand
	t        time.Duration
	sessions []chatSession
	nextID   uint64
}

// New returns a fresh generator.
func (w Chat) New() Workload {
	if w.Sessions <= 0 {
		w.Sessions = 64
	}
	if w.Turns <= 0 {
		w.Turns = 8
	}
	if w.SystemTokens <= 0 {
		w.SystemTokens = 1000
	}
	if w.MessageTokens <= 0 {
		w.MessageTokens = 200
	}
	if w.OutputTokens <= 0 {
		w.OutputTokens = 200
	}
	if w.Model == "" {
		w.Model = DefaultModel
	}
	if w.BlockTokens <= 0 {
		w.BlockTokens = 16
	}
	g := &chatGen{w: w, rng: rand.New(rand.NewPCG(w.Seed, 0xc4a7))}
	g.sessions = make([]chatSession, w.Sessions)
	for i := range g.sessions {
		g.sessions[i] = g.newSession()
	}
	return g
}

func (g *chatGen) newSession() chatSession {
	s := chatSession{id: g.nextID}
	g.nextID++
	for j := range g.w.SystemTokens / g.w.BlockTokens {
		s.units = append(s.units, unit(3, 0, uint64(j)))
	}
	return s
}

func (g *chatGen) Next() (*Request, bool) {
	t, ok := g.w.Arrivals.next(g.rng, g.t)
	g.t = t // past the end, it stays there
	if !ok {
		return nil, false
	}
	bt := g.w.BlockTokens
	s := &g.sessions[g.rng.IntN(len(g.sessions))]
	if s.turn > 0 { // the previous answer becomes part of the history
		for j := range g.w.OutputTokens / bt {
			s.units = append(s.units, unit(5, s.id, uint64(s.turn<<20|j)))
		}
	}
	for j := range g.w.MessageTokens / bt {
		s.units = append(s.units, unit(4, s.id, uint64(s.turn<<20|j)))
	}
	s.turn++
	r := &Request{Arrival: t, Model: g.w.Model, Units: append([]uint64(nil), s.units...),
		PromptTokens: len(s.units) * bt, OutputTokens: g.w.OutputTokens}
	for j := range g.w.OutputTokens / bt { // the answer, as the next turn repeats it
		r.OutputUnits = append(r.OutputUnits, unit(5, s.id, uint64(s.turn<<20|j)))
	}
	if s.turn >= g.w.Turns {
		*s = g.newSession()
	}
	return r, true
}

// LoRAMix is a LoRA workload: each request targets one of Adapters adapters
// (Zipf-distributed popularity, s = 1.1) with an adapter-specific system
// prompt and a unique question.
type LoRAMix struct {
	Adapters       int // default 16
	SystemTokens   int // default 1,000
	QuestionTokens int // default 500
	OutputTokens   int // default 200
	Arrivals       Ramp
	BlockTokens    int
	Seed           uint64
}

type loraGen struct {
	w    LoRAMix
	rng  *rand.Rand
	zipf *rand.Zipf
	t    time.Duration
	n    uint64
}

// New returns a fresh generator.
func (w LoRAMix) New() Workload {
	if w.Adapters <= 0 {
		w.Adapters = 16
	}
	if w.SystemTokens <= 0 {
		w.SystemTokens = 1000
	}
	if w.QuestionTokens <= 0 {
		w.QuestionTokens = 500
	}
	if w.OutputTokens <= 0 {
		w.OutputTokens = 200
	}
	if w.BlockTokens <= 0 {
		w.BlockTokens = 16
	}
	rng := rand.New(rand.NewPCG(w.Seed, 0x10ba))
	return &loraGen{w: w, rng: rng, zipf: rand.NewZipf(rng, 1.1, 1, uint64(w.Adapters-1))}
}

func (g *loraGen) Next() (*Request, bool) {
	t, ok := g.w.Arrivals.next(g.rng, g.t)
	g.t = t // past the end, it stays there
	if !ok {
		return nil, false
	}
	bt := g.w.BlockTokens
	a := g.zipf.Uint64()
	var units []uint64
	for j := range g.w.SystemTokens / bt {
		units = append(units, unit(6, a, uint64(j)))
	}
	for j := range g.w.QuestionTokens / bt {
		units = append(units, unit(7, g.n, uint64(j)))
	}
	g.n++
	return &Request{Arrival: t, Model: fmt.Sprintf("adapter-%d", a), Units: units,
		PromptTokens: len(units) * bt, OutputTokens: g.w.OutputTokens, Unique: g.w.QuestionTokens / bt}, true
}

// MooncakeBlockTokens is the block size of the Mooncake trace's hash_ids.
const MooncakeBlockTokens = 512

// Mooncake replays a trace in the Mooncake JSONL format, one request a line:
// {"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]}
// where each hash id stands for 512 tokens (equal ids = equal content). The
// trace is streamed (memory does not grow with its length) and re-blocked
// to the servers' block size, which must divide 512.
type Mooncake struct {
	R           io.Reader
	Model       string
	BlockTokens int
	// Speed scales time: 2 replays twice as fast (default 1).
	Speed float64
	// Limit stops after this many requests (0: all).
	Limit int
}

type mooncakeRecord struct {
	Timestamp    float64  `json:"timestamp"`
	InputLength  int      `json:"input_length"`
	OutputLength int      `json:"output_length"`
	HashIDs      []uint64 `json:"hash_ids"`
}

type mooncakeGen struct {
	w    Mooncake
	dec  *json.Decoder
	n    int
	Err  error
	base float64
}

// New returns a streaming reader of the trace.
func (w Mooncake) New() (Workload, error) {
	if w.BlockTokens <= 0 {
		w.BlockTokens = 16
	}
	if MooncakeBlockTokens%w.BlockTokens != 0 {
		return nil, fmt.Errorf("sim: mooncake: block size %d does not divide %d", w.BlockTokens, MooncakeBlockTokens)
	}
	if w.Model == "" {
		w.Model = DefaultModel
	}
	if w.Speed <= 0 {
		w.Speed = 1
	}
	return &mooncakeGen{w: w, dec: json.NewDecoder(bufio.NewReaderSize(w.R, 1<<16)), base: math.NaN()}, nil
}

func (g *mooncakeGen) Next() (*Request, bool) {
	if g.Err != nil || (g.w.Limit > 0 && g.n >= g.w.Limit) {
		return nil, false
	}
	var rec mooncakeRecord
	if err := g.dec.Decode(&rec); err != nil {
		if err != io.EOF {
			g.Err = fmt.Errorf("sim: mooncake: record %d: %w", g.n+1, err)
		}
		return nil, false
	}
	g.n++
	if math.IsNaN(g.base) {
		g.base = rec.Timestamp
	}
	bt := g.w.BlockTokens
	per := MooncakeBlockTokens / bt
	n := (rec.InputLength + bt - 1) / bt
	units := make([]uint64, 0, n)
	for _, h := range rec.HashIDs {
		for k := 0; k < per && len(units) < n; k++ {
			units = append(units, unit(8, h, uint64(k)))
		}
	}
	for len(units) < n { // more tokens than hash ids cover: unique content
		units = append(units, unit(9, uint64(g.n), uint64(len(units))))
	}
	at := time.Duration((rec.Timestamp - g.base) / g.w.Speed * float64(time.Millisecond))
	return &Request{Arrival: at, Model: g.w.Model, Units: units,
		PromptTokens: max(rec.InputLength, 1), OutputTokens: max(rec.OutputLength, 1)}, true
}

// WorkloadError returns the error that ended a Mooncake replay early, if any.
func WorkloadError(w Workload) error {
	if g, ok := w.(*mooncakeGen); ok {
		return g.Err
	}
	return nil
}
