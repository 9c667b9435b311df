// Command simcharts draws the policy simulator's charts (PNG) from the
// series.json that "eppkit simulate --out DIR" writes, into the same
// directory:
//
//	simcharts DIR
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/eppkit/eppkit/sim"
	"github.com/eppkit/eppkit/sim/charts"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: simcharts DIR (the --out directory of eppkit simulate)")
		os.Exit(2)
	}
	dir := os.Args[1]
	data, err := os.ReadFile(filepath.Join(dir, "series.json"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "simcharts:", err)
		os.Exit(1)
	}
	var s sim.Series
	if err := json.Unmarshal(data, &s); err != nil {
		fmt.Fprintln(os.Stderr, "simcharts: series.json:", err)
		os.Exit(1)
	}
	files, err := charts.Write(&s, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "simcharts:", err)
		os.Exit(1)
	}
	for _, f := range files {
		fmt.Println("wrote", f)
	}
}
