package envoytest_test

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

// A stream end to end, as Envoy runs it: the request path, then a streamed
// response whose model name the processor restores.
func ExampleStream_Respond() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := config.Build(ctx, nil, std.Registry(), config.Options{})
	if err != nil {
		panic(err)
	}
	defer rt.Close()
	rt.Director.Pool = requestcontrol.StaticPool{datalayer.New("a", "10.0.0.1", 8000, nil).WithMetrics(datalayer.Metrics{UpdateTime: time.Now().Add(time.Hour)})}
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
	st, err := c.Start(ctx, &envoytest.Request{Path: "/v1/completions",
		Headers: envoytest.H("x-llm-d-model-name-rewrite", "base-model"),
		Body:    []byte(`{"model":"alias","prompt":"hi","stream":true}`)})
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Destinations(), string(st.Body))
	a, err := st.Respond(&envoytest.Response{Status: 200, Headers: envoytest.H("content-type", "text/event-stream"),
		Chunks: [][]byte{[]byte("data: {\"model\":\"base-model\"}\n\n"), []byte("data: [DONE]\n\n")}})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q\n", a.Body)
	fmt.Println(st.Close())
	// Output:
	// [10.0.0.1:8000] {"model":"base-model","prompt":"hi","stream":true}
	// "data: {\"model\":\"alias\"}\n\ndata: [DONE]\n\n"
	// <nil>
}
