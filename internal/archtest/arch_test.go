package archtest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/eppkit/eppkit"

// allowedModules are the third-party modules the root module may require.
var allowedModules = map[string]bool{
	"github.com/prometheus/common":       true,
	"github.com/cespare/xxhash/v2":       true,
	"github.com/hashicorp/golang-lru/v2": true,
	"github.com/stretchr/testify":        true,
	"gopkg.in/yaml.v3":                   true,
	"github.com/vmihailenco/msgpack/v5":  true,
	"github.com/go-zeromq/zmq4":          true,
	"github.com/redis/go-redis/v9":       true,
}

// layer returns the layer name of an eppkit package (relative path).
func layer(rel string) string {
	for _, l := range []string{
		"plugins/pluginstest", "plugins/std", "plugins", "kvindex", "datalayer", "parsers",
		"scheduling/schedulingtest", "scheduling", "flowcontrol", "requestcontrol", "config",
		"sim", "examples", "cmd", "benchmarks", "internal",
	} {
		if rel == l || strings.HasPrefix(rel, l+"/") {
			return l
		}
	}
	return rel
}

// may lists, per layer, the layers it may import (besides itself).
var may = map[string][]string{
	"plugins":                   {},
	"kvindex":                   {},
	"datalayer":                 {"plugins"},
	"parsers":                   {"plugins"},
	"scheduling":                {"plugins", "datalayer", "parsers", "kvindex"},
	"flowcontrol":               {"plugins", "datalayer"},
	"requestcontrol":            {"plugins", "datalayer", "parsers", "kvindex", "scheduling", "flowcontrol"},
	"plugins/pluginstest":       {"plugins"},
	"scheduling/schedulingtest": {"plugins", "datalayer", "parsers", "scheduling", "plugins/pluginstest"},
	"plugins/std":               {"plugins", "datalayer", "parsers", "kvindex", "scheduling", "flowcontrol", "requestcontrol"},
	"config":                    {"plugins", "datalayer", "parsers", "kvindex", "scheduling", "flowcontrol", "requestcontrol"},
	"sim":                       {"plugins", "datalayer", "parsers", "kvindex", "scheduling", "flowcontrol", "requestcontrol", "config", "plugins/std"},
	"cmd":                       {"plugins", "datalayer", "parsers", "kvindex", "scheduling", "flowcontrol", "requestcontrol", "config", "plugins/std", "sim", "examples"},
	"benchmarks":                {"plugins", "datalayer", "parsers", "kvindex", "scheduling", "flowcontrol", "requestcontrol", "config", "plugins/std", "sim", "scheduling/schedulingtest", "plugins/pluginstest"},
	"examples":                  {"plugins", "datalayer", "parsers", "kvindex", "scheduling", "flowcontrol", "requestcontrol", "config", "plugins/std", "scheduling/schedulingtest", "plugins/pluginstest"},
	"internal":                  {"plugins", "datalayer", "parsers", "kvindex", "scheduling", "flowcontrol", "requestcontrol", "config", "plugins/std"},
}

// leafParents are packages whose subpackages are sibling leaves that must not
// import each other (stock plugins: scheduling/scorers must not import
// scheduling/filters).
var leafParents = []string{"scheduling", "requestcontrol", "parsers", "flowcontrol", "datalayer"}

type pkg struct {
	ImportPath string
	Imports    []string
	Module     *struct{ Path string }
	Standard   bool
}

func list(t *testing.T, args ...string) []pkg {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-json"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func rel(path string) (string, bool) {
	if path == mod {
		return "", true
	}
	r, ok := strings.CutPrefix(path, mod+"/")
	return r, ok
}

func TestImportRules(t *testing.T) {
	for _, p := range list(t, mod+"/...") {
		from, _ := rel(p.ImportPath)
		fl := layer(from)
		allowed, known := may[fl]
		if !known {
			t.Errorf("package %s is outside the layers of DESIGN.md", from)
			continue
		}
		for _, imp := range p.Imports {
			to, ours := rel(imp)
			if !ours {
				continue
			}
			tl := layer(to)
			if tl == fl {
				if sibling(from, to) {
					t.Errorf("%s imports its sibling leaf %s", from, to)
				}
				continue
			}
			if !contains(allowed, tl) {
				t.Errorf("%s (layer %s) must not import %s (layer %s)", from, fl, to, tl)
			}
		}
	}
}

// sibling reports whether a and b are different stock-plugin leaves under
// the same parent (e.g. scheduling/scorers and scheduling/filters).
func sibling(a, b string) bool {
	for _, parent := range leafParents {
		la, oka := strings.CutPrefix(a, parent+"/")
		lb, okb := strings.CutPrefix(b, parent+"/")
		if oka && okb {
			fa, _, _ := strings.Cut(la, "/")
			fb, _, _ := strings.Cut(lb, "/")
			return fa != fb && !strings.HasSuffix(fb, "test")
		}
	}
	return false
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// thirdParty lists, for the packages it names (relative paths), the only
// third-party modules each may import; go-redis (goRedis) no package but
// kvindex/redisindex may. kvindex is reusable on its own: its core imports
// xxhash, msgpack and zmq4 only, and go-redis stays in kvindex/redisindex.
var thirdParty = map[string][]string{
	"kvindex":                      {"github.com/cespare/xxhash/v2", "github.com/vmihailenco/msgpack/v5", "github.com/go-zeromq/zmq4"},
	"kvindex/kvindextest":          {},
	"kvindex/redisindex":           {goRedis},
	"kvindex/redisindex/redistest": {},
}

const goRedis = "github.com/redis/go-redis/v9"

func TestThirdPartyImports(t *testing.T) {
	for _, p := range list(t, mod+"/...") {
		from, _ := rel(p.ImportPath)
		allowed, listed := thirdParty[from]
		for _, imp := range p.Imports {
			if _, ours := rel(imp); ours || isStd(imp) {
				continue
			}
			ok := false
			for _, m := range allowed {
				ok = ok || imp == m || strings.HasPrefix(imp, m+"/")
			}
			switch {
			case (imp == goRedis || strings.HasPrefix(imp, goRedis+"/")) && !ok:
				t.Errorf("%s imports %s: only kvindex/redisindex may (DESIGN.md: kvindex core stays free of go-redis)", from, imp)
			case listed && !ok:
				t.Errorf("%s imports %s; allowed: %v", from, imp, allowed)
			}
		}
	}
}

// isStd reports whether path is a standard-library package (no dot in its
// first element).
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func TestModuleDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-json", "all").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	// Direct requirements only: indirect ones come with the allowed modules.
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var m struct {
			Path     string
			Main     bool
			Indirect bool
		}
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		if m.Main || m.Indirect {
			continue
		}
		if !allowedModules[m.Path] {
			t.Errorf("root module requires %s directly; allowed: the design card's dependencies (DESIGN.md)", m.Path)
		}
	}
}

func TestNoForbiddenDependencies(t *testing.T) {
	for _, p := range list(t, "-deps", mod+"/...") {
		for _, bad := range []string{"google.golang.org/grpc", "github.com/envoyproxy", "k8s.io/", "gonum.org/v1/plot"} {
			if strings.HasPrefix(p.ImportPath, bad) {
				t.Errorf("root module depends on %s; it belongs in a nested module", p.ImportPath)
			}
		}
	}
}
