// Package charts draws the policy simulator's charts as PNG images with
// gonum.org/v1/plot: the TTFT distribution of every configuration (a CDF on
// a log time axis) and each configuration's per-server load over time.
//
// It is a nested module so the eppkit module does not depend on a plotting
// library. It reads the chart data the simulator writes (sim.Series, the
// series.json of "eppkit simulate --out DIR"):
//
//	eppkit simulate --out out
//	cd sim/charts && go run ./cmd/simcharts ../../out
package charts

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/eppkit/eppkit/sim"
)

// Size of every chart.
const (
	Width  = 8 * vg.Inch
	Height = 5 * vg.Inch
)

// Write draws every chart of s into dir and returns the files written:
// ttft-cdf.png, then load-<config>.png per configuration.
func Write(s *sim.Series, dir string) ([]string, error) {
	var files []string
	p, err := TTFTCDF(s)
	if err != nil {
		return nil, err
	}
	f := filepath.Join(dir, "ttft-cdf.png")
	if err := p.Save(Width, Height, f); err != nil {
		return nil, fmt.Errorf("charts: %w", err)
	}
	files = append(files, f)
	for _, c := range s.Configs {
		p, err := Load(c)
		if err != nil {
			return nil, err
		}
		f := filepath.Join(dir, "load-"+fileName(c.Name)+".png")
		if err := p.Save(Width, Height, f); err != nil {
			return nil, fmt.Errorf("charts: %w", err)
		}
		files = append(files, f)
	}
	return files, nil
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func fileName(name string) string { return unsafeChars.ReplaceAllString(name, "_") }

// minTTFT is the floor of the log axis (1ms).
const minTTFT = 1e-3

// TTFTCDF plots the fraction of requests with a TTFT at most x, one line
// per configuration, on a logarithmic time axis.
func TTFTCDF(s *sim.Series) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Time to first token (CDF)"
	p.X.Label.Text = "TTFT (seconds, log scale)"
	p.Y.Label.Text = "fraction of requests"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	for i, c := range s.Configs {
		n := len(c.TTFTQuantiles)
		if n == 0 {
			continue
		}
		xy := make(plotter.XYs, n)
		for j, v := range c.TTFTQuantiles {
			xy[j].X = math.Max(v, minTTFT)
			xy[j].Y = float64(j) / math.Max(float64(n-1), 1)
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, fmt.Errorf("charts: %s: %w", c.Name, err)
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i / len(plotutil.DefaultColors))
		l.Width = vg.Points(2)
		p.Add(l)
		p.Legend.Add(c.Name, l)
	}
	p.Legend.Left = false
	p.Legend.Top = false
	p.Legend.XOffs = -vg.Points(10)
	p.Legend.YOffs = vg.Points(10)
	return p, nil
}

// Load plots each server's requests (running plus waiting) over time for
// one configuration: balanced routing gives lines close together.
func Load(c sim.ConfigSeries) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Per-server load over time: " + c.Name
	p.X.Label.Text = "simulated time (seconds)"
	p.Y.Label.Text = "requests on the server (running + waiting)"
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	if len(c.Load) == 0 {
		return p, nil
	}
	servers := len(c.Load[0])
	for s := range servers {
		xy := make(plotter.XYs, len(c.Load))
		for i, row := range c.Load {
			xy[i].X = float64(i) * c.LoadInterval
			if s < len(row) {
				xy[i].Y = float64(row[s])
			}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, fmt.Errorf("charts: %s: %w", c.Name, err)
		}
		l.Color = plotutil.Color(s)
		l.Dashes = plotutil.Dashes(s / len(plotutil.DefaultColors)) // colours repeat: vary the dashes
		l.Width = vg.Points(1.2)
		p.Add(l)
		if servers <= 16 {
			p.Legend.Add(fmt.Sprintf("server-%d", s), l)
		}
	}
	p.Legend.Top = true
	p.Legend.Left = true
	return p, nil
}
