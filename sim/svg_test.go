package sim_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/sim"
)

// The plot area of every chart, in pixels.
const plotL, plotR, plotT, plotB = 70, 690, 50, 440

// svgDoc is what a test reads back from a chart.
type svgDoc struct {
	raw     string
	lines   [][][2]float64 // the polylines' points
	texts   []string       // unescaped, in document order
	circles int
	dashed  int
}

// readSVG parses a written chart with encoding/xml: it must be well formed
// SVG 1.1 with finite coordinates.
func readSVG(t *testing.T, path string) svgDoc {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := svgDoc{raw: string(data)}
	d := xml.NewDecoder(bytes.NewReader(data))
	depth, inText := 0, false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: not well formed: %v", path, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range tok.Attr {
				attr[a.Name.Local] = a.Value
			}
			if depth == 0 && (tok.Name.Local != "svg" || tok.Name.Space != "http://www.w3.org/2000/svg" ||
				attr["version"] != "1.1" || attr["width"] == "" || attr["height"] == "" || attr["viewBox"] == "") {
				t.Fatalf("%s: root %v %v", path, tok.Name, attr)
			}
			depth++
			switch tok.Name.Local {
			case "polyline":
				var pts [][2]float64
				for _, f := range strings.Fields(attr["points"]) {
					x, y, _ := strings.Cut(f, ",")
					px, err1 := strconv.ParseFloat(x, 64)
					py, err2 := strconv.ParseFloat(y, 64)
					if err1 != nil || err2 != nil || math.IsNaN(px+py) || math.IsInf(px+py, 0) {
						t.Fatalf("%s: point %q", path, f)
					}
					pts = append(pts, [2]float64{px, py})
				}
				doc.lines = append(doc.lines, pts)
				if attr["stroke-dasharray"] != "" {
					doc.dashed++
				}
			case "circle":
				doc.circles++
			case "text":
				inText = true
				doc.texts = append(doc.texts, "")
			}
		case xml.EndElement:
			depth--
			inText = false
		case xml.CharData:
			if inText {
				doc.texts[len(doc.texts)-1] += string(tok)
			}
		}
	}
	return doc
}

// inPlot fails unless every point lies in the plot area.
func (d svgDoc) inPlot(t *testing.T) {
	t.Helper()
	for _, l := range d.lines {
		for _, p := range l {
			if p[0] < plotL || p[0] > plotR || p[1] < plotT || p[1] > plotB {
				t.Fatalf("point %v outside the plot area", p)
			}
		}
	}
}

func (d svgDoc) hasText(s string) bool { return slices.Contains(d.texts, s) }

func lineLens(d svgDoc) []int {
	var n []int
	for _, l := range d.lines {
		n = append(n, len(l))
	}
	return n
}

