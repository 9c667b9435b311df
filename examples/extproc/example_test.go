package extproc_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/examples/extproc"
	"github.com/eppkit/eppkit/examples/extproc/envoytest"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/requestcontrol"
)

// The processor answers a request as Envoy sees it: the pick in a header
// and in envoy.lb metadata, and the body back as streamed chunks.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := config.Build(ctx, nil, std.Registry(), config.Options{Seed: 1})
	if err != nil {
		panic(err)
	}
	defer rt.Close()
	rt.Director.Pool = requestcontrol.StaticPool{
		datalayer.New("a", "10.0.0.1", 8000, nil).WithMetrics(datalayer.Metrics{Waiting: 4, UpdateTime: time.Now().Add(time.Hour)}),
		datalayer.New("b", "10.0.0.2", 8000, nil).WithMetrics(datalayer.Metrics{Waiting: 0, UpdateTime: time.Now().Add(time.Hour)}),
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	served := make(chan error, 1)
	go func() { served <- (&extproc.Server{Director: rt.Director}).Serve(ctx, lis) }()
	defer func() { cancel(); <-served }()

	c, err := envoytest.Dial(lis.Addr().String())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	st, err := c.Start(ctx, &envoytest.Request{Path: "/v1/chat/completions", Chunks: 2,
		Body: []byte(`{"model":"m","messages":[{"role":"user","content":"hello"}]}`)})
	if err != nil {
		panic(err)
	}
	defer st.Abort()
	fmt.Println(st.Headers["x-gateway-destination-endpoint"])
	fmt.Println(st.DynamicMetadata.GetFields()["envoy.lb"].GetStructValue().GetFields()["x-gateway-destination-endpoint"].GetStringValue())
	fmt.Println(st.HeadersResponse.GetResponse().GetClearRouteCache(), len(st.BodyChunks), string(st.Body))
	// Output:
	// 10.0.0.2:8000
	// 10.0.0.2:8000
	// true 1 {"model":"m","messages":[{"role":"user","content":"hello"}]}
}
