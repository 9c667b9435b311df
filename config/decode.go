package config

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// decoder turns yaml.v3 nodes into the schema, strictly: every key must be
// known, every value must have the expected kind, and every error carries the
// YAML path and line of the node. It keeps going after an error so one run
// reports every problem.
type decoder struct {
	errList
	lineOffset int // added to node lines (a config embedded in a ConfigMap)
}

// field is one known key of a mapping and what to do with its value.
type field struct {
	name string
	set  func(v *yaml.Node, path string)
}

func (d *decoder) line(n *yaml.Node) int {
	if n == nil || n.Line == 0 {
		return 0
	}
	return n.Line + d.lineOffset
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.add(path, d.line(n), format, args...)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// kindOf describes a node for "want X, got Y" messages.
func kindOf(n *yaml.Node) string {
	n = resolve(n)
	switch {
	case isNull(n):
		return "null"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	}
	switch n.ShortTag() {
	case "!!str":
		return fmt.Sprintf("the string %q", n.Value)
	case "!!int", "!!float":
		return "the number " + n.Value
	case "!!bool":
		return "the boolean " + n.Value
	}
	return fmt.Sprintf("%s %q", n.ShortTag(), n.Value)
}

// object decodes the mapping n: each key must be one of fields; unknown and
// duplicate keys are errors; null values count as absent.
func (d *decoder) object(n *yaml.Node, path string, fields ...field) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping, got %s", kindOf(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, "mapping keys must be strings")
			continue
		}
		if k.ShortTag() == "!!merge" {
			d.fail(k, path, "merge keys (<<) are not supported")
			continue
		}
		key, fp := k.Value, join(path, k.Value)
		if seen[key] {
			d.fail(k, fp, "duplicate field")
			continue
		}
		seen[key] = true
		idx := slices.IndexFunc(fields, func(f field) bool { return f.name == key })
		if idx < 0 {
			names := make([]string, len(fields))
			for i, f := range fields {
				names[i] = f.name
			}
			d.fail(k, path, "unknown field %q%s", key, suggest(key, names))
			continue
		}
		if isNull(v) {
			continue
		}
		fields[idx].set(resolve(v), fp)
	}
}

// list decodes the sequence n, calling each for every element.
func (d *decoder) list(n *yaml.Node, path string, each func(i int, v *yaml.Node, path string)) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.fail(n, path, "want a list, got %s", kindOf(n))
		return
	}
	for i, v := range n.Content {
		each(i, resolve(v), index(path, i))
	}
}

func (d *decoder) str(n *yaml.Node, path string, dst *string) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		d.fail(n, path, "want a string, got %s", kindOf(n))
		return
	}
	*dst = n.Value
}

func (d *decoder) number(n *yaml.Node, path string) (float64, bool) {
	if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!int" || n.ShortTag() == "!!float") {
		var f float64
		if err := n.Decode(&f); err == nil {
			return f, true
		}
	}
	d.fail(n, path, "want a number, got %s", kindOf(n))
	return 0, false
}

func (d *decoder) integer(n *yaml.Node, path string, dst *int) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
		if err := n.Decode(dst); err == nil {
			return
		}
	}
	d.fail(n, path, "want an integer, got %s", kindOf(n))
}

func (d *decoder) boolean(n *yaml.Node, path string, dst *bool) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
		if err := n.Decode(dst); err == nil {
			return
		}
	}
	d.fail(n, path, "want true or false, got %s", kindOf(n))
}

func (d *decoder) quantity(n *yaml.Node, path string, dst **Quantity) {
	if n.Kind != yaml.ScalarNode || !slices.Contains([]string{"!!str", "!!int", "!!float"}, n.ShortTag()) {
		d.fail(n, path, "want a quantity like 1Gi, 500M or 100, got %s", kindOf(n))
		return
	}
	q, err := ParseQuantity(n.Value)
	if err != nil {
		d.fail(n, path, "%v", err)
		return
	}
	*dst = &q
}

func (d *decoder) duration(n *yaml.Node, path string, dst **time.Duration) {
	var s string
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		d.fail(n, path, "want a duration like \"60s\", got %s", kindOf(n))
		return
	}
	s = n.Value
	v, err := time.ParseDuration(s)
	if err != nil {
		d.fail(n, path, "invalid duration %q: want a duration like \"60s\" or \"1m30s\"", s)
		return
	}
	*dst = &v
}

// params converts a parameters node to JSON, keeping key order. Everything a
// JSON object can hold is accepted; NaN and infinities are not.
func (d *decoder) params(n *yaml.Node, path string) json.RawMessage {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping of parameters, got %s", kindOf(n))
		return nil
	}
	before := len(d.errs)
	b := d.appendJSON(nil, n, path, 0)
	if len(d.errs) > before {
		return nil
	}
	return b
}

const maxDepth = 100

func (d *decoder) appendJSON(b []byte, n *yaml.Node, path string, depth int) []byte {
	n = resolve(n)
	if depth > maxDepth {
		d.fail(n, path, "nested too deeply")
		return b
	}
	switch n.Kind {
	case yaml.MappingNode:
		b = append(b, '{')
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := resolve(n.Content[i])
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				d.fail(k, path, "parameter keys must be plain strings")
				continue
			}
			if seen[k.Value] {
				d.fail(k, join(path, k.Value), "duplicate field")
				continue
			}
			seen[k.Value] = true
			if len(seen) > 1 {
				b = append(b, ',')
			}
			kj, _ := json.Marshal(k.Value)
			b = append(b, kj...)
			b = append(b, ':')
			b = d.appendJSON(b, n.Content[i+1], join(path, k.Value), depth+1)
		}
		return append(b, '}')
	case yaml.SequenceNode:
		b = append(b, '[')
		for i, v := range n.Content {
			if i > 0 {
				b = append(b, ',')
			}
			b = d.appendJSON(b, v, index(path, i), depth+1)
		}
		return append(b, ']')
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return append(b, "null"...)
		case "!!bool", "!!int", "!!float":
			var v any
			if err := n.Decode(&v); err != nil {
				d.fail(n, path, "%v", err)
				return b
			}
			if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
				d.fail(n, path, "%s is not a valid parameter value", n.Value)
				return b
			}
			j, err := json.Marshal(v)
			if err != nil {
				d.fail(n, path, "%v", err)
				return b
			}
			return append(b, j...)
		default: // strings, timestamps, binary: the text as written
			j, _ := json.Marshal(n.Value)
			return append(b, j...)
		}
	}
	d.fail(n, path, "unsupported YAML node")
	return b
}

// suggest returns ` (did you mean "x"?)` for the closest known name, or the
// list of known names when none is close.
func suggest(key string, known []string) string {
	best, bestD := "", 1<<30
	lk := strings.ToLower(key)
	for _, k := range known {
		lo := strings.ToLower(k)
		dist := editDistance(lk, lo)
		if cp := commonPrefix(lk, lo); cp >= 3 && cp*3 >= min(len(lk), len(lo))*2 {
			dist = min(dist, 1) // an abbreviation or an extension: "params", "parameter"
		}
		if dist < bestD {
			best, bestD = k, dist
		}
	}
	if best != "" && bestD <= max(2, len(key)/4) {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return fmt.Sprintf(" (known fields: %s)", strings.Join(known, ", "))
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
