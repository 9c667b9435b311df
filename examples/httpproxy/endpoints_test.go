package httpproxy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/examples/httpproxy"
	"github.com/eppkit/eppkit/plugins/std"
)

// WithDiscovery applies the defaults before Build; the flowControl section
// they fill in is not the user's, so Build must not warn that the section is
// unused (every eppkit proxy run did).
func TestWithDiscoveryNoFlowControlWarning(t *testing.T) {
	eps := httpproxy.Endpoints{Targets: []datalayer.Target{{Name: "a", Address: "127.0.0.1", Port: 8000}}}
	for _, in := range []string{"", "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nflowControl:\n  maxRequests: 10\n"} {
		cfg, err := config.Load([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err = httpproxy.WithDiscovery(cfg, std.Registry(), eps)
		if err != nil {
			t.Fatal(err)
		}
		rt, err := config.Build(context.Background(), cfg, std.Registry(), config.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var warned bool
		for _, w := range rt.Warnings {
			warned = warned || w.Path == "flowControl" && strings.Contains(w.Message, "feature gate is off")
		}
		_ = rt.Close()
		if user := in != ""; warned != user {
			t.Errorf("config %q: flowControl warning %v, want %v: %v", in, warned, user, rt.Warnings)
		}
	}
}
