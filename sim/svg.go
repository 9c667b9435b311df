package sim

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// The charts as SVG, with the standard library only: the same charts as the
// nested module sim/charts draws as PNG images, so that "eppkit simulate"
// writes images without the eppkit module depending on a plotting library.

// WriteSVG draws the charts of s as SVG images into dir (created if need be)
// and returns the files written: ttft-cdf.svg (every configuration's TTFT
// CDF on a log time axis), then load-<config>.svg per configuration (each
// server's running plus waiting requests over time, on the same scale for
// every configuration). Config names are sanitized into file names as by
// sim/charts. The output is deterministic.
func (s *Series) WriteSVG(dir string) ([]string, error) {
	var cfgs []ConfigSeries
	if s != nil {
		cfgs = s.Configs
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	names, charts := []string{"ttft-cdf.svg"}, []*svgChart{svgCDF(cfgs)}
	peak := 0
	for _, c := range cfgs {
		for _, row := range c.Load {
			for _, v := range row {
				peak = max(peak, v)
			}
		}
	}
	for _, c := range cfgs {
		names = append(names, "load-"+svgUnsafe.ReplaceAllString(c.Name, "_")+".svg")
		charts = append(charts, svgLoad(c, peak))
	}
	var files []string
	for i, ch := range charts {
		f := filepath.Join(dir, names[i])
		if err := os.WriteFile(f, ch.render(), 0o644); err != nil {
			return files, fmt.Errorf("sim: %w", err)
		}
		files = append(files, f)
	}
	return files, nil
}

var svgUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// svgMinTTFT is the floor of the log TTFT axis (1ms).
const svgMinTTFT = 1e-3

// Layout in pixels: the plot area, with the legend to its right.
const (
	svgWidth, svgHeight                = 880, 500
	svgLeft, svgRight, svgTop, svgBott = 70.0, 690.0, 50.0, 440.0
	svgLegendRow                       = 18.0
)

// svgColors are the Tableau 10 colours; svgDashes tell lines apart once the
// colours repeat.
var (
	svgColors = [...]string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
		"#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}
	svgDashes = [...]string{"", "6,3", "2,3", "8,3,2,3"}
)

// svgChart is a line chart in axis units (a log axis is given as log10).
type svgChart struct {
	title, xLabel, yLabel string
	x0, x1, y0, y1        float64
	xTicks, yTicks        []svgTick
	xMinor                []float64 // unlabelled ticks
	stroke                float64
	lines                 []svgLine // a line without points is a legend entry only
}

type svgTick struct {
	at    float64
	label string
}

type svgLine struct {
	name string
	pts  [][2]float64
}

// svgCDF is the TTFT CDF chart: x is log10 seconds, y the fraction of requests.
func svgCDF(cfgs []ConfigSeries) *svgChart {
	c := &svgChart{title: "Time to first token (CDF)", xLabel: "TTFT (seconds, log scale)",
		yLabel: "fraction of requests", y1: 1, stroke: 2}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, cs := range cfgs {
		l := svgLine{name: cs.Name}
		n := len(cs.TTFTQuantiles)
		for j, v := range cs.TTFTQuantiles {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			x := max(math.Log10(max(v, svgMinTTFT)), -3)
			if n == 1 { // one value: the CDF steps from 0 to 1 there
				l.pts = append(l.pts, [2]float64{x, 0}, [2]float64{x, 1})
			} else {
				l.pts = append(l.pts, [2]float64{x, float64(j) / float64(n-1)})
			}
			lo, hi = min(lo, x), max(hi, x)
		}
		if len(l.pts) == 0 {
			l.name += " (no data)"
		}
		c.lines = append(c.lines, l)
	}
	if lo > hi {
		lo, hi = -3, 1 // no data: 1ms to 10s
	}
	c.x0, c.x1 = math.Floor(lo+1e-9), math.Ceil(hi-1e-9)
	if c.x1 <= c.x0 {
		c.x1 = c.x0 + 1
	}
	step := math.Ceil((c.x1 - c.x0) / 12) // at most 13 decade labels
	for k := c.x0; k <= c.x1; k += step {
		c.xTicks = append(c.xTicks, svgTick{k, svgDecade(int(k))})
		for m := 2.0; step == 1 && k < c.x1 && m < 10; m++ {
			c.xMinor = append(c.xMinor, k+math.Log10(m))
		}
	}
	c.yTicks = svgTicks(0, 1, 0.1)
	return c
}

// svgDecade labels 10^k seconds: 1ms, 10ms, 100ms, 1s, 10s, 100s, 1000s, 1e4s.
func svgDecade(k int) string {
	switch {
	case k >= -3 && k < 0:
		return strconv.Itoa(int(math.Round(math.Pow10(k+3)))) + "ms"
	case k >= 0 && k <= 3:
		return strconv.Itoa(int(math.Round(math.Pow10(k)))) + "s"
	}
	return "1e" + strconv.Itoa(k) + "s"
}

// svgLoad is one configuration's per-server load chart, y up to peak.
func svgLoad(cs ConfigSeries, peak int) *svgChart {
	c := &svgChart{title: "Per-server load over time: " + cs.Name, xLabel: "virtual time (seconds)",
		yLabel: "requests per server (running + waiting)", stroke: 1.2}
	dt := cs.LoadInterval
	if !(dt >= 1e-6) || math.IsInf(dt, 0) {
		dt = 1
	}
	servers := 0
	for _, row := range cs.Load {
		servers = max(servers, len(row))
	}
	for s := range servers {
		l := svgLine{name: fmt.Sprintf("server-%d", s)}
		for i, row := range cs.Load {
			v := 0
			if s < len(row) {
				v = row[s]
			}
			l.pts = append(l.pts, [2]float64{float64(i) * dt, float64(v)})
		}
		c.lines = append(c.lines, l)
	}
	c.x1 = float64(len(cs.Load)-1) * dt
	if !(c.x1 > 0) || math.IsInf(c.x1, 0) {
		c.x1 = dt
	}
	c.xTicks = svgTicks(0, c.x1, svgStep(c.x1, 10))
	step := max(svgStep(float64(peak), 8), 1)
	c.y1 = max(math.Ceil(float64(peak)/step), 1) * step
	c.yTicks = svgTicks(0, c.y1, step)
	return c
}

// svgStep is a round step (1, 2 or 5 times a power of ten) cutting span
// into at most about n parts.
func svgStep(span float64, n int) float64 {
	if !(span > 0) || math.IsInf(span, 0) {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow10(int(math.Floor(math.Log10(raw))))
	for _, m := range []float64{1, 2, 5} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// svgTicks are the multiples of step from lo to hi (at most 101).
func svgTicks(lo, hi, step float64) []svgTick {
	dec := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	var t []svgTick
	for i := 0; i <= 100; i++ {
		v := lo + float64(i)*step
		if v > hi+step*1e-9 {
			break
		}
		t = append(t, svgTick{v, strconv.FormatFloat(v, 'f', dec, 64)})
	}
	return t
}

// render writes the chart as an SVG 1.1 document.
func (c *svgChart) render() []byte {
	if !(c.x1 > c.x0) || math.IsInf(c.x1-c.x0, 0) {
		c.x0, c.x1 = 0, 1
	}
	if !(c.y1 > c.y0) || math.IsInf(c.y1-c.y0, 0) {
		c.y0, c.y1 = 0, 1
	}
	px := func(x float64) float64 {
		return svgLeft + (min(max(x, c.x0), c.x1)-c.x0)/(c.x1-c.x0)*(svgRight-svgLeft)
	}
	py := func(y float64) float64 { return svgBott - (min(max(y, c.y0), c.y1)-c.y0)/(c.y1-c.y0)*(svgBott-svgTop) }
	var w bytes.Buffer
	line := func(x1, y1, x2, y2 float64, attrs string) {
		fmt.Fprintf(&w, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" %s/>\n", svgNum(x1), svgNum(y1), svgNum(x2), svgNum(y2), attrs)
	}
	text := func(x, y float64, attrs, s string) {
		fmt.Fprintf(&w, "<text x=\"%s\" y=\"%s\" %s>%s</text>\n", svgNum(x), svgNum(y), attrs, svgEscape(s))
	}
	fmt.Fprintf(&w, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" viewBox="0 0 %[1]d %[2]d" font-family="sans-serif" font-size="12">
<rect width="%[1]d" height="%[2]d" fill="#ffffff"/>
`, svgWidth, svgHeight)
	mid := (svgLeft + svgRight) / 2
	text(mid, 28, `font-size="16" text-anchor="middle"`, c.title)
	for _, tk := range c.xTicks {
		line(px(tk.at), svgTop, px(tk.at), svgBott, `stroke="#dddddd"`)
		text(px(tk.at), svgBott+18, `text-anchor="middle"`, tk.label)
	}
	for _, m := range c.xMinor {
		line(px(m), svgBott, px(m), svgBott+4, `stroke="#333333"`)
	}
	for _, tk := range c.yTicks {
		line(svgLeft, py(tk.at), svgRight, py(tk.at), `stroke="#dddddd"`)
		text(svgLeft-6, py(tk.at), `text-anchor="end" dy="0.35em"`, tk.label)
	}
	fmt.Fprintf(&w, "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"none\" stroke=\"#333333\"/>\n",
		svgNum(svgLeft), svgNum(svgTop), svgNum(svgRight-svgLeft), svgNum(svgBott-svgTop))
	text(mid, svgHeight-18, `text-anchor="middle"`, c.xLabel)
	fmt.Fprintf(&w, "<text transform=\"translate(20 %s) rotate(-90)\" text-anchor=\"middle\">%s</text>\n", svgNum((svgTop+svgBott)/2), svgEscape(c.yLabel))
	drawn := false
	for i, ln := range c.lines {
		if len(ln.pts) == 0 {
			continue
		}
		drawn = true
		pts := make([]string, len(ln.pts))
		for j, p := range ln.pts {
			pts[j] = svgNum(px(p[0])) + "," + svgNum(py(p[1]))
		}
		fmt.Fprintf(&w, "<polyline fill=\"none\" stroke=\"%s\"%s stroke-width=\"%s\" stroke-linejoin=\"round\" points=\"%s\"/>\n",
			svgColor(i), svgDash(i), svgNum(c.stroke), strings.Join(pts, " "))
		if len(ln.pts) == 1 { // a lone point draws nothing as a line
			fmt.Fprintf(&w, "<circle cx=\"%s\" cy=\"%s\" r=\"3\" fill=\"%s\"/>\n", svgNum(px(ln.pts[0][0])), svgNum(py(ln.pts[0][1])), svgColor(i))
		}
	}
	if !drawn {
		text(mid, (svgTop+svgBott)/2, `text-anchor="middle" fill="#777777"`, "no data")
	}
	const rows = 21 // legend rows that fit beside the plot area
	for i, ln := range c.lines {
		y := svgTop + 10 + float64(i)*svgLegendRow
		if i == rows-1 && len(c.lines) > rows {
			text(svgRight+15, y, `dy="0.35em"`, fmt.Sprintf("+%d more", len(c.lines)-i))
			break
		}
		line(svgRight+15, y, svgRight+37, y, `stroke="`+svgColor(i)+`"`+svgDash(i)+` stroke-width="2"`)
		text(svgRight+42, y, `dy="0.35em"`, svgTrunc(ln.name, 18))
	}
	w.WriteString("</svg>\n")
	return w.Bytes()
}

func svgColor(i int) string { return svgColors[i%len(svgColors)] }

func svgDash(i int) string {
	if d := svgDashes[i/len(svgColors)%len(svgDashes)]; d != "" {
		return ` stroke-dasharray="` + d + `"`
	}
	return ""
}

// svgNum formats a coordinate with one decimal.
func svgNum(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// svgTrunc shortens s to n runes with an ellipsis.
func svgTrunc(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func svgEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}
