package extproc_test

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/examples/extproc"
	"github.com/eppkit/eppkit/examples/extproc/envoytest"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/scheduling"
)

// BenchmarkProcessStream is BENCHMARKS.md P5's ext-proc figure: one whole
// Process stream per op, over loopback TCP, with the client speaking
// Envoy's side — request headers, an 8 KB chat body in 2 chunks, the pick
// (default configuration, 8 endpoints), then response headers and a JSON
// body with usage, and the close. Both sides run in this process, so
// streams/s/core counts the client's CPU too.
func BenchmarkProcessStream(b *testing.B) {
	rt, err := config.Build(context.Background(), nil, std.Registry(), config.Options{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	now := time.Now()
	eps := make([]*scheduling.Endpoint, 8)
	for i := range eps {
		eps[i] = datalayer.New(fmt.Sprintf("ep-%d", i), fmt.Sprintf("10.0.0.%d", i), 8000, nil).WithMetrics(datalayer.Metrics{
			Waiting: (i * 7) % 33, Running: (i * 13) % 65, KVUsage: float64((i*37)%96) / 100, UpdateTime: now.Add(time.Hour)})
	}
	rt.Director.Pool = requestcontrol.StaticPool(eps)
	srv := &extproc.Server{Director: rt.Director}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, lis) }()
	defer func() { cancel(); <-served }()
	c, err := envoytest.Dial(lis.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()

	system := strings.Repeat("You are a careful assistant; answer precisely. ", 128)[:6000]
	response := &envoytest.Response{Status: 200, Headers: envoytest.H("content-type", "application/json"), Chunks: [][]byte{
		[]byte(`{"id":"cmpl-1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":2000,"completion_tokens":1,"total_tokens":2001}}`)}}
	var seq atomic.Int64
	one := func() error {
		user := fmt.Sprintf("question %d: %s", seq.Add(1), strings.Repeat("x", 2048))[:2048]
		st, err := c.Start(ctx, &envoytest.Request{Path: "/v1/chat/completions", Chunks: 2,
			Body: chatBody("m", system+user)})
		if err != nil {
			return err
		}
		if _, err := st.Respond(response); err != nil {
			st.Abort()
			return err
		}
		return st.Close()
	}
	for range 100 { // warm the connection and the index
		if err := one(); err != nil {
			b.Fatal(err)
		}
	}
	// One stream at a time: ns/op is a stream's round trip.
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := one(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Enough streams in flight to keep every core busy: throughput.
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(8)
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := one(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		perSec := float64(b.N) / time.Since(start).Seconds()
		b.ReportMetric(perSec, "streams/s")
		b.ReportMetric(perSec/float64(runtime.GOMAXPROCS(0)), "streams/s/core")
	})
}
