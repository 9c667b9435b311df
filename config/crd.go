package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/eppkit/eppkit/requestcontrol"
)

// Resource kinds read by LoadObjectives and LoadModelRewrites.
const (
	KindInferenceObjective    = "InferenceObjective"
	KindInferenceModelRewrite = "InferenceModelRewrite"
)

// resourceGroups are the API groups whose InferenceObjective and
// InferenceModelRewrite resources are accepted, in any version.
var resourceGroups = []string{"llm-d.ai", "inference.networking.x-k8s.io", "inference.networking.k8s.io"}

// resource is one decoded document: its kind, metadata.name and spec node.
type resource struct {
	kind, name string
	spec       *yaml.Node
	path       string // YAML path prefix for errors ("" or "documents[i]")
	line       int
}

// loadResources splits a YAML stream of Kubernetes resources of kind (a
// "List" document's items count as documents) and checks each one's
// apiVersion and kind. metadata is read for its name only; status is
// ignored.
func loadResources(data []byte, kind string) ([]resource, error) {
	var docs []*yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, &Error{Err: fmt.Errorf("invalid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))}
		}
		root := &n
		if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
			root = root.Content[0]
		}
		if isNull(root) {
			continue
		}
		docs = append(docs, resolve(root))
	}
	d := &decoder{}
	var out []resource
	var one func(n *yaml.Node, path string)
	one = func(n *yaml.Node, path string) {
		r := resource{path: path, line: d.line(n)}
		var apiVersion string
		var items *yaml.Node
		d.object(n, path,
			field{"apiVersion", func(v *yaml.Node, p string) { d.str(v, p, &apiVersion) }},
			field{"kind", func(v *yaml.Node, p string) { d.str(v, p, &r.kind) }},
			field{"metadata", func(v *yaml.Node, p string) {
				if v.Kind != yaml.MappingNode {
					d.fail(v, p, "want a mapping, got %s", kindOf(v))
					return
				}
				for i := 0; i+1 < len(v.Content); i += 2 {
					if v.Content[i].Value == "name" {
						d.str(resolve(v.Content[i+1]), join(p, "name"), &r.name)
					}
				}
			}},
			field{"spec", func(v *yaml.Node, p string) { r.spec = v }},
			field{"status", func(*yaml.Node, string) {}},
			field{"items", func(v *yaml.Node, p string) { items = v }},
		)
		if r.kind == "List" || strings.HasSuffix(r.kind, "List") && items != nil {
			d.list(items, join(path, "items"), func(i int, v *yaml.Node, p string) { one(v, p) })
			return
		}
		group, _, _ := strings.Cut(apiVersion, "/")
		switch {
		case r.kind != kind:
			d.fail(n, join(path, "kind"), "want %s, got %q", kind, r.kind)
		case !strings.Contains(apiVersion, "/") || !contains(resourceGroups, group):
			d.fail(n, join(path, "apiVersion"), "unsupported apiVersion %q: want a version of %s", apiVersion, strings.Join(resourceGroups, ", "))
		case r.name == "":
			d.fail(n, join(path, "metadata.name"), "missing")
		default:
			out = append(out, r)
		}
	}
	for i, n := range docs {
		path := ""
		if len(docs) > 1 {
			path = index("documents", i)
		}
		one(n, path)
	}
	return out, d.err()
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// LoadObjectives reads InferenceObjective resources (YAML documents, as
// kubectl prints them) into the objective table: metadata.name → spec.priority
// (0 when unset). spec.poolRef is accepted and not checked. Errors carry the
// YAML path and line; a name defined twice is an error.
func LoadObjectives(data []byte) (requestcontrol.Objectives, error) {
	rs, err := loadResources(data, KindInferenceObjective)
	if err != nil {
		return nil, err
	}
	d := &decoder{}
	out := requestcontrol.Objectives{}
	for _, r := range rs {
		prio := 0
		d.object(r.spec, join(r.path, "spec"),
			field{"priority", func(v *yaml.Node, p string) { d.integer(v, p, &prio) }},
			field{"poolRef", func(v *yaml.Node, p string) { d.poolRef(v, p) }},
		)
		if _, dup := out[r.name]; dup {
			d.add(join(r.path, "metadata.name"), r.line, "InferenceObjective %q is defined twice", r.name)
		}
		out[r.name] = prio
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	return out, nil
}

// LoadModelRewrites reads InferenceModelRewrite resources (YAML documents)
// in the shape of the CRD spec: poolRef, rules[]{matches[]{model{type,
// value}}, targets[]{modelRewrite, weight}}. A rule without matches matches
// every model; match type Exact (the default) is the only one. Resources
// keep their order, which decides between equal matches. Compile the result
// with requestcontrol.NewModelRewrites.
func LoadModelRewrites(data []byte) ([]requestcontrol.ModelRewrite, error) {
	rs, err := loadResources(data, KindInferenceModelRewrite)
	if err != nil {
		return nil, err
	}
	d := &decoder{}
	var out []requestcontrol.ModelRewrite
	for _, r := range rs {
		mr := requestcontrol.ModelRewrite{Name: r.name}
		sp := join(r.path, "spec")
		d.object(r.spec, sp,
			field{"poolRef", func(v *yaml.Node, p string) { d.poolRef(v, p) }},
			field{"rules", func(v *yaml.Node, p string) {
				d.list(v, p, func(i int, v *yaml.Node, p string) {
					var rule requestcontrol.RewriteRule
					d.object(v, p,
						field{"matches", func(v *yaml.Node, p string) {
							d.list(v, p, func(i int, v *yaml.Node, p string) {
								d.object(v, p, field{"model", func(v *yaml.Node, p string) {
									var typ, value string
									d.object(v, p,
										field{"type", func(v *yaml.Node, p string) {
											if d.str(v, p, &typ); typ != "" && typ != "Exact" {
												d.fail(v, p, "unsupported match type %q: want Exact", typ)
											}
										}},
										field{"value", func(v *yaml.Node, p string) { d.str(v, p, &value) }},
									)
									if value == "" {
										d.fail(v, join(p, "value"), "missing")
										return
									}
									rule.Models = append(rule.Models, value)
								}})
							})
						}},
						field{"targets", func(v *yaml.Node, p string) {
							d.list(v, p, func(i int, v *yaml.Node, p string) {
								var t requestcontrol.RewriteTarget
								d.object(v, p,
									field{"modelRewrite", func(v *yaml.Node, p string) { d.str(v, p, &t.Model) }},
									field{"weight", func(v *yaml.Node, p string) {
										if d.integer(v, p, &t.Weight); t.Weight < 0 {
											d.fail(v, p, "must be ≥ 0")
										}
									}},
								)
								if t.Model == "" {
									d.fail(v, join(p, "modelRewrite"), "missing")
								}
								rule.Targets = append(rule.Targets, t)
							})
						}},
					)
					if len(rule.Targets) == 0 {
						d.fail(v, join(p, "targets"), "missing: a rule needs at least one target")
					}
					mr.Rules = append(mr.Rules, rule)
				})
			}},
		)
		if len(mr.Rules) == 0 {
			d.add(join(sp, "rules"), r.line, "missing")
		}
		out = append(out, mr)
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	return out, nil
}

// poolRef accepts a poolRef mapping (group, kind, name); it is not checked
// against a pool: the files given are the ones that apply.
func (d *decoder) poolRef(v *yaml.Node, p string) {
	var s string
	d.object(v, p,
		field{"group", func(v *yaml.Node, p string) { d.str(v, p, &s) }},
		field{"kind", func(v *yaml.Node, p string) { d.str(v, p, &s) }},
		field{"name", func(v *yaml.Node, p string) { d.str(v, p, &s) }},
	)
}

// LoadObjectivesFile reads the file at path with LoadObjectives.
func LoadObjectivesFile(path string) (requestcontrol.Objectives, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return LoadObjectives(data)
}

// LoadModelRewritesFile reads the file at path with LoadModelRewrites.
func LoadModelRewritesFile(path string) ([]requestcontrol.ModelRewrite, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return LoadModelRewrites(data)
}
