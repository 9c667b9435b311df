// Command eppkit-extproc serves eppkit's request pipeline to a gateway over
// Envoy's ext_proc protocol, with Prometheus metrics, and optionally the HTTP
// proxy adapter beside it:
//
//	eppkit-extproc --endpoints 10.0.0.1:8000,10.0.0.2:8000 [--config FILE]
//	               [--grpc-listen :9002] [--metrics-listen :9090] [--proxy-listen ADDR]
//	               [--served-endpoint-metadata] [--objectives FILE] [--rewrites FILE]
//
// The gateway's ext_proc filter must send request and response bodies in
// FULL_DUPLEX_STREAMED mode (see the extproc package). GET /metrics on the
// metrics address serves the picker's metrics (llm_d_epp_* names), GET
// /healthz its liveness; the gRPC health service reports the processor. It
// stops on SIGINT or SIGTERM, draining open streams.
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
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/examples/extproc"
	"github.com/eppkit/eppkit/examples/extproc/prommetrics"
	"github.com/eppkit/eppkit/examples/httpproxy"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/requestcontrol"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run serves until ctx is done and returns the exit status: 0, 1 on a
// failure, 2 on a usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("eppkit-extproc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		configFile  = fs.String("config", "", "EndpointPickerConfig YAML (default: the built-in default configuration)")
		endpoints   = fs.String("endpoints", "", "endpoints: a comma-separated host:port list, or an endpoints file")
		grpcListen  = fs.String("grpc-listen", ":9002", "address of the ext_proc gRPC service")
		metricsAddr = fs.String("metrics-listen", ":9090", "address of /metrics and /healthz (empty: none)")
		proxyListen = fs.String("proxy-listen", "", "also serve the HTTP proxy adapter at this address")
		served      = fs.Bool("served-endpoint-metadata", false, "credit the endpoint the gateway reports in envoy.lb x-gateway-destination-endpoint-served")
		objectives  = fs.String("objectives", "", "InferenceObjective YAML documents")
		rewrites    = fs.String("rewrites", "", "InferenceModelRewrite YAML documents")
		drain       = fs.Duration("drain-timeout", 30*time.Second, "how long open streams may finish at shutdown")
		logLevel    = fs.String("log-level", "info", "log level: debug, info, warn or error")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var level slog.Level
	if *endpoints == "" || fs.NArg() > 0 || level.UnmarshalText([]byte(*logLevel)) != nil {
		fmt.Fprintln(stderr, "eppkit-extproc: --endpoints is required, --log-level must be debug, info, warn or error, and there are no arguments")
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	fail := func(err error) int {
		fmt.Fprintf(stderr, "eppkit-extproc: %v\n", err)
		return 1
	}

	rt, err := build(ctx, *configFile, *endpoints, *objectives, *rewrites, log)
	if err != nil {
		return fail(err)
	}
	defer rt.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	plugins := make(map[string]any, len(rt.Plugins))
	types := make(map[string]string, len(rt.Plugins))
	for _, p := range rt.Plugins {
		plugins[p.Name], types[p.Name] = p.Plugin, p.Type
	}
	m, err := prommetrics.New(reg, prommetrics.Options{Director: rt.Director, Plugins: plugins})
	if err != nil {
		return fail(err)
	}
	requestcontrol.Instrument(rt.Director, m, func(name string) string { return types[name] })
	if err := rt.DataLayer.Start(ctx); err != nil {
		return fail(err)
	}

	g, gctx := errgroup.WithContext(ctx)
	lis, err := net.Listen("tcp", *grpcListen)
	if err != nil {
		return fail(err)
	}
	srv := &extproc.Server{Director: rt.Director, Metrics: m, Logger: log, ServedEndpointMetadata: *served, DrainTimeout: *drain}
	g.Go(func() error { return srv.Serve(gctx, lis) })
	fmt.Fprintf(stdout, "eppkit-extproc: ext_proc on %s\n", lis.Addr())
	if *metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
		if err := serveHTTP(gctx, g, *metricsAddr, mux, stdout, "metrics"); err != nil {
			return fail(err)
		}
	}
	if *proxyListen != "" {
		p := &httpproxy.Proxy{Director: rt.Director, Metrics: m, Logger: log}
		if err := serveHTTP(gctx, g, *proxyListen, p, stdout, "HTTP proxy"); err != nil {
			return fail(err)
		}
	}
	if err := g.Wait(); err != nil && ctx.Err() == nil {
		return fail(err)
	}
	return 0
}

// serveHTTP serves h at addr in g until ctx is done, then shuts it down.
func serveHTTP(ctx context.Context, g *errgroup.Group, addr string, h http.Handler, stdout io.Writer, what string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s := httpproxy.NewServer(addr, h)
	fmt.Fprintf(stdout, "eppkit-extproc: %s on http://%s\n", what, ln.Addr())
	g.Go(func() error {
		if err := s.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return s.Shutdown(sctx)
	})
	return nil
}

// build loads the configuration, adds the endpoints' discovery, builds it
// and sets the objectives and model rewrites.
func build(ctx context.Context, configFile, endpoints, objectives, rewrites string, log *slog.Logger) (*config.Runtime, error) {
	var cfg *config.Config
	var err error
	if configFile == "" {
		cfg, err = config.Load(nil)
	} else {
		cfg, err = config.LoadFile(configFile)
	}
	if err != nil {
		return nil, err
	}
	eps, err := httpproxy.ParseEndpoints(ctx, endpoints)
	if err != nil {
		return nil, err
	}
	reg := std.Registry()
	if cfg, err = httpproxy.WithDiscovery(cfg, reg, eps); err != nil {
		return nil, err
	}
	rt, err := config.Build(ctx, cfg, reg, config.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	if objectives != "" {
		o, err := config.LoadObjectivesFile(objectives)
		if err != nil {
			_ = rt.Close()
			return nil, err
		}
		rt.Director.SetObjectives(o)
	}
	if rewrites != "" {
		rws, err := config.LoadModelRewritesFile(rewrites)
		if err != nil {
			_ = rt.Close()
			return nil, err
		}
		compiled, err := requestcontrol.NewModelRewrites(rws...)
		if err != nil {
			_ = rt.Close()
			return nil, err
		}
		rt.Director.SetModelRewrites(compiled)
	}
	return rt, nil
}
