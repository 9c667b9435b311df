package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/plugins/std"
)

// TestPluginCatalogue fails when docs/plugins.md is not what the registry's
// metadata generates, and says how to regenerate it.
func TestPluginCatalogue(t *testing.T) {
	code, got, errOut := eppkit(t, "plugins", "--output", "markdown")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	path := filepath.Join("..", "..", "docs", "plugins.md")
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v\nGenerate it from the repository root with\n\t%s", err, catalogueCommand)
	}
	if got == string(want) {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	line := 0
	for line < len(g) && line < len(w) && g[line] == w[line] {
		line++
	}
	at := func(lines []string) string {
		if line < len(lines) {
			return lines[line]
		}
		return "(end of file)"
	}
	t.Errorf("docs/plugins.md is out of date: line %d is\n\t%s\nbut the registry generates\n\t%s\nRegenerate it from the repository root with\n\tmake docs    (or: %s)",
		line+1, at(w), at(g), catalogueCommand)
}

// TestCatalogueCoversRegistry: every registered type has its section, with
// every parameter (mapping fields included) and every data key.
func TestCatalogueCoversRegistry(t *testing.T) {
	reg := std.Registry()
	var docs []pluginDoc
	for _, info := range reg.Types() {
		docs = append(docs, describe(reg, info))
	}
	var buf bytes.Buffer
	if err := writeCatalogue(&buf, docs, []plannedDoc{{Type: "future-scorer", Category: "scorer"}}); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	var check func(typ, prefix string, ps []paramDoc)
	check = func(typ, prefix string, ps []paramDoc) {
		for _, p := range ps {
			if !strings.Contains(md, "| `"+prefix+p.Name+"` |") {
				t.Errorf("%s: no row for parameter %s%s", typ, prefix, p.Name)
			}
			check(typ, prefix+p.Name+".", p.Fields)
		}
	}
	for _, d := range docs {
		if !strings.Contains(md, "### `"+d.Type+"`\n") || !strings.Contains(md, "(#"+anchor(d.Type)+")") {
			t.Errorf("%s: no section or no contents link", d.Type)
		}
		check(d.Type, "", d.Parameters)
		for _, k := range append(d.Produces, d.Consumes...) {
			if !strings.Contains(md, "`"+k.Key+"` (`"+k.Type+"`)") {
				t.Errorf("%s: data key %s missing", d.Type, k.Key)
			}
		}
		if d.Formula != "" && !strings.Contains(md, "| formula | "+cell(d.Formula)+" |") {
			t.Errorf("%s: formula missing", d.Type)
		}
	}
	if !strings.Contains(md, "| `future-scorer` | scorer |") {
		t.Error("planned types missing")
	}
	// The prefix scorer's dependency on the approximate producer is visible.
	for _, want := range []string{
		"| consumes | `prefix-match/approx-prefix-cache-producer` (`*scheduling.PrefixMatch`) |",
		"| auto-created for | `prefix-match/approx-prefix-cache-producer`",
		"| `kvEventsConfig.mode` | `string` | `\"connect\"` |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("catalogue lacks %q", want)
		}
	}
}

func TestAnchor(t *testing.T) {
	for in, want := range map[string]string{
		"Usage-limit policies": "usage-limit-policies",
		"queue-scorer":         "queue-scorer",
		"Planned":              "planned",
	} {
		if got := anchor(in); got != want {
			t.Errorf("anchor(%q) = %q, want %q", in, got, want)
		}
	}
}