func writeSVG(t *testing.T, s *sim.Series) []string {
	t.Helper()
	files, err := s.WriteSVG(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func testSeries() *sim.Series {
	return &sim.Series{Configs: []sim.ConfigSeries{
		{Name: "random", TTFTQuantiles: []float64{0.02, 0.05, 0.1, 0.5, 2}, LoadInterval: 1,
			Load: [][]int{{1, 2}, {4, 3}, {0, 1}}},
		{Name: "a<b&c", TTFTQuantiles: []float64{0.01, 0.2, 0.3}, LoadInterval: 1,
			Load: [][]int{{1, 1}, {5, 2}, {0, 0}}},
		{Name: "x / y", TTFTQuantiles: []float64{1, 1, 1}, LoadInterval: 1,
			Load: [][]int{{2, 2}, {10, 7}, {1, 0}}},
	}}
}

func TestSVGCharts(t *testing.T) {
	files := writeSVG(t, testSeries())
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	if want := []string{"ttft-cdf.svg", "load-random.svg", "load-a_b_c.svg", "load-x_y.svg"}; !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}

	cdf := readSVG(t, files[0])
	if got := lineLens(cdf); !slices.Equal(got, []int{5, 3, 3}) {
		t.Fatalf("CDF polylines have %v points, want [5 3 3]", got)
	}
	cdf.inPlot(t)
	for i, l := range cdf.lines {
		for j := 1; j < len(l); j++ { // rises left to right (SVG y grows down)
			if l[j][0] < l[j-1][0] || l[j][1] > l[j-1][1] {
				t.Fatalf("CDF %d does not rise: %v then %v", i, l[j-1], l[j])
			}
		}
		if l[0][1] != plotB || l[len(l)-1][1] != plotT {
			t.Errorf("CDF %d goes from y=%v to y=%v, want %d to %d", i, l[0][1], l[len(l)-1][1], plotB, plotT)
		}
	}
	// 10ms to 2s: the decades 10ms to 10s, 10ms on the left edge, 1s two
	// thirds along.
	if l := cdf.lines[1]; l[0][0] != plotL {
		t.Errorf("10ms at x=%v, want %d", l[0][0], plotL)
	}
	if x := cdf.lines[2][0][0]; math.Abs(x-(plotL+2*(plotR-plotL)/3.0)) > 0.1 {
		t.Errorf("1s at x=%v", x)
	}
	for _, s := range []string{"10ms", "100ms", "1s", "10s", "random", "a<b&c", "x / y", "Time to first token (CDF)"} {
		if !cdf.hasText(s) {
			t.Errorf("CDF chart lacks the text %q: %q", s, cdf.texts)
		}
	}
	if !strings.Contains(cdf.raw, "a&lt;b&amp;c") || strings.Contains(cdf.raw, "a<b&c") {
		t.Error("the config name is not escaped")
	}

	var loads []svgDoc
	for i, f := range files[1:] {
		d := readSVG(t, f)
		if got := lineLens(d); !slices.Equal(got, []int{3, 3}) {
			t.Fatalf("%s: polylines with %v points, want [3 3]", f, got)
		}
		d.inPlot(t)
		if title := "Per-server load over time: " + testSeries().Configs[i].Name; d.texts[0] != title {
			t.Errorf("title %q, want %q", d.texts[0], title)
		}
		if !d.hasText("server-0") || !d.hasText("server-1") {
			t.Errorf("%s: legend %q", f, d.texts)
		}
		loads = append(loads, d)
	}
	// One y scale for all configurations: the peak (10) is at the top, and
	// the axes are labelled alike.
	if p := loads[2].lines[0][1]; p != [2]float64{(plotL + plotR) / 2, plotT} {
		t.Errorf("peak at %v", p)
	}
	if p := loads[0].lines[0][1]; p != [2]float64{(plotL + plotR) / 2, plotB - 0.4*(plotB-plotT)} {
		t.Errorf("load 4 of 10 at %v", p)
	}
	for _, d := range loads[1:] {
		if !slices.Equal(d.texts[1:], loads[0].texts[1:]) {
			t.Errorf("axes differ: %q and %q", d.texts[1:], loads[0].texts[1:])
		}
	}
}

func TestSVGDeterministic(t *testing.T) {
	s := testSeries()
	q := make([]float64, 1000)
	for i := range q {
		q[i] = 0.003 * math.Exp(float64(i)/150)
	}
	s.Configs[0].TTFTQuantiles = q
	a, b := writeSVG(t, s), writeSVG(t, s)
	if len(a) != len(b) {
		t.Fatalf("%d and %d files", len(a), len(b))
	}
	for i := range a {
		x, err1 := os.ReadFile(a[i])
		y, err2 := os.ReadFile(b[i])
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two writes (%v, %v)", filepath.Base(a[i]), err1, err2)
		}
	}
	if n := lineLens(readSVG(t, a[0])); n[0] != 1000 {
		t.Errorf("%d points for 1000 quantiles", n[0])
	}
}

