package config_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/scheduling"
)

// Test plugins: data producers forming a chain tokens → hashes → scorer, a
// recorder of lifecycle events, and plugins that fail.

var (
	kTokens = plugins.NewKey[[]uint32]("test/tokens")
	kHashes = plugins.NewKey[[]uint64]("test/hashes")
	kOrphan = plugins.NewKey[int]("test/orphan")
	kCycA   = plugins.NewKey[int]("test/a")
	kCycB   = plugins.NewKey[int]("test/b")
)

// events records lifecycle calls across the plugins of one test.
var events struct {
	sync.Mutex
	log []string
}

func record(format string, args ...any) {
	events.Lock()
	events.log = append(events.log, fmt.Sprintf(format, args...))
	events.Unlock()
}

func resetEvents() []string {
	events.Lock()
	defer events.Unlock()
	out := events.log
	events.log = nil
	return out
}

// lifecycle records Init (with the first draw of its random source) and Close.
type lifecycle struct{ name string }

func (l *lifecycle) Init(_ context.Context, d plugins.Deps) error {
	l.name = d.Name
	record("init %s rand=%d", d.Name, d.Rand.IntN(1_000_000))
	return nil
}

func (l *lifecycle) Close() error {
	record("close %s", l.name)
	return nil
}

type tokenizer struct{ lifecycle }

func (*tokenizer) Produces() []plugins.AnyKey { return []plugins.AnyKey{kTokens} }
func (*tokenizer) Produce(_ context.Context, req *scheduling.Request, _ []*scheduling.Endpoint) error {
	plugins.Set(&req.Data, kTokens, []uint32{1, 2, 3})
	return nil
}

type hasher struct{ lifecycle }

func (*hasher) Produces() []plugins.AnyKey { return []plugins.AnyKey{kHashes} }
func (*hasher) Consumes() []plugins.AnyKey { return []plugins.AnyKey{kTokens} }
func (*hasher) Produce(_ context.Context, req *scheduling.Request, _ []*scheduling.Endpoint) error {
	toks, _ := plugins.Get(&req.Data, kTokens)
	plugins.Set(&req.Data, kHashes, []uint64{uint64(len(toks))})
	return nil
}

// hashScorer consumes the hashes and scores every endpoint by whether they exist.
type hashScorer struct{ lifecycle }

func (*hashScorer) Consumes() []plugins.AnyKey { return []plugins.AnyKey{kHashes} }
func (*hashScorer) Score(_ context.Context, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	if _, ok := plugins.Get(&req.Data, kHashes); ok {
		for i := range scores {
			scores[i] = 1
		}
	}
}

// hook is a PreRequest recording the pick.
type hook struct{ lifecycle }

func (h *hook) PreRequest(_ context.Context, _ *scheduling.Request, res *scheduling.Result) {
	record("pre-request %s picked %s", h.name, res.PrimaryResult().Endpoints[0].Name)
}

type orphan struct{}

func (*orphan) Consumes() []plugins.AnyKey { return []plugins.AnyKey{kOrphan} }

type cycA struct{}

func (*cycA) Produces() []plugins.AnyKey { return []plugins.AnyKey{kCycA} }
func (*cycA) Consumes() []plugins.AnyKey { return []plugins.AnyKey{kCycB} }

type cycB struct{}

func (*cycB) Produces() []plugins.AnyKey { return []plugins.AnyKey{kCycB} }
func (*cycB) Consumes() []plugins.AnyKey { return []plugins.AnyKey{kCycA} }

type badInit struct{}

func (*badInit) Init(context.Context, plugins.Deps) error { return errors.New("no GPU here") }

// notScheduling is a plugin with no scheduling role.
type notScheduling struct{ lifecycle }

// testRegistry is the stock registry plus the test plugins.
func testRegistry() *plugins.Registry {
	r := std.Registry()
	plugins.Register[*tokenizer](r, "test-tokenizer", plugins.Category("producer"), plugins.DefaultFor(kTokens))
	plugins.Register[*hasher](r, "test-hasher", plugins.Category("producer"), plugins.DefaultFor(kHashes))
	plugins.Register[*hashScorer](r, "test-hash-scorer", plugins.Category("scorer"))
	plugins.Register[*hook](r, "test-hook")
	plugins.Register[*orphan](r, "test-orphan")
	plugins.Register[*cycA](r, "test-cyc-a")
	plugins.Register[*cycB](r, "test-cyc-b")
	plugins.Register[*badInit](r, "test-bad-init")
	plugins.Register[*notScheduling](r, "test-lifecycle")
	return r
}
