package metrics

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families is one parsed scrape: the metric families by name.
type Families map[string]*Family

// Family is one metric family.
type Family struct {
	Name string
	// Type is "counter", "gauge", "untyped", "histogram", "summary" or
	// "gaugehistogram".
	Type string
	// Samples are the family's lines: one per series for counters, gauges
	// and untyped metrics; for histograms and summaries, the buckets
	// (name_bucket with an "le" label) or quantiles (name with a "quantile"
	// label), then name_sum and name_count, per series.
	Samples []Sample
}

// Sample is one line of the exposition.
type Sample struct {
	Name   string // the family name, or name_bucket, name_sum, name_count
	Labels Labels // sorted by name
	Value  float64
}

// Label is a label name and value.
type Label struct{ Name, Value string }

// Labels are a sample's labels, sorted by name.
type Labels []Label

// Get returns the value of the label called name.
func (l Labels) Get(name string) (string, bool) {
	for i := range l {
		if l[i].Name == name {
			return l[i].Value, true
		}
	}
	return "", false
}

// Series returns the samples of the series called name: the samples of the
// family called name, or, for name_sum, name_count and name_bucket, the
// matching samples of the histogram or summary family name. It returns nil
// when there are none.
func (f Families) Series(name string) []Sample {
	if fam, ok := f[name]; ok {
		if fam.Type != "histogram" && fam.Type != "summary" && fam.Type != "gaugehistogram" {
			return fam.Samples
		}
		return samplesNamed(fam.Samples, name)
	}
	for _, suffix := range seriesSuffixes {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if fam, ok := f[base]; ok {
				return samplesNamed(fam.Samples, name)
			}
		}
	}
	return nil
}

var seriesSuffixes = []string{"_bucket", "_sum", "_count"}

