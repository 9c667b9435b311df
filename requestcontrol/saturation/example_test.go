package saturation_test

import (
	"context"
	"fmt"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/requestcontrol/saturation"
)

// The utilization detector's pool saturation is the mean of each endpoint's
// tighter ratio: queue over 5, KV cache over 0.8.
func ExampleUtilization() {
	u := &saturation.Utilization{}
	u.SetDefaults()
	now := time.Now()
	eps := []*datalayer.Endpoint{
		datalayer.New("a", "10.0.0.1", 8000, nil).WithMetrics(datalayer.Metrics{Waiting: 5, KVUsage: 0.4, UpdateTime: now}),
		datalayer.New("b", "10.0.0.2", 8000, nil).WithMetrics(datalayer.Metrics{Waiting: 1, KVUsage: 0.4, UpdateTime: now}),
	}
	fmt.Printf("%.2f\n", u.Saturation(context.Background(), eps))
	fmt.Println(len(u.Filter(context.Background(), nil, eps)), "endpoints below their limits")
	// Output:
	// 0.75
	// 1 endpoints below their limits
}
