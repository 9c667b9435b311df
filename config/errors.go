package config

import (
	"errors"
	"fmt"
	"strings"
)

// Error is a configuration error at a YAML path such as
// "schedulingProfiles[0].plugins[2].weight". Load and Build return every
// error they find joined with errors.Join; use errors.As to get the first, or
// Errors to get all of them.
type Error struct {
	// Path is the YAML path of the offending node; empty for the document.
	Path string
	// Line is the 1-based line of the node in the source, 0 when unknown
	// (defaults and configurations built in Go have no lines).
	Line int
	Err  error
}

// Error returns "config: PATH: message (line N)".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	if e.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", e.Line)
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Errors returns every *Error in err's tree, in order.
func Errors(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if e, ok := err.(*Error); ok {
			out = append(out, e)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// Warning is something the loader accepted but the operator should know:
// a plugin type that is not available in this build, a profile entry dropped
// because of it, a deprecated field.
type Warning struct {
	Path    string // YAML path, empty when the warning is about a default
	Line    int    // 0 when unknown
	Message string
}

// String returns "PATH: message (line N)".
func (w Warning) String() string {
	s := w.Message
	if w.Path != "" {
		s = w.Path + ": " + s
	}
	if w.Line > 0 {
		s += fmt.Sprintf(" (line %d)", w.Line)
	}
	return s
}

// errList collects errors; it stops keeping them after a bound so one broken
// list does not bury the rest.
type errList struct{ errs []error }

const maxErrors = 25

func (l *errList) add(path string, line int, format string, args ...any) {
	l.addErr(&Error{Path: path, Line: line, Err: fmt.Errorf(format, args...)})
}

func (l *errList) addErr(err error) {
	if len(l.errs) < maxErrors {
		l.errs = append(l.errs, err)
	}
}

func (l *errList) err() error { return errors.Join(l.errs...) }
