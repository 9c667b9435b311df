package std_test

import (
	"slices"
	"testing"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/flowcontrol"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/scheduling"
)

// categories maps each category to a check that a plugin of it implements the
// extension point the category promises. Add new categories here.
var categories = map[string]func(any) bool{
	std.CategoryScorer:         func(p any) bool { _, ok := p.(scheduling.Scorer); return ok },
	std.CategoryFilter:         func(p any) bool { _, ok := p.(scheduling.Filter); return ok },
	std.CategoryPicker:         func(p any) bool { _, ok := p.(scheduling.Picker); return ok },
	std.CategoryProfileHandler: func(p any) bool { _, ok := p.(scheduling.ProfileHandler); return ok },
	std.CategoryParser:         func(p any) bool { _, ok := p.(parsers.Parser); return ok },
	std.CategoryProducer:       func(p any) bool { _, ok := p.(requestcontrol.DataProducer); return ok },
	std.CategorySaturationDetector: func(p any) bool {
		_, ok := p.(requestcontrol.SaturationDetector)
		return ok
	},
	std.CategoryDataSource: func(p any) bool { _, ok := p.(datalayer.DataSource); return ok },
	std.CategoryExtractor:  func(p any) bool { _, ok := p.(datalayer.Extractor); return ok },
	std.CategoryDiscovery:  func(p any) bool { _, ok := p.(datalayer.Source); return ok },

	std.CategoryFairnessPolicy: func(p any) bool { _, ok := p.(flowcontrol.FairnessPolicy); return ok },
	std.CategoryOrderingPolicy: func(p any) bool { _, ok := p.(flowcontrol.OrderingPolicy); return ok },
	std.CategoryUsageLimitPolicy: func(p any) bool {
		_, ok := p.(flowcontrol.UsageLimitPolicy)
		return ok
	},
}

func TestEveryType(t *testing.T) {
	reg := std.Registry()
	for _, info := range reg.Types() {
		t.Run(info.Type, func(t *testing.T) {
			pluginstest.TestLifecycle(t, reg, info.Type)

			implements, known := categories[info.Category]
			if !known {
				t.Fatalf("category %q is not known: add it to categories in std_test.go", info.Category)
			}
			if p, err := reg.Build(info.Type, info.Type, nil); err != nil || !implements(p) {
				t.Errorf("%T (err %v) does not implement the %s extension point", p, err, info.Category)
			}
			if !slices.Contains([]string{"stable", "beta", "alpha"}, info.Stability) {
				t.Errorf("stability %q, want stable, beta or alpha", info.Stability)
			}
			if info.Description == "" {
				t.Error("no description")
			}
			if info.Category == std.CategoryScorer && info.Formula == "" {
				t.Error("a scorer without a formula: register it with plugins.Formula (the catalogue prints it)")
			}
			var checkDocs func(prefix string, ps []plugins.Param)
			checkDocs = func(prefix string, ps []plugins.Param) {
				for _, p := range ps {
					if p.Doc == "" {
						t.Errorf("parameter %q has no doc tag (the catalogue docs/plugins.md prints it)", prefix+p.Name)
					}
					checkDocs(prefix+p.Name+".", p.Fields)
				}
			}
			checkDocs("", info.Params())
		})
	}
}

func TestStockTypes(t *testing.T) {
	reg := std.Registry()
	for _, typ := range []string{
		"queue-scorer", "running-requests-size-scorer", "kv-cache-utilization-scorer", "lora-affinity-scorer", "load-aware-scorer",
		"label-selector-filter", "lora-affinity-filter",
		"max-score-picker", "random-picker", "weighted-random-picker",
		"single-profile-handler", "header-profile-handler",
		"openai-parser",
	} {
		if _, ok := reg.Lookup(typ); !ok {
			t.Errorf("%s is not registered", typ)
		}
	}
}

// TestRegistryIsFresh: each call returns a registry the caller may extend.
func TestRegistryIsFresh(t *testing.T) {
	type custom struct{}
	a := std.Registry()
	plugins.Register[*custom](a, "custom")
	if _, ok := std.Registry().Lookup("custom"); ok {
		t.Error("registries share state")
	}
}
