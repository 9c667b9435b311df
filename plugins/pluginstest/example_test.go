package pluginstest_test

import (
	"fmt"
	"time"

	"github.com/eppkit/eppkit/plugins/pluginstest"
)

// A Clock stands still until the test moves it.
func ExampleClock() {
	clk := pluginstest.NewClock(pluginstest.Epoch)
	clk.Advance(1500 * time.Millisecond)
	fmt.Println(clk.Now().Format(time.RFC3339Nano))
	// Output: 2025-01-01T00:00:01.5Z
}
