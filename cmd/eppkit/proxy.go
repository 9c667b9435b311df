package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/examples/httpproxy"
	"github.com/eppkit/eppkit/requestcontrol"
)

const proxySynopsis = `proxy --endpoints FILE|host:port,... [--config FILE] [--listen ADDR]
             [--objectives FILE] [--rewrites FILE] [--scheme http|https] [--log-level L]

Runs the HTTP proxy adapter: every request goes through the whole pipeline
(parse, model rewrite, objective, admission, producers, scheduling) and is
forwarded to the picked endpoint, falling back to the next pick when the
endpoint cannot be reached. Streams are flushed as they arrive; rejections
get their status and x-llm-d-request-dropped-reason header. The endpoints are
a comma-separated host:port list, or an endpoints file (file-discovery's
format, reloaded when it changes); their metrics are scraped from /metrics.
GET /healthz on the proxy answers 200 while it serves. It stops on SIGINT or
SIGTERM, letting requests in flight finish for up to 30s.`

// signalContext is the context a serving command runs in: done on SIGINT
// or SIGTERM. Tests replace it.
var signalContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// drainTimeout bounds a graceful shutdown.
const drainTimeout = 30 * time.Second

func (c *cli) proxy(args []string) int {
	fs := c.flags("proxy", proxySynopsis)
	var (
		configFile = fs.String("config", "", "EndpointPickerConfig YAML (default: the built-in default configuration)")
		endpoints  = fs.String("endpoints", "", "endpoints: a comma-separated host:port list, or an endpoints file")
		listen     = fs.String("listen", "127.0.0.1:8080", "address to serve on")
		objectives = fs.String("objectives", "", "InferenceObjective YAML documents (metadata.name, spec.priority)")
		rewrites   = fs.String("rewrites", "", "InferenceModelRewrite YAML documents")
		scheme     = fs.String("scheme", "http", "scheme of the endpoints: http or https")
		logLevel   = fs.String("log-level", "info", "log level: debug, info, warn or error")
	)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	switch {
	case fs.NArg() > 0:
		return c.usageError("proxy: unexpected argument %q", fs.Arg(0))
	case *endpoints == "":
		return c.usageError("proxy: --endpoints is required")
	case *scheme != "http" && *scheme != "https":
		return c.usageError("proxy: --scheme must be http or https, not %q", *scheme)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return c.usageError("proxy: --log-level: %v", err)
	}
	log := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signalContext()
	defer stop()
	rt, code := c.buildRuntime(ctx, *configFile, *endpoints, *objectives, *rewrites, log)
	if rt == nil {
		return code
	}
	defer rt.Close()
	if err := rt.DataLayer.Start(ctx); err != nil {
		return c.fail("proxy: %v", err)
	}
	p := &httpproxy.Proxy{Director: rt.Director, Scheme: *scheme, Logger: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.Handle("/", p)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return c.fail("proxy: %v", err)
	}
	srv := httpproxy.NewServer(*listen, mux)
	srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	fmt.Fprintf(c.stdout, "eppkit proxy: listening on http://%s, endpoints %s\n", ln.Addr(), *endpoints)
	return c.serve(ctx, srv, ln, "proxy")
}

// buildRuntime loads the configuration, adds the endpoints' discovery,
// builds it and sets the objectives and model rewrites. On failure it
// returns nil and the exit status.
func (c *cli) buildRuntime(ctx context.Context, configFile, endpoints, objectives, rewrites string, log *slog.Logger) (*config.Runtime, int) {
	cfg, err := c.loadConfig(configFile)
	if err != nil {
		return nil, c.configError(configFile, err)
	}
	eps, err := httpproxy.ParseEndpoints(ctx, endpoints)
	if err != nil {
		return nil, c.usageError("%v", err)
	}
	reg := c.registry()
	if cfg, err = httpproxy.WithDiscovery(cfg, reg, eps); err != nil {
		return nil, c.configError(configFile, err)
	}
	rt, err := config.Build(ctx, cfg, reg, config.Options{Logger: log})
	if err != nil {
		return nil, c.configError(configFile, err)
	}
	if objectives != "" {
		o, err := config.LoadObjectivesFile(objectives)
		if err != nil {
			_ = rt.Close()
			return nil, c.configError(objectives, err)
		}
		rt.Director.SetObjectives(o)
	}
	if rewrites != "" {
		rws, err := config.LoadModelRewritesFile(rewrites)
		if err != nil {
			_ = rt.Close()
			return nil, c.configError(rewrites, err)
		}
		compiled, err := requestcontrol.NewModelRewrites(rws...)
		if err != nil {
			_ = rt.Close()
			return nil, c.fail("%s: %v", rewrites, err)
		}
		rt.Director.SetModelRewrites(compiled)
	}
	return rt, exitOK
}

// serve serves srv on ln until ctx is done, then shuts it down gracefully.
func (c *cli) serve(ctx context.Context, srv *http.Server, ln net.Listener, name string) int {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return c.fail("%s: %v", name, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return c.fail("%s: shutdown: %v", name, err)
	}
	<-errc
	return exitOK
}
