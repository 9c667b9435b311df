package plugins_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/plugins"
)

// prod is a configurable producer/consumer for graph tests.
type prod struct {
	P, C []plugins.AnyKey
}

func (p *prod) Produces() []plugins.AnyKey { return p.P }
func (p *prod) Consumes() []plugins.AnyKey { return p.C }

var (
	kTokens = plugins.NewKey[[]uint32]("tokens")
	kHashes = plugins.NewKey[[]uint64]("hashes")
	kMatch  = plugins.NewKey[[]int]("match")
)

func keys(ks ...plugins.AnyKey) []plugins.AnyKey { return ks }

func orderNames(g *plugins.Graph) string {
	var s []string
	for _, n := range g.Order {
		s = append(s, n.Name)
	}
	return strings.Join(s, ",")
}

func TestGraphOrdersTopologicallyAndStably(t *testing.T) {
	nodes := []plugins.Node{
		{Name: "scorer", Plugin: &prod{C: keys(kMatch)}},
		{Name: "matcher", Plugin: &prod{P: keys(kMatch), C: keys(kHashes)}},
		{Name: "independent", Plugin: &prod{P: keys(plugins.NewKey[int]("x"))}},
		{Name: "hasher", Plugin: &prod{P: keys(kHashes), C: keys(kTokens)}},
		{Name: "tokenizer", Plugin: &prod{P: keys(kTokens)}},
	}
	for range 20 { // never depends on map iteration
		g, err := plugins.ResolveGraph(plugins.NewRegistry(), nodes, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := orderNames(g); got != "independent,tokenizer,hasher,matcher" {
			t.Fatalf("order = %s", got)
		}
	}
}

type defTokenizer struct{}

func (*defTokenizer) Produces() []plugins.AnyKey { return keys(kTokens) }

type defHasher struct{}

func (*defHasher) Produces() []plugins.AnyKey { return keys(kHashes) }
func (*defHasher) Consumes() []plugins.AnyKey { return keys(kTokens) }

func TestGraphAddsDefaultProducersTransitively(t *testing.T) {
	reg := plugins.NewRegistry()
	plugins.Register[*defTokenizer](reg, "tokenizer", plugins.DefaultFor(kTokens))
	plugins.Register[*defHasher](reg, "hasher", plugins.DefaultFor(kHashes))
	build := func(info *plugins.Info) (any, error) { return reg.Build(info.Type, info.Type, nil) }
	nodes := []plugins.Node{{Name: "scorer", Plugin: &prod{C: keys(kHashes)}}}
	g, err := plugins.ResolveGraph(reg, nodes, build)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Added) != 2 || g.Added[0].Name != "hasher" || g.Added[1].Name != "tokenizer" {
		t.Fatalf("added = %+v", g.Added)
	}
	if got := orderNames(g); got != "tokenizer,hasher" {
		t.Fatalf("order = %s", got)
	}
}

func TestGraphErrors(t *testing.T) {
	cases := []struct {
		name  string
		nodes []plugins.Node
		want  []string
	}{
		{"missing producer", []plugins.Node{{Name: "s", Type: "my-scorer", Plugin: &prod{C: keys(kMatch)}}},
			[]string{`plugin "s" (type my-scorer)`, `"match"`, "no default producer"}},
		{"cycle", []plugins.Node{
			{Name: "a", Plugin: &prod{P: keys(kHashes), C: keys(kMatch)}},
			{Name: "b", Plugin: &prod{P: keys(kMatch), C: keys(kHashes)}},
		}, []string{"cycle", `plugin "a"`, `plugin "b"`}},
		{"type mismatch", []plugins.Node{
			{Name: "a", Plugin: &prod{P: keys(plugins.NewKey[int]("match"))}},
			{Name: "b", Plugin: &prod{C: keys(kMatch)}},
		}, []string{`plugin "a"`, `plugin "b"`, "int", "[]int"}},
		{"duplicate producer", []plugins.Node{
			{Name: "a", Plugin: &prod{P: keys(kMatch)}},
			{Name: "b", Plugin: &prod{P: keys(kMatch)}},
		}, []string{`plugin "a"`, `plugin "b"`, "produced by both"}},
	}
	for _, c := range cases {
		_, err := plugins.ResolveGraph(plugins.NewRegistry(), c.nodes, nil)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
	}
}

func TestGraphLongCycleNamesMembers(t *testing.T) {
	var nodes []plugins.Node
	ks := make([]plugins.AnyKey, 4)
	for i := range ks {
		ks[i] = plugins.NewKey[int](fmt.Sprint("k", i))
	}
	for i := range ks {
		nodes = append(nodes, plugins.Node{Name: fmt.Sprint("p", i), Plugin: &prod{P: keys(ks[i]), C: keys(ks[(i+1)%4])}})
	}
	_, err := plugins.ResolveGraph(plugins.NewRegistry(), nodes, nil)
	if err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("err = %v", err)
	}
	for i := range 4 {
		if !strings.Contains(err.Error(), fmt.Sprintf(`"p%d"`, i)) {
			t.Errorf("cycle error %q does not name p%d", err, i)
		}
	}
}
