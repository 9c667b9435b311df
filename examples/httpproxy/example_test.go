package httpproxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/examples/fakeserver"
	"github.com/eppkit/eppkit/examples/httpproxy"
	"github.com/eppkit/eppkit/plugins/std"
)

// The proxy in front of two fake servers: the default configuration, plus
// the endpoints' discovery.
func Example() {
	fakes, err := fakeserver.StartCluster(fakeserver.Config{}, "127.0.0.1", 0, 2)
	if err != nil {
		panic(err)
	}
	defer fakes.Close()
	ctx := context.Background()
	eps, err := httpproxy.ParseEndpoints(ctx, strings.Join(fakes.Addrs(), ","))
	if err != nil {
		panic(err)
	}
	cfg, err := httpproxy.WithDiscovery(nil, std.Registry(), eps)
	if err != nil {
		panic(err)
	}
	rt, err := config.Build(ctx, cfg, std.Registry(), config.Options{})
	if err != nil {
		panic(err)
	}
	defer rt.Close()
	_ = rt.DataLayer.Start(ctx)
	for len(rt.DataLayer.Endpoints()) < 2 { // discovery runs in the background
		time.Sleep(time.Millisecond)
	}
	proxy := httptest.NewServer(&httpproxy.Proxy{Director: rt.Director})
	defer proxy.Close()

	resp, err := http.Post(proxy.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"fake-model","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	served := resp.Header.Get(fakeserver.HeaderServedBy)
	fmt.Println(resp.StatusCode, strings.Contains(strings.Join(fakes.Addrs(), ","), served), strings.Contains(string(body), `"the quick "`))

	resp, err = http.Post(proxy.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":`))
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// 200 true true
	// 400
}
