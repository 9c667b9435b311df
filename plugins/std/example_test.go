package std_test

import (
	"fmt"

	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/scheduling/scorers"
)

// The standard registry builds stock plugins from configuration parameters.
func ExampleRegistry() {
	reg := std.Registry()
	p, err := reg.Build("load-aware-scorer", "load", []byte(`{"threshold": 64}`))
	fmt.Println(p.(*scorers.LoadAware).Threshold, err)

	_, err = reg.Build("load-aware-scorer", "load", []byte(`{"treshold": 64}`))
	fmt.Println(err)

	for _, info := range reg.Types() {
		if info.Category == std.CategoryPicker {
			fmt.Println(info.Type)
		}
	}
	// Output:
	// 64 <nil>
	// plugin "load" (type load-aware-scorer): parameters: unknown field "treshold"
	// max-score-picker
	// random-picker
	// weighted-random-picker
}
