package config_test

import (
	"context"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/plugins/std"
)

const gateOffWarning = "flowControl: the flowControl feature gate is off: this section is checked but not used"

// buildAfterDefaults builds in as a caller that applies the defaults first
// (httpproxy.WithDiscovery does) and returns the warnings.
func buildAfterDefaults(t *testing.T, in string) string {
	t.Helper()
	cfg := load(t, in)
	if err := config.Defaults(cfg, std.Registry()); err != nil {
		t.Fatal(err)
	}
	rt, err := config.Build(context.Background(), cfg, std.Registry(), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	return warnings(rt)
}

// The flowControl section Defaults fills in is not the user's: building a
// configuration that went through Defaults first does not warn about it.
func TestFlowControlGateOffWarningOnlyForUserSection(t *testing.T) {
	for _, in := range []string{
		"", // no configuration at all
		header + "plugins: [{type: queue-scorer}]\n",
		header + "flowControl:\n  saturationDetector: {pluginRef: utilization-detector}\n", // used with the gate off too
	} {
		if w := buildAfterDefaults(t, in); strings.Contains(w, gateOffWarning) {
			t.Errorf("%q, defaults applied before Build: spurious warning:\n%s", in, w)
		}
	}
	for _, in := range []string{
		header + "flowControl:\n  maxRequests: 10\n",
		header + "flowControl:\n  usageLimitPolicyPluginRef: static-usage-limit-policy\n", // the default, but written
	} {
		if w := buildAfterDefaults(t, in); !strings.Contains(w, gateOffWarning) {
			t.Errorf("%q, defaults applied before Build: no warning:\n%s", in, w)
		}
		if w := warnings(mustBuild(t, in)); !strings.Contains(w, gateOffWarning) {
			t.Errorf("%q: no warning:\n%s", in, w)
		}
	}
}
