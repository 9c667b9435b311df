package main

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/eppkit/eppkit/examples/fakeserver"
)

const fakeserverSynopsis = `fakeserver [--count N] [--base-port P] [--host H] [--model M] [--lora a,b,...]
                  [--max-running N] [--kv-blocks N] [--block-size N]
                  [--prefill-per-token D] [--decode-per-token D] [--output-tokens N]
                  [--kv-events tcp://host:port] [--kv-events-bind]

Runs N fake OpenAI-compatible model servers in this process, at ports P,
P+1, ... (0: free ports), until SIGINT or SIGTERM. Each serves completions
and chat completions (streaming too), /v1/models, the render endpoints and
vLLM-named /metrics reflecting its simulated queue, batch, KV cache and LoRA
slots, and names itself in the x-served-by response header. Prefill costs
--prefill-per-token per uncached prompt token, so cached prefix blocks skip
it; decoding costs --decode-per-token per output token. With --kv-events the
servers publish KV-cache events over ZeroMQ: connecting to that endpoint,
or binding it (port + i for server i) with --kv-events-bind.`

func (c *cli) fakeserver(args []string) int {
	fs := c.flags("fakeserver", fakeserverSynopsis)
	var (
		count    = fs.Int("count", 1, "number of servers")
		basePort = fs.Int("base-port", 8000, "port of the first server (0: free ports)")
		host     = fs.String("host", "127.0.0.1", "address to listen on")
		cfg      fakeserver.Config
		loras    string
		events   string
		bind     bool
	)
	fs.StringVar(&cfg.Model, "model", "fake-model", "base model served")
	fs.StringVar(&loras, "lora", "", "comma-separated LoRA adapters loaded at start")
	fs.IntVar(&cfg.MaxLoRAs, "max-loras", 4, "LoRA adapter slots")
	fs.IntVar(&cfg.MaxRunning, "max-running", 256, "requests in the running batch; more wait in the queue")
	fs.IntVar(&cfg.KVBlocks, "kv-blocks", 8192, "KV-cache size in blocks")
	fs.IntVar(&cfg.BlockSize, "block-size", 16, "KV-cache block size in tokens")
	fs.DurationVar(&cfg.PrefillPerToken, "prefill-per-token", 0, "prefill time per uncached prompt token")
	fs.DurationVar(&cfg.DecodePerToken, "decode-per-token", 0, "time per output token")
	fs.IntVar(&cfg.OutputTokens, "output-tokens", 16, "completion length when the request sets no max_tokens")
	fs.StringVar(&events, "kv-events", "", "publish KV events to (or, with --kv-events-bind, at) this ZeroMQ endpoint")
	fs.BoolVar(&bind, "kv-events-bind", false, "bind the KV-event endpoint instead of connecting to it")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	switch {
	case fs.NArg() > 0:
		return c.usageError("fakeserver: unexpected argument %q", fs.Arg(0))
	case *count < 1 || *count > 1000:
		return c.usageError("fakeserver: --count must be 1 to 1000, not %d", *count)
	case *basePort < 0 || *basePort+*count-1 > 65535:
		return c.usageError("fakeserver: --base-port %d does not leave room for %d servers", *basePort, *count)
	case bind && events == "":
		return c.usageError("fakeserver: --kv-events-bind needs --kv-events")
	}
	if loras != "" {
		cfg.LoRAs = strings.Split(loras, ",")
	}
	if events != "" {
		cfg.KVEvents = &fakeserver.KVEvents{Endpoint: events, Bind: bind}
	}
	cfg.Logger = slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signalContext()
	defer stop()
	cl, err := fakeserver.StartCluster(cfg, *host, *basePort, *count)
	if err != nil {
		return c.fail("fakeserver: %v", err)
	}
	defer cl.Close()
	fmt.Fprintf(c.stdout, "eppkit fakeserver: %d servers of model %s: %s\n", *count, cfg.Model, strings.Join(cl.Addrs(), ","))
	<-ctx.Done()
	return exitOK
}
