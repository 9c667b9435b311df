package inflight_test

import (
	"context"
	"fmt"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/requestcontrol/producers/inflight"
	"github.com/eppkit/eppkit/scheduling"
)

// The producer counts a request on its endpoint from the pick; the prompt
// tokens until the first chunk, the request until the end.
func Example() {
	p := &inflight.Producer{}
	p.SetDefaults()
	ctx := context.Background()
	e := datalayer.New("a", "10.0.0.1", 8000, nil)
	req := &scheduling.Request{Body: &parsers.Body{Prompt: "forty bytes of prompt, ten tokens, okay."}}
	p.PreRequest(ctx, req, &scheduling.Result{Primary: "p", Profiles: []scheduling.ProfileResult{{Profile: "p", Endpoints: []*scheduling.Endpoint{e}}}})
	fmt.Println(p.Tracker().InFlight(e))
	p.ResponseChunk(ctx, req, e, []byte("data: ..."))
	fmt.Println(p.Tracker().InFlight(e))
	p.ResponseComplete(ctx, req, e, parsers.Usage{}, nil)
	fmt.Println(p.Tracker().InFlight(e))
	// Output:
	// 1 10
	// 1 0
	// 0 0
}
