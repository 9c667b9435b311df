package metrics

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Selector picks the series of one metric whose labels include every label
// it lists, written name{label="value",...} (a PromQL instant-vector
// selector with equality matchers only). Label values may be quoted or, for
// compatibility with llm-d configurations, bare: name{label=value}.
type Selector struct {
	Name   string
	Labels Labels // sorted by name
}

// ParseSelector parses s.
func ParseSelector(s string) (Selector, error) {
	sel, err := parseSelector(strings.TrimSpace(s))
	if err != nil {
		return Selector{}, fmt.Errorf("metric selector %q: %w", s, err)
	}
	return sel, nil
}

func parseSelector(s string) (Selector, error) {
	var sel Selector
	n := nameLen(s, true)
	if n == 0 {
		return sel, errors.New("want a metric name, then optional {label=\"value\",...}")
	}
	sel.Name, s = s[:n], strings.TrimLeft(s[n:], " \t")
	if s == "" {
		return sel, nil
	}
	if s[0] != '{' {
		return sel, fmt.Errorf("unexpected %q after the metric name", s)
	}
	s = s[1:]
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return sel, errors.New("missing }")
		}
		if s[0] == '}' {
			s = strings.TrimSpace(s[1:])
			if s != "" {
				return sel, fmt.Errorf("unexpected %q after }", s)
			}
			break
		}
		n := nameLen(s, false)
		if n == 0 {
			return sel, fmt.Errorf("want a label name at %q", s)
		}
		var l Label
		l.Name, s = s[:n], strings.TrimLeft(s[n:], " \t")
		if !strings.HasPrefix(s, "=") || strings.HasPrefix(s, "=~") {
			return sel, fmt.Errorf("label %q: only = matchers are supported", l.Name)
		}
		s = strings.TrimLeft(s[1:], " \t")
		switch {
		case strings.HasPrefix(s, `"`):
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return sel, fmt.Errorf("label %q: bad quoted value", l.Name)
			}
			l.Value, _ = strconv.Unquote(q)
			s = s[len(q):]
		default:
			end := strings.IndexAny(s, ",} \t")
			if end < 0 {
				return sel, errors.New("missing }")
			}
			l.Value, s = s[:end], s[end:]
			if l.Value == "" {
				return sel, fmt.Errorf("label %q: empty value", l.Name)
			}
		}
		if _, dup := sel.Labels.Get(l.Name); dup {
			return sel, fmt.Errorf("label %q appears twice", l.Name)
		}
		sel.Labels = append(sel.Labels, l)
		s = strings.TrimLeft(s, " \t")
		if strings.HasPrefix(s, ",") {
			s = s[1:]
		} else if !strings.HasPrefix(s, "}") {
			return sel, fmt.Errorf("want , or } at %q", s)
		}
	}
	sortLabels(sel.Labels)
	return sel, nil
}

// nameLen returns the length of the metric (colons allowed) or label name
// at the start of s.
func nameLen(s string, metric bool) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' || metric && c == ':'
		if !ok {
			return i
		}
	}
	return len(s)
}

// String returns the selector in the syntax ParseSelector reads.
func (s Selector) String() string { return seriesString(s.Name, s.Labels) }

// Matches reports whether labels include every label of the selector.
func (s Selector) Matches(labels Labels) bool {
	for _, want := range s.Labels {
		if got, ok := labels.Get(want.Name); !ok || got != want.Value {
			return false
		}
	}
	return true
}

// Select returns the samples of fams the selector picks.
func (s Selector) Select(fams Families) []Sample {
	series := fams.Series(s.Name)
	if len(s.Labels) == 0 {
		return series
	}
	var out []Sample
	for _, x := range series {
		if s.Matches(x.Labels) {
			out = append(out, x)
		}
	}
	return out
}

func sortLabels(l Labels) {
	for i := 1; i < len(l); i++ {
		for j := i; j > 0 && l[j].Name < l[j-1].Name; j-- {
			l[j], l[j-1] = l[j-1], l[j]
		}
	}
}
