package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/plugins"
)

// categoryOrder is the order categories are listed in; others follow by name.
var categoryOrder = []string{"profile-handler", "filter", "scorer", "picker", "parser", "producer"}

type pluginDoc struct {
	Type        string     `json:"type"`
	Category    string     `json:"category"`
	Stability   string     `json:"stability,omitempty"`
	Description string     `json:"description,omitempty"`
	Formula     string     `json:"formula,omitempty"`
	GoType      string     `json:"goType"`
	Parameters  []paramDoc `json:"parameters"`
	// Produces and Consumes are the data keys of an instance named after its
	// type; DefaultFor the keys it is auto-created for.
	Produces   []keyDoc `json:"produces,omitempty"`
	Consumes   []keyDoc `json:"consumes,omitempty"`
	DefaultFor []string `json:"defaultFor,omitempty"`
}

type paramDoc struct {
	Name    string     `json:"name"`
	Type    string     `json:"type"`
	Default string     `json:"default,omitempty"`
	Doc     string     `json:"doc,omitempty"`
	Fields  []paramDoc `json:"fields,omitempty"`
}

type keyDoc struct {
	Key  string `json:"key"`
	Type string `json:"type"`
}

type plannedDoc struct {
	Type     string `json:"type"`
	Category string `json:"category"`
}

func (c *cli) plugins(args []string) int {
	fs := c.flags("plugins", "plugins [--output text|json|markdown]")
	output := fs.String("output", "text", "output format: text, json or markdown (the catalogue docs/plugins.md)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return c.usageError("plugins: unexpected argument %q", fs.Arg(0))
	}
	reg := c.registry()
	var docs []pluginDoc
	for _, info := range reg.Types() {
		docs = append(docs, describe(reg, info))
	}
	slices.SortStableFunc(docs, func(a, b pluginDoc) int {
		return cmp.Or(cmp.Compare(categoryRank(a.Category), categoryRank(b.Category)), cmp.Compare(a.Category, b.Category))
	})
	var planned []plannedDoc
	for _, p := range config.PlannedTypes(reg) {
		planned = append(planned, plannedDoc(p))
	}

	switch *output {
	case "json":
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"plugins": docs, "planned": planned}); err != nil {
			return c.fail("%v", err)
		}
		return exitOK
	case "markdown":
		if err := writeCatalogue(c.stdout, docs, planned); err != nil {
			return c.fail("%v", err)
		}
		return exitOK
	case "text":
	default:
		return c.usageError("plugins: --output must be text, json or markdown, not %q", *output)
	}
	// One block per category: the types aligned in columns, each followed by
	// its parameters, one per line.
	for i := 0; i < len(docs); {
		j := i
		for j < len(docs) && docs[j].Category == docs[i].Category {
			j++
		}
		name := docs[i].Category
		if name == "" {
			name = "other"
		}
		fmt.Fprintf(c.stdout, "%s\n", name)
		width := 0
		for _, d := range docs[i:j] {
			width = max(width, len(d.Type))
		}
		for _, d := range docs[i:j] {
			fmt.Fprintf(c.stdout, "  %-*s  %-6s  %s\n", width, d.Type, d.Stability, d.Description)
			if d.Formula != "" {
				fmt.Fprintf(c.stdout, "      = %s\n", d.Formula)
			}
			c.printParams(d.Parameters, "      ")
		}
		fmt.Fprintln(c.stdout)
		i = j
	}
	if len(planned) > 0 {
		fmt.Fprintln(c.stdout, "planned, not in this build (a configuration using them loads with a warning)")
		byCat := map[string][]string{}
		var cats []string
		for _, p := range planned {
			if _, ok := byCat[p.Category]; !ok {
				cats = append(cats, p.Category)
			}
			byCat[p.Category] = append(byCat[p.Category], p.Type)
		}
		slices.SortFunc(cats, func(a, b string) int {
			return cmp.Or(cmp.Compare(categoryRank(a), categoryRank(b)), cmp.Compare(a, b))
		})
		for _, cat := range cats {
			fmt.Fprintf(c.stdout, "  %s: %s\n", cat, strings.Join(byCat[cat], ", "))
		}
	}
	return exitOK
}

// printParams prints one parameter a line, a mapping's fields indented
// below it.
func (c *cli) printParams(ps []paramDoc, indent string) {
	for _, p := range ps {
		fmt.Fprintf(c.stdout, "%s%s (%s", indent, p.Name, p.Type)
		if p.Default != "" && len(p.Fields) == 0 {
			fmt.Fprintf(c.stdout, ", default %s", p.Default)
		}
		fmt.Fprintf(c.stdout, ")")
		if p.Doc != "" {
			fmt.Fprintf(c.stdout, ": %s", p.Doc)
		}
		fmt.Fprintln(c.stdout)
		c.printParams(p.Fields, indent+"  ")
	}
}

// describe documents a registered type. Its data keys come from a
// throwaway instance named after the type, built with no parameters.
func describe(reg *plugins.Registry, info *plugins.Info) pluginDoc {
	d := pluginDoc{Type: info.Type, Category: info.Category, Stability: info.Stability,
		Description: info.Description, Formula: info.Formula, GoType: info.GoType().String(),
		Parameters: paramDocs(info.Params()), DefaultFor: info.DefaultFor}
	if d.Parameters == nil {
		d.Parameters = []paramDoc{}
	}
	if p, err := reg.Build(info.Type, info.Type, nil); err == nil {
		if pr, ok := p.(plugins.Producer); ok {
			d.Produces = keyDocs(pr.Produces())
		}
		if co, ok := p.(plugins.Consumer); ok {
			d.Consumes = keyDocs(co.Consumes())
		}
		_ = plugins.CloseAll([]any{p})
	}
	return d
}

func paramDocs(ps []plugins.Param) []paramDoc {
	var out []paramDoc
	for _, p := range ps {
		out = append(out, paramDoc{Name: p.Name, Type: p.Type, Default: p.Default, Doc: p.Doc, Fields: paramDocs(p.Fields)})
	}
	return out
}

func keyDocs(ks []plugins.AnyKey) []keyDoc {
	var out []keyDoc
	for _, k := range ks {
		out = append(out, keyDoc{Key: k.KeyName(), Type: k.KeyType().String()})
	}
	return out
}

func categoryRank(c string) int {
	if i := slices.Index(categoryOrder, c); i >= 0 {
		return i
	}
	return len(categoryOrder)
}
