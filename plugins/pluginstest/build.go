package pluginstest

import (
	"context"
	"reflect"
	"testing"

	"github.com/eppkit/eppkit/plugins"
)

// Build creates a plugin of type typ from reg as a configuration would (new
// value, SetDefaults, strict decode of paramsJSON, Validate), calls its Init
// with Deps(t), registers its Close to run when the test ends, and returns it
// as T. An empty paramsJSON means no parameters. Any failure fails the test.
func Build[T any](t testing.TB, reg *plugins.Registry, typ, paramsJSON string) T {
	t.Helper()
	v, err := reg.Build(typ, typ, []byte(paramsJSON))
	if err != nil {
		t.Fatalf("pluginstest.Build: %v", err)
	}
	p, ok := v.(T)
	if !ok {
		t.Fatalf("pluginstest.Build: type %s builds a %T, which is not a %v", typ, v, reflect.TypeFor[T]())
	}
	deps := Deps(t)
	deps.Name = typ // the instance is named after its type, as config names it by default
	if err := plugins.Init(context.Background(), v, deps); err != nil {
		t.Fatalf("pluginstest.Build: %s: Init: %v", typ, err)
	}
	t.Cleanup(func() {
		if err := plugins.CloseAll([]any{v}); err != nil {
			t.Errorf("pluginstest.Build: %s: Close: %v", typ, err)
		}
	})
	return p
}
