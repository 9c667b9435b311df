package vllmhttp

import (
	"bytes"
	"fmt"

	"github.com/eppkit/eppkit/parsers"
)

// Generate is the API suffix the parser claims.
const Generate = "inference/v1/generate"

// Parser is the vllmhttp-parser plugin. It has no parameters.
type Parser struct{}

var (
	_ parsers.Parser         = (*Parser)(nil)
	_ parsers.ResponseParser = (*Parser)(nil)
)

// Paths returns the suffix the parser claims.
func (*Parser) Paths() []string { return []string{Generate} }

// ParseRequest parses a generate body: token_ids (required, non-empty),
// model (optional: the server serves one), sampling_params.max_tokens,
// stream, stream_options.include_usage and cache_salt.
func (*Parser) ParseRequest(suffix string, body []byte) (*parsers.Body, error) {
	var d parsers.Decoder
	d.Reset(body)
	b := &parsers.Body{API: suffix, Raw: body}
	if d.Object() {
		for d.More() {
			switch string(d.Key()) {
			case "model":
				b.Model = d.OptString()
			case "token_ids":
				if d.Null() || !d.Array() {
					continue
				}
				for d.More() {
					b.TokenIDs = append(b.TokenIDs, d.Uint32())
				}
			case "sampling_params":
				if d.Null() || !d.Object() {
					continue
				}
				for d.More() {
					if string(d.Key()) == "max_tokens" {
						b.MaxTokens, _ = d.OptCount()
						continue
					}
					d.Skip()
				}
			case "stream":
				b.Stream = d.OptBool()
			case "stream_options":
				if d.Null() || !d.Object() {
					continue
				}
				for d.More() {
					if string(d.Key()) == "include_usage" {
						b.IncludeUsage = d.OptBool()
						continue
					}
					d.Skip()
				}
			case "cache_salt":
				b.CacheSalt = d.OptString()
			default:
				d.Skip()
			}
		}
	}
	if err := d.End(); err != nil {
		return nil, badRequest("%v", err)
	}
	if len(b.TokenIDs) == 0 {
		return nil, badRequest("missing token_ids")
	}
	return b, nil
}

// ParseResponse reads the top-level usage of a generate response or stream
// chunk (the OpenAI shape).
func (*Parser) ParseResponse(_ string, doc []byte, u *parsers.Usage) {
	if !bytes.Contains(doc, []byte(`"usage"`)) {
		return
	}
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

func badRequest(format string, args ...any) error {
	return fmt.Errorf("vllmhttp-parser: %w: %s", parsers.ErrBadRequest, fmt.Sprintf(format, args...))
}
