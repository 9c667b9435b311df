package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/eppkit/eppkit/scheduling"
)

// typeApproxPrefixProducer is the type of the approximate prefix producer
// (also the name under which the data graph auto-creates it).
const typeApproxPrefixProducer = scheduling.DefaultPrefixProducer

// prefixIndexParams maps the prefix-index parameters older GAIE and llm-d
// configurations give prefix-cache-scorer to the approx producer's names.
var prefixIndexParams = map[string]string{
	"hashBlockSize":          "blockSizeTokens",
	"blockSize":              "blockSizeTokens",
	"blockSizeTokens":        "blockSizeTokens",
	"maxPrefixBlocksToMatch": "maxPrefixBlocksToMatch",
	"maxPrefixTokensToMatch": "maxPrefixTokensToMatch",
	"lruCapacityPerServer":   "lruCapacityPerServer",
	"autoTune":               "autoTune",
}

// moveScorerPrefixParams loads the older layout in which prefix-cache-scorer
// holds the prefix index's parameters: it moves them, renamed, to the
// approx-prefix-cache-producer the scorer reads (its
// prefixMatchInfoProducerName), declaring that producer when the
// configuration does not, and returns one warning per scorer. Two sources
// giving one parameter different values, or a producer of another type, is
// an error naming the paths. Every other parameter stays where it is and is
// decoded strictly by Build.
func moveScorerPrefixParams(cfg *Config) ([]Warning, error) {
	var l errList
	var warns []Warning
	// setBy records which YAML path gave each producer parameter its value.
	setBy := map[string]map[string]string{}
	n := len(cfg.Plugins) // producers declared here are not scorers
	for i := 0; i < n; i++ {
		s := &cfg.Plugins[i]
		if s.Type != typePrefixCacheScorer {
			continue
		}
		params, ok := splitParams(s.Parameters)
		if !ok {
			continue // not an object: Build reports it
		}
		producer := typeApproxPrefixProducer
		var kept, moved []param
		var names []string
		for _, p := range params {
			canon, isIndex := prefixIndexParams[p.key]
			switch {
			case p.key == "prefixMatchInfoProducerName":
				var name string
				if json.Unmarshal(p.val, &name) == nil && name != "" {
					producer = name
				}
				kept = append(kept, p)
			case isIndex:
				moved = append(moved, param{canon, p.val, p.key})
				if canon != p.key {
					names = append(names, fmt.Sprintf("%s (as %s)", p.key, canon))
				} else {
					names = append(names, p.key)
				}
			default:
				kept = append(kept, p)
			}
		}
		if len(moved) == 0 {
			continue
		}
		spath := join(index("plugins", i), "parameters")
		j := pluginIndex(cfg, producer)
		if j >= 0 && cfg.Plugins[j].Type != typeApproxPrefixProducer {
			keys := make([]string, len(moved))
			for k, m := range moved {
				keys[k] = m.from
			}
			l.add(join(spath, moved[0].from), s.line,
				"%s: prefix index parameters of type %s, but this scorer reads plugin %q (plugins[%d], type %s): set them in that plugin's own parameters, or remove them",
				strings.Join(keys, ", "), typeApproxPrefixProducer, producer, j, cfg.Plugins[j].Type)
			continue
		}
		where := fmt.Sprintf(", plugins[%d]", j)
		if j < 0 {
			cfg.Plugins = append(cfg.Plugins, PluginSpec{Name: producer, Type: typeApproxPrefixProducer,
				line: s.line, origin: fromCompat, source: index("plugins", i)})
			j = len(cfg.Plugins) - 1
			s = &cfg.Plugins[i] // the append may have moved the slice
			where = ", declared for it"
		}
		if setBy[producer] == nil {
			setBy[producer] = map[string]string{}
			if cfg.Plugins[j].origin == fromUser {
				if own, ok := splitParams(cfg.Plugins[j].Parameters); ok {
					for _, p := range own {
						setBy[producer][p.key] = join(join(index("plugins", j), "parameters"), p.key)
					}
				}
			}
		}
		target, ok := splitParams(cfg.Plugins[j].Parameters)
		if !ok {
			continue // the producer's own parameters are not an object: Build reports it
		}
		conflict := false
		for _, m := range moved {
			from := join(spath, m.from)
			k := paramIndex(target, m.key)
			switch {
			case k < 0:
				target = append(target, param{key: m.key, val: m.val})
				setBy[producer][m.key] = from
			case !sameJSON(target[k].val, m.val):
				l.add(from, s.line, "%s conflicts with %s at %s: both are plugin %q's %s; keep one",
					jsonText(m.val), jsonText(target[k].val), setBy[producer][m.key], producer, m.key)
				conflict = true
			}
		}
		if conflict {
			continue
		}
		cfg.Plugins[j].Parameters = joinParams(target)
		s.Parameters = joinParams(kept)
		warns = append(warns, Warning{Path: spath, Line: s.line, Message: fmt.Sprintf(
			"prefix index parameters %s moved to plugin %q (type %s%s): in eppkit the producer keeps the index",
			strings.Join(names, ", "), producer, typeApproxPrefixProducer, where)})
	}
	return warns, l.err()
}

// param is one top-level parameter; from is the key it was written under.
type param struct {
	key  string
	val  json.RawMessage
	from string
}

// splitParams returns the top-level parameters of a JSON object in order;
// no parameters is an empty list. ok is false when raw is not an object.
func splitParams(raw json.RawMessage) (ps []param, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, true
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		ps = append(ps, param{key: key, val: v, from: key})
	}
	if _, err := dec.Token(); err != nil {
		return nil, false
	}
	return ps, true
}

// joinParams is splitParams' inverse; no parameters is nil.
func joinParams(ps []param) json.RawMessage {
	if len(ps) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(p.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(p.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

func paramIndex(ps []param, key string) int {
	for i, p := range ps {
		if p.key == key {
			return i
		}
	}
	return -1
}

func pluginIndex(cfg *Config, name string) int {
	for i, p := range cfg.Plugins {
		if p.Name == name {
			return i
		}
	}
	return -1
}

// sameJSON reports whether a and b hold the same value (64 and 64.0 do).
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

func jsonText(v json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return string(v)
	}
	return b.String()
}
