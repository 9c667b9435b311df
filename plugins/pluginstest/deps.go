package pluginstest

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eppkit/eppkit/plugins"
)

// Epoch is the time a Clock from Deps starts at.
var Epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is a manual clock for tests: it stands still until Advance or Set.
// It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

var _ plugins.Clock = (*Clock)(nil)

// NewClock returns a clock standing at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// Deps returns dependencies for a plugin under test: Name "test", a debug
// logger writing to t.Log (silenced once the test ends, so a late background
// goroutine cannot fail it), a *Clock at Epoch, and a random source seeded
// with 1. Advance the clock with deps.Clock.(*pluginstest.Clock).Advance, or
// replace any field before calling Init.
func Deps(t testing.TB) plugins.Deps {
	w := &testWriter{t: t}
	t.Cleanup(w.stop)
	h := slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{} // the test log has its own timing
			}
			return a
		},
	})
	return plugins.Deps{
		Name:   "test",
		Logger: slog.New(h),
		Clock:  NewClock(Epoch),
		Rand:   plugins.NewRand(1),
	}
}

type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
