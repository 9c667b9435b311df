package plugins_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eppkit/eppkit/plugins"
)

type thing struct {
	Threshold int               `json:"threshold" doc:"queue length that counts as full"`
	Interval  plugins.Duration  `json:"interval"`
	Labels    map[string]string `json:"labels"`
	secret    int
}

func (t *thing) SetDefaults() { t.Threshold = 128 }

func (t *thing) Validate() error {
	if t.Threshold <= 0 {
		return errors.New("threshold: must be > 0")
	}
	return nil
}

func newReg() *plugins.Registry {
	r := plugins.NewRegistry()
	plugins.Register[*thing](r, "thing", plugins.Category("scorer"), plugins.Description("a test plugin"))
	return r
}

func TestBuildDefaultsAndDecode(t *testing.T) {
	r := newReg()
	v, err := r.Build("thing", "t1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.(*thing).Threshold; got != 128 {
		t.Fatalf("default threshold = %d, want 128", got)
	}
	v, err = r.Build("thing", "t1", []byte(`{"threshold": 5, "interval": "50ms"}`))
	if err != nil {
		t.Fatal(err)
	}
	if th := v.(*thing); th.Threshold != 5 || time.Duration(th.Interval) != 50*time.Millisecond {
		t.Fatalf("decoded %+v", th)
	}
}

func TestBuildErrors(t *testing.T) {
	r := newReg()
	cases := []struct {
		typ, params string
		want        []string
	}{
		{"nope", ``, []string{`plugin "x"`, "unknown plugin type", `"nope"`}},
		{"thing", `{"threshhold": 3}`, []string{`plugin "x" (type thing)`, `unknown field "threshhold"`}},
		{"thing", `{"threshold": "many"}`, []string{`field "threshold"`, "string"}},
		{"thing", `{"threshold": 0}`, []string{`plugin "x" (type thing)`, "must be > 0"}},
		{"thing", `{"interval": "soon"}`, []string{`invalid duration "soon"`}},
		{"thing", `[1,2]`, []string{`plugin "x"`}},
	}
	for _, c := range cases {
		_, err := r.Build(c.typ, "x", []byte(c.params))
		if err == nil {
			t.Errorf("%s %s: no error", c.typ, c.params)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %s: error %q lacks %q", c.typ, c.params, err, w)
			}
		}
	}
	if _, err := r.Build("nope", "x", nil); !errors.Is(err, plugins.ErrUnknownType) {
		t.Errorf("unknown type error %v does not wrap ErrUnknownType", err)
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	r := newReg()
	defer func() {
		if recover() == nil {
			t.Fatal("second Register did not panic")
		}
	}()
	plugins.Register[*thing](r, "thing")
}

func TestParamsDocs(t *testing.T) {
	info, ok := newReg().Lookup("thing")
	if !ok {
		t.Fatal("thing not registered")
	}
	ps := info.Params()
	if len(ps) != 3 {
		t.Fatalf("params = %+v, want 3 exported fields", ps)
	}
	if ps[0].Name != "threshold" || ps[0].Default != "128" || ps[0].Doc == "" || ps[0].Type != "int" {
		t.Fatalf("threshold param = %+v", ps[0])
	}
	if info.Category != "scorer" || info.Description != "a test plugin" {
		t.Fatalf("info = %+v", info)
	}
}

// nested has a mapping parameter; its fields' defaults come from the
// parent's default.
type nested struct {
	Conn struct {
		Addr    string           `json:"addr" doc:"where to connect"`
		Timeout plugins.Duration `json:"timeout" doc:"dial timeout"`
	} `json:"conn" doc:"connection settings"`
}

func (n *nested) SetDefaults() { n.Conn.Addr = "localhost:6379" }

func TestParamsMappingFieldsFormulaGoType(t *testing.T) {
	r := plugins.NewRegistry()
	plugins.Register[*nested](r, "nested", plugins.Formula("1 − x"))
	info, _ := r.Lookup("nested")
	ps := info.Params()
	if len(ps) != 1 || ps[0].Name != "conn" || len(ps[0].Fields) != 2 {
		t.Fatalf("params = %+v, want conn with two fields", ps)
	}
	addr, timeout := ps[0].Fields[0], ps[0].Fields[1]
	if addr.Name != "addr" || addr.Default != `"localhost:6379"` || addr.Doc != "where to connect" {
		t.Errorf("conn.addr = %+v", addr)
	}
	if timeout.Type != "plugins.Duration" || timeout.Fields != nil {
		t.Errorf("a Duration is a value, not a mapping: %+v", timeout)
	}
	if info.Formula != "1 − x" {
		t.Errorf("formula = %q", info.Formula)
	}
	if got := info.GoType().String(); got != "*plugins_test.nested" {
		t.Errorf("GoType = %s", got)
	}
}

func TestValues(t *testing.T) {
	kInt := plugins.NewKey[int]("n")
	kStr := plugins.NewKey[string]("s")
	var v plugins.Values
	if _, ok := plugins.Get(&v, kInt); ok {
		t.Fatal("empty Values has n")
	}
	plugins.Set(&v, kInt, 3)
	plugins.Set(&v, kStr, "x")
	plugins.Set(&v, kInt, 4)
	if n, ok := plugins.Get(&v, kInt); !ok || n != 4 {
		t.Fatalf("n = %d %v", n, ok)
	}
	c := v.Clone()
	v.Delete("n")
	if _, ok := plugins.Get(&v, kInt); ok {
		t.Fatal("deleted key still present")
	}
	if s, _ := plugins.Get(&v, kStr); s != "x" {
		t.Fatalf("s = %q", s)
	}
	if n, _ := plugins.Get(&c, kInt); n != 4 {
		t.Fatal("clone shares storage")
	}
	// Same name, other type: Get reports absence rather than panicking.
	if _, ok := plugins.Get(&v, plugins.NewKey[int]("s")); ok {
		t.Fatal("type-mismatched get succeeded")
	}
	v.Reset()
	if _, ok := plugins.Get(&v, kStr); ok {
		t.Fatal("reset kept values")
	}
}

func TestValuesNoAllocs(t *testing.T) {
	k := plugins.NewKey[*int]("p")
	x := 1
	var v plugins.Values
	plugins.Set(&v, k, &x)
	if n := testing.AllocsPerRun(100, func() {
		plugins.Set(&v, k, &x)
		_, _ = plugins.Get(&v, k)
	}); n != 0 {
		t.Fatalf("allocs = %v", n)
	}
}

func TestRandDeterministic(t *testing.T) {
	a, b := plugins.NewRand(7), plugins.NewRand(7)
	for range 100 {
		if a.Uint64() != b.Uint64() {
			t.Fatal("same seed, different streams")
		}
	}
	if plugins.NewRand(7).Uint64() == plugins.NewRand(8).Uint64() {
		t.Fatal("seeds 7 and 8 agree")
	}
}

type closer struct {
	id  int
	log *[]int
}

func (c *closer) Close() error {
	*c.log = append(*c.log, c.id)
	if c.id == 1 {
		return errors.New("boom")
	}
	return nil
}

func TestCloseAllReverseOrder(t *testing.T) {
	var log []int
	err := plugins.CloseAll([]any{&closer{1, &log}, "not a closer", &closer{2, &log}})
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v", err)
	}
	if len(log) != 2 || log[0] != 2 || log[1] != 1 {
		t.Fatalf("close order %v", log)
	}
}
