// Command eppkit is the command-line front door to the eppkit library: list
// the plugin types, check a configuration and print what will actually run,
// and schedule one request offline with an explanation of the decision.
//
//	eppkit plugins [--output text|json|markdown]
//	eppkit config check FILE
//	eppkit schedule --endpoints FILE --request FILE [--config FILE] [--path P]
//	                [--explain] [--seed N] [--header "k: v"]... [--output text|json]
//	                [--objectives FILE] [--rewrites FILE] [--history FILE]
//	eppkit metrics parse [--engine E] FILE|-
//	eppkit kvevents decode [--hex] FILE|-
//	eppkit kvevents listen --bind ADDR [--count N] [--duration D]
//	eppkit proxy --endpoints FILE|host:port,... [--config FILE] [--listen ADDR]
//	eppkit fakeserver [--count N] [--base-port P]
//	eppkit simulate [--config A.yaml ...] [--servers N] [--workload W] [--seed N] [--out DIR]
//
// Exit status: 0 on success, 1 when the configuration is invalid or the
// request is rejected, 2 on a usage error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/std"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1 // invalid configuration, rejected request, unreadable input
	exitUsage = 2
)

const usage = `usage: eppkit <command> [arguments]

commands:
  plugins                 list the plugin types with their category and parameters
  config check FILE       validate a configuration; print the effective configuration,
                          the producer order, auto-created producers and warnings
  schedule                run one request through the pipeline offline and print the pick
  metrics parse FILE|-    print what the picker extracts from a /metrics dump, as JSON
  kvevents decode FILE|-  decode one KV-event batch payload (msgpack) to JSON
  kvevents listen         print KV events as engines publish them
  proxy                   run the HTTP proxy adapter in front of model servers
  fakeserver              run fake OpenAI-compatible model servers (tests and demos)
  simulate                compare routing configs on a simulated cluster (no arguments: a built-in demo)

Run "eppkit <command> -h" for a command's flags.
`

// cli carries the output streams and the plugin registry of one run.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	registry       func() *plugins.Registry
}

// run executes the command line args (without the program name) and returns
// the exit status. Tests call it in-process.
func run(args []string, stdout, stderr io.Writer) int {
	c := &cli{stdin: os.Stdin, stdout: stdout, stderr: stderr, registry: std.Registry}
	return c.run(args)
}

func (c *cli) run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(c.stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "plugins":
		return c.plugins(args[1:])
	case "config":
		return c.config(args[1:])
	case "schedule":
		return c.schedule(args[1:])
	case "kvevents":
		return c.kvevents(args[1:])
	case "metrics":
		return c.metrics(args[1:])
	case "simulate":
		return c.simulate(args[1:])
	case "proxy":
		return c.proxy(args[1:])
	case "fakeserver":
		return c.fakeserver(args[1:])
	case "help", "-h", "-help", "--help":
		fmt.Fprint(c.stdout, usage)
		return exitOK
	}
	fmt.Fprintf(c.stderr, "eppkit: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

// flags returns a flag set that reports to stderr and does not exit.
func (c *cli) flags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: eppkit %s\n\nflags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args into fs; it returns the exit status to use when parsing
// did not succeed (help or a usage error).
func parse(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return 0, true
}

func (c *cli) usageError(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "eppkit: "+format+"\n", args...)
	return exitUsage
}

func (c *cli) fail(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "eppkit: "+format+"\n", args...)
	return exitFail
}

// loadConfig loads the configuration at path ("-" is stdin; "" is the
// built-in default).
func (c *cli) loadConfig(path string) (*config.Config, error) {
	switch path {
	case "":
		return config.Load(nil)
	case "-":
		data, err := io.ReadAll(c.stdin)
		if err != nil {
			return nil, err
		}
		return config.Load(data)
	}
	return config.LoadFile(path)
}

// configError prints a configuration error as compiler-style lines
// "FILE:LINE: path: message", one per error.
func (c *cli) configError(file string, err error) int {
	errs := config.Errors(err)
	if len(errs) == 0 {
		return c.fail("%v", err)
	}
	if file == "" {
		file = "built-in configuration"
	}
	fmt.Fprintf(c.stderr, "eppkit: %s: invalid configuration\n", file)
	for _, e := range errs {
		loc := file
		if e.Line > 0 {
			loc = fmt.Sprintf("%s:%d", file, e.Line)
		}
		msg := e.Err.Error()
		if e.Path != "" {
			msg = e.Path + ": " + msg
		}
		for i, l := range strings.Split(msg, "\n") {
			if i == 0 {
				fmt.Fprintf(c.stderr, "%s: %s\n", loc, l)
			} else {
				fmt.Fprintf(c.stderr, "    %s\n", l)
			}
		}
	}
	return exitFail
}