func TestSVGEdgeCases(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	for _, tc := range []struct {
		name  string
		s     *sim.Series
		files int
		cdf   []int    // points per CDF polyline
		load  []int    // points per polyline of the first load chart
		texts []string // texts the charts must hold
		check func(t *testing.T, cdf, load svgDoc)
	}{
		{name: "nil", s: nil, files: 1, texts: []string{"no data"}},
		{name: "no configs", s: &sim.Series{}, files: 1, texts: []string{"no data", "1ms", "10s"}},
		{name: "no data", s: &sim.Series{Configs: []sim.ConfigSeries{{Name: "empty"}}}, files: 2,
			texts: []string{"empty (no data)", "no data"}},
		{name: "floor", files: 2, s: &sim.Series{Configs: []sim.ConfigSeries{{Name: "c",
			TTFTQuantiles: []float64{-1, 0, 0.0005, 0.001, 0.5}}}}, cdf: []int{5}, texts: []string{"1ms", "1s"},
			check: func(t *testing.T, cdf, _ svgDoc) {
				for _, p := range cdf.lines[0][:4] {
					if p[0] != plotL {
						t.Errorf("TTFT at most 1ms at x=%v, want the left edge", p[0])
					}
				}
			}},
		{name: "NaN and Inf skipped", files: 2, s: &sim.Series{Configs: []sim.ConfigSeries{{Name: "c",
			TTFTQuantiles: []float64{nan, 0.1, 0.2, inf}, LoadInterval: nan, Load: [][]int{{1}, {2}}}}}, cdf: []int{2}, load: []int{2}},
		{name: "all equal", files: 3, s: &sim.Series{Configs: []sim.ConfigSeries{
			{Name: "a", TTFTQuantiles: []float64{1, 1, 1, 1}, Load: [][]int{{0, 0}, {0, 0}}},
			{Name: "b", TTFTQuantiles: []float64{1, 1}}}}, cdf: []int{4, 2}, load: []int{2, 2}, texts: []string{"1s", "10s"}},
		{name: "one value", files: 2, s: &sim.Series{Configs: []sim.ConfigSeries{{Name: "c", TTFTQuantiles: []float64{0.3}}}},
			cdf: []int{2}, check: func(t *testing.T, cdf, _ svgDoc) {
				if l := cdf.lines[0]; l[0][0] != l[1][0] || l[0][1] != plotB || l[1][1] != plotT {
					t.Errorf("one TTFT: %v, want a step from 0 to 1", l)
				}
			}},
		{name: "one load sample", files: 2, s: &sim.Series{Configs: []sim.ConfigSeries{{Name: "c", LoadInterval: 1,
			Load: [][]int{{3, 4}}}}}, load: []int{1, 1},
			check: func(t *testing.T, _, load svgDoc) {
				if load.circles != 2 {
					t.Errorf("%d dots for two lone points, want 2", load.circles)
				}
			}},
		{name: "ragged rows", files: 2, s: &sim.Series{Configs: []sim.ConfigSeries{{Name: "c", LoadInterval: -1,
			Load: [][]int{{1}, {1, 2}, {}, {-5, 1 << 40}}}}}, load: []int{4, 4}},
		{name: "huge", files: 2, s: &sim.Series{Configs: []sim.ConfigSeries{{Name: "c",
			TTFTQuantiles: []float64{1e-300, 1e300}, LoadInterval: 1e300, Load: [][]int{{1}, {2}, {3}}}}},
			cdf: []int{2}, load: []int{3}, texts: []string{"1ms", "1e23s"}},
		{name: "many servers", files: 2, s: &sim.Series{Configs: []sim.ConfigSeries{{Name: "c", LoadInterval: 1,
			Load: [][]int{make([]int, 30), make([]int, 30)}}}}, load: slices.Repeat([]int{2}, 30),
			texts: []string{"server-19", "+10 more"},
			check: func(t *testing.T, _, load svgDoc) {
				if load.hasText("server-20") || load.dashed != 20 {
					t.Errorf("legend past its room, or %d dashed lines, want 20", load.dashed)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := writeSVG(t, tc.s)
			if len(files) != tc.files {
				t.Fatalf("%d files, want %d", len(files), tc.files)
			}
			docs := []svgDoc{readSVG(t, files[0]), {}}
			if len(files) > 1 {
				docs[1] = readSVG(t, files[1])
			}
			for i, want := range [][]int{tc.cdf, tc.load} {
				if got := lineLens(docs[i]); !slices.Equal(got, want) {
					t.Errorf("chart %d: polylines with %v points, want %v", i, got, want)
				}
				docs[i].inPlot(t)
			}
			for _, s := range tc.texts {
				if !docs[0].hasText(s) && !docs[1].hasText(s) {
					t.Errorf("no text %q in %q and %q", s, docs[0].texts, docs[1].texts)
				}
			}
			if tc.check != nil {
				tc.check(t, docs[0], docs[1])
			}
		})
	}
}

func TestSVGLongNames(t *testing.T) {
	var s sim.Series
	for i := range 12 {
		s.Configs = append(s.Configs, sim.ConfigSeries{Name: fmt.Sprintf("a-rather-long-configuration-name-%d", i),
			TTFTQuantiles: []float64{0.1, 0.2}})
	}
	cdf := readSVG(t, writeSVG(t, &s)[0])
	if cdf.dashed != 2 {
		t.Errorf("%d dashed lines, want 2 (the colours repeat after 10)", cdf.dashed)
	}
	if !cdf.hasText("a-rather-long-con…") {
		t.Errorf("legend %q: long names are not shortened", cdf.texts)
	}
}

func TestSVGBadDir(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := testSeries().WriteSVG(filepath.Join(f, "sub")); err == nil || !strings.HasPrefix(err.Error(), "sim: ") {
		t.Errorf("a file as the directory: %v", err)
	}
}

// Draw the charts of a simulation's Series as SVG images.
func ExampleSeries_WriteSVG() {
	s := &sim.Series{Configs: []sim.ConfigSeries{
		{Name: "random", TTFTQuantiles: []float64{0.08, 0.4, 1.5, 6}, LoadInterval: 1, Load: [][]int{{3, 9}, {5, 12}}},
		{Name: "prefix cache", TTFTQuantiles: []float64{0.07, 0.1, 0.3, 1.2}, LoadInterval: 1, Load: [][]int{{4, 5}, {6, 6}}},
	}}
	dir, err := os.MkdirTemp("", "charts")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	files, err := s.WriteSVG(dir)
	if err != nil {
		panic(err)
	}
	for _, f := range files {
		fmt.Println(filepath.Base(f))
	}
	// Output:
	// ttft-cdf.svg
	// load-random.svg
	// load-prefix_cache.svg
}
