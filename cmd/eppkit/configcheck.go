package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/eppkit/eppkit/config"
)

func (c *cli) config(args []string) int {
	if len(args) == 0 || args[0] != "check" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(c.stdout, "usage: eppkit config check FILE\n")
			return exitOK
		}
		return c.usageError("usage: eppkit config check FILE")
	}
	fs := c.flags("config check", "config check FILE   (FILE may be - for stdin)")
	if code, ok := parse(fs, args[1:]); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return c.usageError("config check: want one FILE, got %d arguments", fs.NArg())
	}
	file := fs.Arg(0)
	cfg, err := c.loadConfig(file)
	if err != nil {
		return c.configError(file, err)
	}
	rt, err := config.Build(context.Background(), cfg, c.registry(), config.Options{})
	if err != nil {
		return c.configError(file, err)
	}
	defer rt.Close()
	y, err := rt.Config.Effective()
	if err != nil {
		return c.fail("%v", err)
	}
	// The output is the effective configuration as YAML, then the facts about
	// it as comments, so it can be archived and diffed as it is.
	fmt.Fprintf(c.stdout, "# effective configuration of %s\n", file)
	c.stdout.Write(y)
	fmt.Fprintln(c.stdout, "#")
	fmt.Fprintf(c.stdout, "# producer order: %s\n", listOrNone(rt.ProducerOrder))
	if len(rt.AutoCreated) == 0 {
		fmt.Fprintln(c.stdout, "# auto-created producers: none")
	} else {
		fmt.Fprintln(c.stdout, "# auto-created producers:")
		for _, a := range rt.AutoCreated {
			fmt.Fprintf(c.stdout, "#   %s\n", a)
		}
	}
	if len(rt.Warnings) == 0 {
		fmt.Fprintln(c.stdout, "# warnings: none")
	} else {
		fmt.Fprintf(c.stdout, "# warnings (%d):\n", len(rt.Warnings))
		for _, w := range rt.Warnings {
			fmt.Fprintf(c.stdout, "#   %s\n", w)
		}
	}
	fmt.Fprintf(c.stdout, "# %s: OK\n", file)
	return exitOK
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " → ")
}