func samplesNamed(ss []Sample, name string) []Sample {
	var out []Sample
	for _, s := range ss {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Filter is a set of metric family names for Parse: lines of other families
// are skipped without being parsed. The nil *Filter keeps every family.
type Filter struct {
	names map[string]struct{}
	// partial are histogram or summary families the filter keeps only some
	// series of (it names x_count but not x): their lines are decided one
	// by one.
	partial map[string]struct{}
}

// NewFilter returns a filter keeping the named families. A name may also be
// a series of a histogram or summary (name_sum, name_count, name_bucket).
func NewFilter(names ...string) *Filter {
	f := &Filter{names: make(map[string]struct{}, len(names)), partial: map[string]struct{}{}}
	for _, n := range names {
		f.names[n] = struct{}{}
	}
	for _, n := range names {
		for _, suffix := range seriesSuffixes {
			if base, ok := strings.CutSuffix(n, suffix); ok {
				if _, whole := f.names[base]; !whole {
					f.partial[base] = struct{}{}
				}
			}
		}
	}
	return f
}

// Names returns the filter's names, sorted.
func (f *Filter) Names() []string {
	if f == nil {
		return nil
	}
	out := make([]string, 0, len(f.names))
	for n := range f.names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// maxLineNumber caps the line numbers filterLines records.
const maxLineNumber = math.MaxInt32

var parserPool = sync.Pool{New: func() any {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return &p
}}

// scratch holds one Parse's buffers.
type scratch struct {
	text   []byte  // the kept lines
	lines  []int32 // original line number of each kept line
	blocks []block
	reader bytes.Reader
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// block is a run of kept lines about one family: its TYPE comment and its
// samples (name, name_bucket, name_sum, name_count).
type block struct {
	key        []byte // the family name, pointing into the input
	start, end int    // offsets in scratch.text
	line0      int    // index in scratch.lines of the block's first line
}

// Parse parses Prometheus text exposition format 0.0.4 with
// github.com/prometheus/common/expfmt. With a non-nil filter, lines of other
// families, and HELP comments, are dropped before parsing: a /metrics page
// holds hundreds of histogram lines the picker never reads, and skipping a
// line costs nanoseconds where parsing it costs microseconds. Malformed text
// in the dropped lines is therefore not detected; in the kept ones it is an
// error naming its line in text.
//
// The result is checked as the format requires: a series (name and label
// set) that appears twice, or a label that appears twice on a line, is an
// error. Values are returned as written, NaN and infinities included. The
// result is read-only: a metrics-data-source shares unchanged families
// between scrapes of an endpoint.
func Parse(text []byte, filter *Filter) (Families, error) {
	return parse(text, filter, nil)
}

// parse is Parse reusing, with a memo, the families of blocks whose text is
// the same as in the previous scrape of the endpoint. Info gauges (cache
// configuration, LoRA adapters) rarely change and hold most of the labels,
// which are most of expfmt's cost.
func parse(text []byte, filter *Filter, m *memo) (Families, error) {
	sc := scratchPool.Get().(*scratch)
	defer func() { // keep the buffers, not references to text
		clear(sc.blocks)
		sc.reader.Reset(nil)
		scratchPool.Put(sc)
	}()
	if filter == nil {
		fams := Families{}
		if err := parseInto(sc, text, nil, 0, fams); err != nil {
			return nil, err
		}
		return fams, nil
	}
	sc.text, sc.lines, sc.blocks = filterLines(sc.text[:0], sc.lines[:0], sc.blocks[:0], text, filter)
	fams := make(Families, len(sc.blocks))
	if m == nil || repeatedKey(sc.blocks) {
		// Nothing to reuse, or a family whose lines are not grouped (which
		// only a parse of the whole page judges as expfmt does): one call
		// to the parser.
		if err := parseInto(sc, sc.text, sc.lines, 0, fams); err != nil {
			return nil, err
		}
		return fams, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	for i := range sc.blocks {
		b := &sc.blocks[i]
		raw := sc.text[b.start:b.end]
		mb := m.blocks[string(b.key)]
		if mb != nil && mb.gen != m.gen && bytes.Equal(mb.raw, raw) {
			mb.gen = m.gen // unchanged since the previous scrape
			if err := merge(fams, mb.fams); err != nil {
				return nil, err
			}
			continue
		}
		bf := make(Families, 1)
		if err := parseInto(sc, raw, sc.lines, b.line0, bf); err != nil {
			return nil, err
		}
		list := make([]*Family, 0, len(bf))
		for _, f := range bf {
			list = append(list, f)
		}
		if err := merge(fams, list); err != nil {
			return nil, err
		}
		switch {
		case mb == nil:
			m.blocks[string(b.key)] = &memoBlock{raw: slices.Clone(raw), fams: list, gen: m.gen}
		case mb.gen != m.gen: // a family's lines met twice in one scrape keep the first
			mb.raw, mb.fams, mb.gen = append(mb.raw[:0], raw...), list, m.gen
		}
	}
	for k, mb := range m.blocks {
		if mb.gen != m.gen {
			delete(m.blocks, k) // gone from the page
		}
	}
	return fams, nil
}

// repeatedKey reports whether two blocks are about the same family.
func repeatedKey(blocks []block) bool {
	for i := range blocks {
		for j := i + 1; j < len(blocks); j++ {
			if bytes.Equal(blocks[i].key, blocks[j].key) {
				return true
			}
		}
	}
	return false
}

// merge adds list to fams. A family met twice (its lines not grouped, as
// the format requires but expfmt tolerates) gets a new Family holding both
// parts, so memoised families are never modified.
func merge(fams Families, list []*Family) error {
	for _, f := range list {
		prev, ok := fams[f.Name]
		if !ok {
			fams[f.Name] = f
			continue
		}
		both := &Family{Name: f.Name, Type: prev.Type, Samples: slices.Concat(prev.Samples, f.Samples)}
		if err := checkDuplicates(both); err != nil {
			return err
		}
		fams[f.Name] = both
	}
	return nil
}

// Parser parses successive scrapes of one endpoint like Parse, reusing the
// families of a scrape whose text has not changed since the previous one:
// the info gauges (cache configuration, LoRA adapters) rarely change and
// hold most of the labels, which are most of the parsing cost. A Parser is
// safe for concurrent use; scrapes of one endpoint arrive one at a time.
type Parser struct {
	filter *Filter
	memo   memo
}

// NewParser returns a parser keeping the families filter keeps (nil: all,
// and nothing is reused).
func NewParser(filter *Filter) *Parser {
	return &Parser{filter: filter, memo: memo{blocks: map[string]*memoBlock{}}}
}

// Parse parses one scrape.
func (p *Parser) Parse(text []byte) (Families, error) { return parse(text, p.filter, &p.memo) }

// memo is an endpoint's previous scrape: each block's text and families.
type memo struct {
	mu     sync.Mutex
	gen    uint64
	blocks map[string]*memoBlock
}

type memoBlock struct {
	raw  []byte
	fams []*Family
	gen  uint64 // the scrape that last used it
}

// parseInto parses text with a pooled expfmt parser and adds the families
// to fams. lines maps text's lines (from line0) back to the input's, for
// error messages. (expfmt's protobuf types are never named here, so the
// module does not require github.com/prometheus/client_model directly.)
func parseInto(sc *scratch, text []byte, lines []int32, line0 int, fams Families) error {
	p := parserPool.Get().(*expfmt.TextParser)
	sc.reader.Reset(text)
	raw, err := p.TextToMetricFamilies(&sc.reader)
	parserPool.Put(p)
	if err != nil {
		var pe expfmt.ParseError
		if errors.As(err, &pe) && lines != nil && pe.Line >= 1 && line0+pe.Line-1 < len(lines) {
			pe.Line = int(lines[line0+pe.Line-1])
			err = pe
		}
		return fmt.Errorf("metrics: malformed exposition: %w", err)
	}
	for name, mf := range raw {
		f := &Family{Name: name, Type: strings.ToLower(mf.GetType().String())}
		f.Type = strings.ReplaceAll(f.Type, "_", "")
		for _, m := range mf.GetMetric() {
			labels := make(Labels, 0, len(m.GetLabel())+1)
			for _, lp := range m.GetLabel() {
				labels = append(labels, Label{lp.GetName(), lp.GetValue()})
			}
			sortLabels(labels)
			for i := 1; i < len(labels); i++ {
				if labels[i].Name == labels[i-1].Name {
					return fmt.Errorf("metrics: malformed exposition: %s: label %q appears twice in one series", name, labels[i].Name)
				}
			}
			switch {
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					n := float64(b.GetCumulativeCount())
					if b.CumulativeCountFloat != nil {
						n = b.GetCumulativeCountFloat()
					}
					f.Samples = append(f.Samples, Sample{name + "_bucket", withLabel(labels, "le", formatFloat(b.GetUpperBound())), n})
				}
				count := float64(h.GetSampleCount())
				if h.SampleCountFloat != nil {
					count = h.GetSampleCountFloat()
				}
				f.Samples = append(f.Samples, Sample{name + "_sum", labels, h.GetSampleSum()}, Sample{name + "_count", labels, count})
			case m.GetSummary() != nil:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					f.Samples = append(f.Samples, Sample{name, withLabel(labels, "quantile", formatFloat(q.GetQuantile())), q.GetValue()})
				}
				f.Samples = append(f.Samples, Sample{name + "_sum", labels, s.GetSampleSum()}, Sample{name + "_count", labels, float64(s.GetSampleCount())})
			case m.GetGauge() != nil:
				f.Samples = append(f.Samples, Sample{name, labels, m.GetGauge().GetValue()})
			case m.GetCounter() != nil:
				f.Samples = append(f.Samples, Sample{name, labels, m.GetCounter().GetValue()})
			default:
				f.Samples = append(f.Samples, Sample{name, labels, m.GetUntyped().GetValue()})
			}
		}
		if err := checkDuplicates(f); err != nil {
			return err
		}
		fams[name] = f
	}
	return nil
}

// filterLines appends to out the lines of text the filter keeps (TYPE
// comments of kept families included; HELP and other comments dropped), to
// lines their line numbers in text, and to blocks the runs of lines about
// one family.
func filterLines(out []byte, lines []int32, blocks []block, text []byte, filter *Filter) ([]byte, []int32, []block) {
	var famName []byte // the family of the previous line decided by name
	famKeep := false
	lineNo := 0
	for len(text) > 0 {
		lineNo++
		end := bytes.IndexByte(text, '\n')
		var line []byte
		if end < 0 {
			line, text = text, nil
		} else {
			line, text = text[:end+1], text[end+1:]
		}
		// Fast path: a sample of the same family as the line before.
		if famName != nil && sameFamily(line, famName) {
			if famKeep {
				if n := len(blocks); n == 0 || !bytes.Equal(blocks[n-1].key, famName) {
					blocks = append(blocks, block{key: famName, start: len(out), line0: len(lines)})
				}
				out, lines = keepLine(out, lines, line, lineNo)
				blocks[len(blocks)-1].end = len(out)
			}
			continue
		}
		name, help, known := lineName(line)
		if known && name == nil {
			continue // blank line or plain comment
		}
		keep := true // a line we cannot name goes to the parser, which judges it
		key := name
		if known {
			if famName == nil || !bytes.Equal(name, famName) {
				var whole bool
				famName, famKeep, whole = filter.classify(name)
				key, keep = famName, famKeep
				if !whole {
					famName = nil // decide the family's lines one by one
				}
			} else {
				key, keep = famName, famKeep
			}
		}
		if !keep || help {
			continue
		}
		// A line we cannot name stays in the current block, so the parser
		// reads it in the same context whether blocks are parsed one by one
		// or all at once.
		if n := len(blocks); n == 0 || known && !bytes.Equal(blocks[n-1].key, key) {
			blocks = append(blocks, block{key: key, start: len(out), line0: len(lines)})
		}
		out, lines = keepLine(out, lines, line, lineNo)
		blocks[len(blocks)-1].end = len(out)
	}
	return out, lines, blocks
}

func keepLine(out []byte, lines []int32, line []byte, lineNo int) ([]byte, []int32) {
	out = append(out, line...)
	if line[len(line)-1] != '\n' {
		out = append(out, '\n')
	}
	return out, append(lines, int32(min(lineNo, maxLineNumber)))
}

// sameFamily reports whether line is a sample of family: its name is family,
// or family with a _bucket, _sum or _count suffix.
func sameFamily(line, family []byte) bool {
	if !bytes.HasPrefix(line, family) {
		return false
	}
	rest := line[len(family):]
	if len(rest) > 0 && rest[0] == '_' {
		for _, suffix := range seriesSuffixes {
			if r, ok := bytes.CutPrefix(rest, []byte(suffix)); ok {
				rest = r
				break
			}
		}
	}
	return len(rest) > 0 && (rest[0] == '{' || rest[0] == ' ' || rest[0] == '\t')
}

// classify returns the family a series or family name belongs to — the
// name without a _bucket, _sum or _count suffix when the filter keeps the
// family by that base name — and whether the filter keeps it. whole is false
// when the filter keeps only some series of the family named.
func (f *Filter) classify(name []byte) (family []byte, keep, whole bool) {
	if _, ok := f.names[string(name)]; ok {
		return name, true, true
	}
	if n := len(name); n > 4 && name[n-4] == '_' || n > 6 && name[n-6] == '_' || n > 7 && name[n-7] == '_' {
		for _, suffix := range seriesSuffixes {
			if base, ok := bytes.CutSuffix(name, []byte(suffix)); ok {
				if _, ok := f.names[string(base)]; ok {
					return base, true, true
				}
			}
		}
	}
	_, partial := f.partial[string(name)]
	return name, false, !partial
}

// lineName returns the metric name a line is about: the sample's name, or
// the name in a HELP (help is true) or TYPE comment. name is nil for a blank
// line or another comment. known is false when the line cannot be named
// cheaply (a quoted UTF-8 name).
func lineName(line []byte) (name []byte, help, known bool) {
	line = skipBlanks(line)
	if len(line) == 0 || line[0] == '\n' || line[0] == '\r' {
		return nil, false, true
	}
	if line[0] == '#' {
		rest := skipBlanks(line[1:])
		help = bytes.HasPrefix(rest, []byte("HELP"))
		var ok bool
		if rest, ok = cutKeyword(rest); !ok {
			return nil, false, true
		}
		rest = skipBlanks(rest)
		if len(rest) > 0 && rest[0] == '"' {
			return nil, help, false
		}
		name = rest[:nameEnd(rest)]
		return name, help, validName(name)
	}
	if line[0] == '{' || line[0] == '"' {
		return nil, false, false
	}
	name = line[:nameEnd(line)]
	return name, false, validName(name)
}

// validName reports whether b is a metric name of the classic character set;
// a line whose name is not goes to the parser, which judges it.
func validName(b []byte) bool {
	for i, c := range b {
		if !(c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return len(b) > 0
}

func skipBlanks(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

func cutKeyword(b []byte) ([]byte, bool) {
	if r, ok := bytes.CutPrefix(b, []byte("HELP")); ok && len(r) > 0 && (r[0] == ' ' || r[0] == '\t') {
		return r, true
	}
	if r, ok := bytes.CutPrefix(b, []byte("TYPE")); ok && len(r) > 0 && (r[0] == ' ' || r[0] == '\t') {
		return r, true
	}
	return nil, false
}

func nameEnd(b []byte) int {
	for i, c := range b {
		if c == '{' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			return i
		}
	}
	return len(b)
}

// checkDuplicates rejects a family with two samples of the same name and
// labels.
func checkDuplicates(f *Family) error {
	ss := f.Samples
	if len(ss) < 2 {
		return nil
	}
	dup := func(a, b *Sample) bool { return a.Name == b.Name && slices.Equal(a.Labels, b.Labels) }
	if len(ss) <= 32 {
		for i := range ss {
			for j := i + 1; j < len(ss); j++ {
				if dup(&ss[i], &ss[j]) {
					return duplicateError(&ss[i])
				}
			}
		}
		return nil
	}
	seen := make(map[string]struct{}, len(ss))
	var key strings.Builder
	for i := range ss {
		key.Reset()
		key.WriteString(ss[i].Name)
		for _, l := range ss[i].Labels {
			key.WriteByte(0xff)
			key.WriteString(l.Name)
			key.WriteByte(0xfe)
			key.WriteString(l.Value)
		}
		k := key.String()
		if _, ok := seen[k]; ok {
			return duplicateError(&ss[i])
		}
		seen[k] = struct{}{}
	}
	return nil
}

func duplicateError(s *Sample) error {
	return fmt.Errorf("metrics: malformed exposition: duplicate series %s", seriesString(s.Name, s.Labels))
}

func seriesString(name string, labels Labels) string {
	var b strings.Builder
	b.WriteString(name)
	if len(labels) > 0 {
		b.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(l.Name)
			b.WriteByte('=')
			b.WriteString(strconv.Quote(l.Value))
		}
		b.WriteByte('}')
	}
	return b.String()
}

func withLabel(labels Labels, name, value string) Labels {
	out := make(Labels, 0, len(labels)+1)
	out = append(out, labels...)
	out = append(out, Label{name, value})
	slices.SortFunc(out, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
