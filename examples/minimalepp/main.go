// Command minimalepp is a custom endpoint picker in one screen: the stock
// plugins plus a custom scorer, an EndpointPickerConfig, and the HTTP proxy
// adapter forwarding each request to the endpoint the picker chose.
//
//	go run ./examples/minimalepp --endpoints 127.0.0.1:8001,127.0.0.1:8002
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/examples/customscorer"
	"github.com/eppkit/eppkit/examples/httpproxy"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/std"
)

// defaultConfig is used when --config is not given.
const defaultConfig = `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: least-busy-scorer
- type: prefix-cache-scorer
schedulingProfiles:
- name: default
  plugins:
  - {pluginRef: least-busy-scorer, weight: 2}
  - {pluginRef: prefix-cache-scorer, weight: 3}
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "minimalepp:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("minimalepp", flag.ContinueOnError)
	configFile := fs.String("config", "", "EndpointPickerConfig YAML file (default: least-busy ×2 + prefix ×3)")
	endpoints := fs.String("endpoints", "127.0.0.1:8001", "model servers: host:port,... or an endpoints file")
	listen := fs.String("listen", "127.0.0.1:8080", "address to serve on")
	if err := fs.Parse(args); err != nil {
		return err
	}

	reg := std.Registry() // the stock plugins, plus ours in one line:
	plugins.Register[*customscorer.LeastBusy](reg, "least-busy-scorer", plugins.Category("scorer"))

	cfg, err := config.Load([]byte(defaultConfig))
	if *configFile != "" {
		cfg, err = config.LoadFile(*configFile)
	}
	if err != nil {
		return err
	}
	eps, err := httpproxy.ParseEndpoints(ctx, *endpoints)
	if err != nil {
		return err
	}
	if cfg, err = httpproxy.WithDiscovery(cfg, reg, eps); err != nil {
		return err
	}
	rt, err := config.Build(ctx, cfg, reg, config.Options{Logger: slog.New(slog.NewTextHandler(stderr, nil))})
	if err != nil {
		return err
	}
	defer rt.Close()
	if err := rt.DataLayer.Start(ctx); err != nil { // discovery and metrics scraping
		return err
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := httpproxy.NewServer(*listen, &httpproxy.Proxy{Director: rt.Director})
	go func() { <-ctx.Done(); _ = srv.Shutdown(context.Background()) }()
	fmt.Fprintf(stdout, "minimalepp: listening on http://%s\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
