package sim

import (
	"context"
	"strconv"
	"sync"

	"github.com/eppkit/eppkit/requestcontrol"
)

// An arrival is a request prepared ahead of its arrival event: its body
// built and parsed by the Director's first stage (Director.Parse), and its
// prompt's block hashes computed for the servers.
type arrival struct {
	r      *Request
	parsed *requestcontrol.Parsed
	err    error // Parse's rejection
	hashes []uint64
	body   []byte // reused: nothing reads the body once the request is handled
}

// feederBatch is the number of arrivals handed over at once.
const feederBatch = 32

// feeder prepares arrivals on its own goroutine, in workload order, while
// the event loop simulates: the work it does is the same whatever runs
// beside it (the workload, the body, the parse read no simulated state), so
// the run stays deterministic, and on two cores the parse of the next
// requests overlaps the scheduling of the current one.
type feeder struct {
	out  chan []arrival
	free chan []arrival
	quit chan struct{}
	once sync.Once
	wg   sync.WaitGroup

	batch []arrival
	pos   int
}

func (c *cluster) startFeeder(ctx context.Context, wl Workload) *feeder {
	f := &feeder{out: make(chan []arrival, 4), free: make(chan []arrival, 6), quit: make(chan struct{})}
	for range cap(f.free) {
		f.free <- make([]arrival, feederBatch)
	}
	bt := c.opts.Server.BlockTokens
	f.wg.Go(func() {
		defer close(f.out)
		id, ended := 0, false // a Workload is not asked again once it ended
		for {
			var b []arrival
			select {
			case b = <-f.free:
			case <-f.quit:
				return
			}
			n := 0
			for ; n < feederBatch && !ended; n++ {
				r, ok := wl.Next()
				if ended = !ok; ended {
					break
				}
				id++
				r.OutputTokens = max(r.OutputTokens, 1)
				a := &b[n]
				a.body = appendBody(a.body[:0], r, bt)
				a.r, a.hashes = r, blockHashes(r, bt)
				a.parsed, a.err = c.d.Parse(ctx, &requestcontrol.Inbound{
					ID: strconv.Itoa(id), Path: "/v1/completions", Body: a.body})
			}
			b = b[:n]
			if len(b) == 0 {
				return
			}
			select {
			case f.out <- b:
			case <-f.quit:
				return
			}
		}
	})
	return f
}

// next returns the next arrival, or false at the end of the workload.
func (f *feeder) next() (*arrival, bool) {
	if f.pos == len(f.batch) {
		if f.batch != nil {
			f.free <- f.batch[:feederBatch]
		}
		b, ok := <-f.out
		if !ok {
			f.batch = nil
			return nil, false
		}
		f.batch, f.pos = b, 0
	}
	f.pos++
	return &f.batch[f.pos-1], true
}

// stop ends the feeder and waits for its goroutine.
func (f *feeder) stop() {
	f.once.Do(func() { close(f.quit) })
	f.wg.Wait()
}
