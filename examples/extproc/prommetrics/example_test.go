package prommetrics_test

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eppkit/eppkit/examples/extproc/prommetrics"
	"github.com/eppkit/eppkit/requestcontrol"
)

// The binding is a requestcontrol.Metrics: give it to the adapters and to
// requestcontrol.Instrument.
func Example() {
	reg := prometheus.NewRegistry()
	m, err := prommetrics.New(reg, prommetrics.Options{})
	if err != nil {
		panic(err)
	}
	m.Request(requestcontrol.RequestMetrics{Model: "m", TargetModel: "m", Status: 200, Duration: 40 * time.Millisecond})
	m.Request(requestcontrol.RequestMetrics{Model: "m", Status: 429, Reason: requestcontrol.ReasonSaturated})
	n, _ := testutil.GatherAndCount(reg, "llm_d_epp_request_total", "llm_d_epp_request_error_total")
	fmt.Println(n, "series")
	// Output: 3 series
}
