package requestcontroltest_test

import (
	"fmt"

	rt "github.com/eppkit/eppkit/requestcontrol/requestcontroltest"
)

// SSE builds a stream and Split cuts it at arbitrary bytes, to test that a
// model name split across chunks is still rewritten.
func ExampleSplit() {
	stream := rt.SSE(`{"model":"m"}`)
	for _, c := range rt.Split(stream, 12) {
		fmt.Printf("%q\n", c)
	}
	// Output:
	// "data: {\"mode"
	// "l\":\"m\"}\n\ndat"
	// "a: [DONE]\n\n"
}
