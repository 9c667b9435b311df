package plugins

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// Clock tells the time. Tests and the simulator inject a virtual clock.
type Clock interface{ Now() time.Time }

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Deps are the dependencies handed to a plugin's Init.
type Deps struct {
	Name   string       // the instance name
	Logger *slog.Logger // never nil after Deps.WithDefaults
	Clock  Clock
	// Rand is safe for concurrent use; for a fixed seed and a sequential caller
	// its outputs are deterministic.
	Rand *rand.Rand
}

// WithDefaults fills unset fields: a discarding logger, the system clock, and
// a random source seeded with 1.
func (d Deps) WithDefaults() Deps {
	if d.Logger == nil {
		d.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if d.Clock == nil {
		d.Clock = SystemClock{}
	}
	if d.Rand == nil {
		d.Rand = NewRand(1)
	}
	return d
}

// NewRand returns a concurrency-safe PCG random source for seed.
func NewRand(seed uint64) *rand.Rand {
	return rand.New(&lockedSource{src: rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)})
}

type lockedSource struct {
	mu  sync.Mutex
	src *rand.PCG
}

func (s *lockedSource) Uint64() uint64 {
	s.mu.Lock()
	v := s.src.Uint64()
	s.mu.Unlock()
	return v
}

// Initializer is implemented by plugins that need their dependencies or start
// background work. Init is called once, after Validate, before first use.
type Initializer interface {
	Init(ctx context.Context, deps Deps) error
}

// Closer is implemented by plugins that hold resources. Close is called once
// at shutdown, in reverse order of Init.
type Closer interface{ Close() error }

// Init calls p's Init if it has one.
func Init(ctx context.Context, p any, deps Deps) error {
	if i, ok := p.(Initializer); ok {
		return i.Init(ctx, deps)
	}
	return nil
}

// CloseAll closes every plugin that implements Closer, in reverse order, and
// joins the errors.
func CloseAll(ps []any) error {
	var errs []error
	for i := len(ps) - 1; i >= 0; i-- {
		if c, ok := ps[i].(Closer); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
