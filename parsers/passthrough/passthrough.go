package passthrough

import (
	"github.com/eppkit/eppkit/parsers"
)

// Parser is the passthrough-parser plugin. It has no parameters.
type Parser struct{}

var (
	_ parsers.Parser         = (*Parser)(nil)
	_ parsers.ResponseParser = (*Parser)(nil)
)

// Paths returns nil: the parser is a fallback.
func (*Parser) Paths() []string { return nil }

// ParseRequest never fails.
func (*Parser) ParseRequest(suffix string, body []byte) (*parsers.Body, error) {
	b := &parsers.Body{API: suffix, Raw: body}
	var d parsers.Decoder
	d.Reset(body)
	if d.Kind() != parsers.Object {
		return b, nil
	}
	var model string
	var stream bool
	d.Object()
	for d.More() {
		switch string(d.Key()) {
		case "model":
			if d.Kind() == parsers.String {
				model = d.String()
				continue
			}
		case "stream":
			if d.Kind() == parsers.Bool {
				stream = d.Bool()
				continue
			}
		}
		d.Skip()
	}
	if d.End() == nil { // trust the members only in a well-formed body
		b.Model, b.Stream = model, stream
	}
	return b, nil
}

// ParseResponse reads a top-level usage object in any common shape.
func (*Parser) ParseResponse(_ string, doc []byte, u *parsers.Usage) {
	var d parsers.Decoder
	d.Reset(doc)
	if d.Kind() != parsers.Object {
		return
	}
	d.Object()
	for d.More() {
		if string(d.Key()) == "usage" {
			parsers.ReadUsage(&d, u)
			continue
		}
		d.Skip()
	}
}
