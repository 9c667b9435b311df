package plugins

import (
	"fmt"
	"strings"
)

// Producer is implemented by plugins that write data keys (on the request or
// on endpoints) for other plugins to read.
type Producer interface{ Produces() []AnyKey }

// Consumer is implemented by plugins that read data keys produced by others.
type Consumer interface{ Consumes() []AnyKey }

// Node is one configured plugin instance taking part in the data graph.
type Node struct {
	Name   string
	Type   string
	Plugin any
}

// Graph is the checked data-dependency graph of a configuration.
type Graph struct {
	// Nodes are the configured nodes followed by the auto-created ones.
	Nodes []Node
	// Added are the default producers the graph created, in creation order.
	Added []Node
	// Order lists the producer nodes in a deterministic topological order:
	// producers before their consumers, ties by position in Nodes.
	Order []Node
}

type keyOwner struct {
	node int
	key  AnyKey
}

// BuildFunc creates a default producer of the given type (no parameters).
type BuildFunc func(info *Info) (any, error)

// ResolveGraph checks the data keys of nodes, adds the registered default
// producer for every consumed key nobody produces (transitively), rejects
// duplicate producers, type mismatches and cycles with errors naming both
// plugins, and orders the producers.
func ResolveGraph(reg *Registry, nodes []Node, build BuildFunc) (*Graph, error) {
	g := &Graph{Nodes: append([]Node(nil), nodes...)}
	produced := map[string]keyOwner{}
	indexProducer := func(i int) error {
		p, ok := g.Nodes[i].Plugin.(Producer)
		if !ok {
			return nil
		}
		for _, k := range p.Produces() {
			if prev, dup := produced[k.KeyName()]; dup {
				return fmt.Errorf("data key %q is produced by both %s and %s: configure one of them",
					k.KeyName(), g.describe(prev.node), g.describe(i))
			}
			produced[k.KeyName()] = keyOwner{i, k}
		}
		return nil
	}
	for i := range g.Nodes {
		if err := indexProducer(i); err != nil {
			return nil, err
		}
	}
	// Add defaults until every consumed key has a producer. New nodes are
	// appended, so the loop also visits their consumed keys (transitivity).
	for i := 0; i < len(g.Nodes); i++ {
		c, ok := g.Nodes[i].Plugin.(Consumer)
		if !ok {
			continue
		}
		for _, k := range c.Consumes() {
			if owner, ok := produced[k.KeyName()]; ok {
				if owner.key.KeyType() != k.KeyType() {
					return nil, fmt.Errorf("data key %q: %s produces %v but %s consumes %v",
						k.KeyName(), g.describe(owner.node), owner.key.KeyType(), g.describe(i), k.KeyType())
				}
				continue
			}
			info, ok := reg.DefaultProducer(k.KeyName())
			if !ok || build == nil {
				return nil, fmt.Errorf("%s consumes data key %q but no configured plugin produces it and no default producer is registered: add a producer of %q to plugins",
					g.describe(i), k.KeyName(), k.KeyName())
			}
			for _, n := range g.Nodes {
				if n.Name == info.Type {
					return nil, fmt.Errorf("%s consumes data key %q; its default producer %q cannot be added because a plugin of that name exists",
						g.describe(i), k.KeyName(), info.Type)
				}
			}
			p, err := build(info)
			if err != nil {
				return nil, fmt.Errorf("default producer %q for %s: %w", info.Type, g.describe(i), err)
			}
			n := Node{Name: info.Type, Type: info.Type, Plugin: p}
			g.Nodes = append(g.Nodes, n)
			g.Added = append(g.Added, n)
			if err := indexProducer(len(g.Nodes) - 1); err != nil {
				return nil, err
			}
			if owner := produced[k.KeyName()]; owner.node != len(g.Nodes)-1 {
				return nil, fmt.Errorf("default producer %q registered for %q does not produce it", info.Type, k.KeyName())
			}
			if owner := produced[k.KeyName()]; owner.key.KeyType() != k.KeyType() {
				return nil, fmt.Errorf("data key %q: %s produces %v but %s consumes %v",
					k.KeyName(), g.describe(owner.node), owner.key.KeyType(), g.describe(i), k.KeyType())
			}
		}
	}
	order, err := g.sort(produced)
	if err != nil {
		return nil, err
	}
	g.Order = order
	return g, nil
}

func (g *Graph) describe(i int) string {
	n := g.Nodes[i]
	if n.Name == n.Type || n.Type == "" {
		return fmt.Sprintf("plugin %q", n.Name)
	}
	return fmt.Sprintf("plugin %q (type %s)", n.Name, n.Type)
}

// sort is Kahn's algorithm over producers, always taking the ready producer
// that comes first in configuration order, so the order never depends on map
// iteration.
func (g *Graph) sort(produced map[string]keyOwner) ([]Node, error) {
	isProducer := make([]bool, len(g.Nodes))
	deps := make([][]int, len(g.Nodes)) // deps[i] = producers node i waits for
	for i, n := range g.Nodes {
		if p, ok := n.Plugin.(Producer); ok {
			isProducer[i] = len(p.Produces()) > 0
		}
		c, ok := n.Plugin.(Consumer)
		if !ok || !isProducer[i] {
			continue
		}
		for _, k := range c.Consumes() {
			if o := produced[k.KeyName()]; o.node != i {
				deps[i] = append(deps[i], o.node)
			}
		}
	}
	done := make([]bool, len(g.Nodes))
	var order []Node
	for {
		progressed := false
		for i := range g.Nodes {
			if !isProducer[i] || done[i] {
				continue
			}
			ready := true
			for _, d := range deps[i] {
				ready = ready && done[d]
			}
			if ready {
				done[i], progressed = true, true
				order = append(order, g.Nodes[i])
				break // restart from the first node: lowest index first
			}
		}
		if !progressed {
			break
		}
	}
	for i := range g.Nodes {
		if isProducer[i] && !done[i] {
			return nil, g.cycleError(i, deps, done)
		}
	}
	return order, nil
}

func (g *Graph) cycleError(start int, deps [][]int, done []bool) error {
	// Walk unfinished dependencies until a node repeats.
	seen := map[int]int{}
	var path []int
	for i := start; ; {
		if at, ok := seen[i]; ok {
			path = path[at:]
			break
		}
		seen[i] = len(path)
		path = append(path, i)
		for _, d := range deps[i] {
			if !done[d] {
				i = d
				break
			}
		}
	}
	names := make([]string, 0, len(path)+1)
	for _, i := range append(path, path[0]) {
		names = append(names, fmt.Sprintf("%q", g.Nodes[i].Name))
	}
	return fmt.Errorf("data dependency cycle between %s and %s: %s (each consumes what the next produces)",
		g.describe(path[0]), g.describe(path[len(path)-1]), strings.Join(names, " <- "))
}
