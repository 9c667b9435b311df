package pluginstest

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/plugins"
)

// TestLifecycle checks that plugin type typ in reg goes through the lifecycle
// the configuration loader drives:
//
//   - it builds with no parameters (absent, empty, {} and null);
//   - its defaults survive decoding: building with {} or with its own
//     parameters re-encoded as JSON gives the same parameters;
//   - strict decoding rejects an unknown field with an error naming the
//     plugin instance and the field;
//   - Init with test Deps and Close succeed.
func TestLifecycle(t *testing.T, reg *plugins.Registry, typ string) {
	t.Helper()
	if _, ok := reg.Lookup(typ); !ok {
		t.Fatalf("type %q is not registered", typ)
	}
	build := func(t *testing.T, params string) any {
		t.Helper()
		p, err := reg.Build(typ, typ, []byte(params))
		if err != nil {
			t.Fatalf("build with parameters %q: %v", params, err)
		}
		return p
	}
	t.Run("no parameters", func(t *testing.T) {
		for _, params := range []string{"", " ", "{}", "null"} {
			build(t, params)
		}
	})
	t.Run("defaults survive decode", func(t *testing.T) {
		defaults := encode(t, build(t, ""))
		if got := encode(t, build(t, "{}")); !bytes.Equal(got, defaults) {
			t.Errorf("parameters after decoding {}: %s, want the defaults %s", got, defaults)
		}
		if got := encode(t, build(t, string(defaults))); !bytes.Equal(got, defaults) {
			t.Errorf("parameters after decoding the defaults %s: %s", defaults, got)
		}
	})
	t.Run("unknown field", func(t *testing.T) {
		const name, field = "lifecycle-instance", "noSuchParameterXYZ"
		_, err := reg.Build(typ, name, []byte(`{"`+field+`": 1}`))
		if err == nil {
			t.Fatalf("build with unknown field %q succeeded, want an error", field)
		}
		if msg := err.Error(); !strings.Contains(msg, field) || !strings.Contains(msg, name) {
			t.Errorf("error %q does not name the plugin %q and the field %q", msg, name, field)
		}
	})
	t.Run("init and close", func(t *testing.T) {
		p := build(t, "")
		if err := plugins.Init(context.Background(), p, Deps(t)); err != nil {
			t.Fatalf("Init: %v", err)
		}
		if err := plugins.CloseAll([]any{p}); err != nil {
			t.Fatalf("Close: %v", err)
		}
	})
}

// encode returns p's parameters as JSON.
func encode(t *testing.T, p any) []byte {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatalf("encoding the parameters of %T: %v", p, err)
	}
	return b
}
