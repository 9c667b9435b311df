package pluginstest_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
)

// fakeTB captures what the kit does with a testing.TB.
type fakeTB struct {
	testing.TB
	mu       sync.Mutex
	logs     []string
	fatal    string
	cleanups []func()
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Log(args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range args {
		f.logs = append(f.logs, a.(string))
	}
}
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = format
	runtime.Goexit()
}
func (f *fakeTB) Errorf(format string, args ...any) { f.fatal = format }

func (f *fakeTB) cleanup() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// run calls fn with f in its own goroutine, so Fatalf can stop it.
func (f *fakeTB) run(fn func()) {
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	<-done
}

func TestDepsLogToTheTest(t *testing.T) {
	f := &fakeTB{TB: t}
	d := pluginstest.Deps(f)
	d.Logger.Debug("scraped", "endpoint", "a")
	f.cleanup()
	d.Logger.Info("after the test")
	if len(f.logs) != 1 || f.logs[0] != `level=DEBUG msg=scraped endpoint=a` {
		t.Errorf("logs = %q", f.logs)
	}
	if d.Name != "test" {
		t.Errorf("Name = %q", d.Name)
	}
}

func TestDepsRandIsSeeded(t *testing.T) {
	a, b := pluginstest.Deps(t), pluginstest.Deps(t)
	for range 10 {
		if x, y := a.Rand.Uint64(), b.Rand.Uint64(); x != y {
			t.Fatal("two Deps differ in their random sequence")
		}
	}
	if got, want := pluginstest.Deps(t).Rand.Uint64(), plugins.NewRand(1).Uint64(); got != want {
		t.Errorf("Deps.Rand is not seeded with 1: %d, want %d", got, want)
	}
}

func TestClock(t *testing.T) {
	d := pluginstest.Deps(t)
	clk := d.Clock.(*pluginstest.Clock)
	if !clk.Now().Equal(pluginstest.Epoch) {
		t.Errorf("starts at %v", clk.Now())
	}
	if got := clk.Advance(90 * time.Second); !got.Equal(pluginstest.Epoch.Add(90*time.Second)) || !clk.Now().Equal(got) {
		t.Errorf("Advance = %v, Now = %v", got, clk.Now())
	}
	at := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	clk.Set(at)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				clk.Advance(time.Millisecond)
				_ = clk.Now()
			}
		})
	}
	wg.Wait()
	if got := clk.Now(); !got.Equal(at.Add(400 * time.Millisecond)) {
		t.Errorf("after concurrent advances: %v", got)
	}
}

// probe is a plugin recording its lifecycle.
type probe struct {
	Size  int    `json:"size" doc:"a size"`
	Label string `json:"label,omitempty" doc:"a label"`

	inits, closes int
	deps          plugins.Deps
}

func (p *probe) SetDefaults() { p.Size = 8 }
func (p *probe) Validate() error {
	if p.Size <= 0 {
		return errors.New("probe: size: must be > 0")
	}
	return nil
}
func (p *probe) Init(_ context.Context, d plugins.Deps) error { p.inits++; p.deps = d; return nil }
func (p *probe) Close() error                                 { p.closes++; return nil }

func registry() *plugins.Registry {
	reg := plugins.NewRegistry()
	plugins.Register[*probe](reg, "probe")
	plugins.Register[*badDefaults](reg, "bad-defaults")
	plugins.Register[*lossyParams](reg, "lossy-params")
	plugins.Register[*failsInit](reg, "fails-init")
	plugins.Register[*lenient](reg, "lenient")
	return reg
}

func TestBuild(t *testing.T) {
	var p *probe
	t.Run("inner", func(t *testing.T) {
		p = pluginstest.Build[*probe](t, registry(), "probe", `{"size": 3}`)
		if p.Size != 3 || p.inits != 1 || p.closes != 0 || p.deps.Clock == nil {
			t.Errorf("built %+v", p)
		}
	})
	if p.closes != 1 {
		t.Errorf("Close not called at cleanup: %d", p.closes)
	}

	for _, tc := range []struct{ typ, params, want string }{
		{"probe", `{"size": 0}`, "size: must be > 0"},
		{"probe", `{"sise": 1}`, `unknown field "sise"`},
		{"nope", ``, "unknown plugin type"},
		{"fails-init", ``, "Init"},
	} {
		f := &fakeTB{TB: t}
		f.run(func() { pluginstest.Build[*probe](f, registry(), tc.typ, tc.params) })
		if f.fatal == "" {
			t.Errorf("%s %s: no failure", tc.typ, tc.params)
		}
	}
	f := &fakeTB{TB: t}
	f.run(func() { pluginstest.Build[*failsInit](f, registry(), "probe", "") })
	if !strings.Contains(f.fatal, "which is not a") {
		t.Errorf("wrong type: %q", f.fatal)
	}
}

func TestLifecyclePasses(t *testing.T) {
	pluginstest.TestLifecycle(t, registry(), "probe")
}

// badDefaults fails Validate with its own defaults.
type badDefaults struct {
	N int `json:"n"`
}

func (b *badDefaults) Validate() error { return errors.New("bad-defaults: n: must be set") }

// lossyParams forgets its defaults when decoding.
type lossyParams struct {
	N int `json:"n"`
}

func (l *lossyParams) SetDefaults() { l.N = 5 }
func (l *lossyParams) UnmarshalJSON(b []byte) error {
	var raw map[string]int
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*l = lossyParams{N: raw["n"]}
	return nil
}

// lenient accepts unknown fields.
type lenient struct{}

func (*lenient) UnmarshalJSON([]byte) error { return nil }

// failsInit fails Init.
type failsInit struct{}

func (*failsInit) Init(context.Context, plugins.Deps) error { return errors.New("boom") }

const brokenEnv = "PLUGINSTEST_BROKEN_TYPE"

// TestLifecycleHelper runs TestLifecycle on a broken type when started by
// TestLifecycleCatchesBrokenTypes; it must fail.
func TestLifecycleHelper(t *testing.T) {
	typ := os.Getenv(brokenEnv)
	if typ == "" {
		t.Skip("run by TestLifecycleCatchesBrokenTypes")
	}
	pluginstest.TestLifecycle(t, registry(), typ)
}

func TestLifecycleCatchesBrokenTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a test process per broken type")
	}
	for typ, want := range map[string]string{
		"bad-defaults": "must be set",
		"lossy-params": "want the defaults",
		"lenient":      "unknown field",
		"fails-init":   "Init: boom",
		"missing":      "is not registered",
	} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestLifecycleHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+typ)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("TestLifecycle passed a broken type:\n%s", out)
			}
			if !strings.Contains(string(out), want) {
				t.Errorf("the failure does not say %q:\n%.3000s", want, out)
			}
		})
	}
}
