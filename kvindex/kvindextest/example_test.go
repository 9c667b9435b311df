package kvindextest_test

import (
	"fmt"

	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/kvindex/kvindextest"
)

// An index kept elsewhere runs the suites from its own tests:
//
//	func TestConformance(t *testing.T) {
//		kvindextest.TestPrefixStore(t, func(t *testing.T, cfg kvindex.PrefixIndexConfig) kvindex.PrefixStore {
//			return newMyStore(t, cfg)
//		})
//	}
//
// Engine and Batch make the events such tests apply.
func Example() {
	x, _ := kvindex.NewEventIndex(kvindex.EventIndexConfig{})
	e := kvindextest.Engine{Seed: 1, BlockTokens: 16}
	toks := kvindextest.Tokens(1, 64)
	x.Apply("a", kvindextest.Batch("m", e.Stored(toks, 0, 2, "GPU")))
	x.Apply("a", kvindextest.Batch("m", e.Stored(toks, 2, 4, "CPU"))) // chained by its parent hash

	matched := make([]float64, 1)
	x.Match(x.BlockKeys(nil, "m", "", toks, 0), []string{"a"}, matched)
	fmt.Println(matched)
	// Output: [3.6]
}
