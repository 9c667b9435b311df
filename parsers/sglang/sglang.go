package sglang

import (
	"bytes"
	"fmt"

	"github.com/eppkit/eppkit/parsers"
)

// Generate is the API suffix the parser claims.
const Generate = "generate"

// Parser is the sglang-parser plugin. It has no parameters.
type Parser struct{}

var (
	_ parsers.Parser         = (*Parser)(nil)
	_ parsers.ResponseParser = (*Parser)(nil)
)

// Paths returns the suffix the parser claims.
func (*Parser) Paths() []string { return []string{Generate} }

// ParseRequest parses a generate body: text or input_ids (one is required),
// sampling_params.max_new_tokens, stream, lora_path, extra_key (the cache
// salt) and model.
func (*Parser) ParseRequest(suffix string, body []byte) (*parsers.Body, error) {
	var d parsers.Decoder
	d.Reset(body)
	b := &parsers.Body{API: suffix, Raw: body}
	var lora string
	var hasPrompt bool
	if d.Object() {
		for d.More() {
			switch string(d.Key()) {
			case "model":
				b.Model = d.OptString()
			case "text":
				hasPrompt = readText(&d, b) || hasPrompt
			case "input_ids":
				hasPrompt = readIDs(&d, b) || hasPrompt
			case "lora_path":
				lora = firstString(&d)
			case "sampling_params":
				readSampling(&d, b)
			case "stream":
				b.Stream = d.OptBool()
			case "extra_key":
				b.CacheSalt = d.OptString()
			default:
				d.Skip()
			}
		}
	}
	if err := d.End(); err != nil {
		return nil, badRequest("%v", err)
	}
	if !hasPrompt {
		return nil, badRequest("missing text or input_ids")
	}
	if b.Model == "" {
		b.Model = lora
	}
	return b, nil
}

// readText reads a string or an array of strings (the first is used).
func readText(d *parsers.Decoder, b *parsers.Body) bool {
	switch d.Kind() {
	case parsers.Null:
		d.Null()
		return false
	case parsers.Array:
		d.Array()
		n := 0
		for ; d.More(); n++ {
			if s := d.String(); n == 0 {
				b.Prompt = s
			}
		}
		if n == 0 {
			d.Errorf("empty array")
		}
		return n > 0
	}
	b.Prompt = d.String()
	return true
}

// readIDs reads token ids or an array of them (the first is used).
func readIDs(d *parsers.Decoder, b *parsers.Body) bool {
	if d.Null() || !d.Array() {
		return false
	}
	n := 0
	for ; d.More(); n++ {
		if d.Kind() == parsers.Array {
			d.Array()
			for d.More() {
				if t := d.Uint32(); n == 0 {
					b.TokenIDs = append(b.TokenIDs, t)
				}
			}
			continue
		}
		b.TokenIDs = append(b.TokenIDs, d.Uint32())
	}
	if n == 0 {
		d.Errorf("empty array")
	}
	return n > 0
}

// firstString reads a string or an array of strings and returns the first.
func firstString(d *parsers.Decoder) string {
	if d.Kind() != parsers.Array {
		return d.OptString()
	}
	d.Array()
	first := ""
	for i := 0; d.More(); i++ {
		if s := d.OptString(); i == 0 {
			first = s
		}
	}
	return first
}

// readSampling reads max_new_tokens from sampling params (an object, or an
// array of them for a batch: the first).
func readSampling(d *parsers.Decoder, b *parsers.Body) {
	if d.Kind() == parsers.Array {
		d.Array()
		for i := 0; d.More(); i++ {
			if i == 0 {
				readSampling(d, b)
			} else {
				d.Skip()
			}
		}
		return
	}
	if d.Null() || !d.Object() {
		return
	}
	for d.More() {
		if string(d.Key()) == "max_new_tokens" {
			b.MaxTokens, _ = d.OptCount()
			continue
		}
		d.Skip()
	}
}

// ParseResponse reads usage from meta_info (prompt_tokens,
// completion_tokens, cached_tokens) of a response, a stream chunk, or the
// first response of a batch.
func (*Parser) ParseResponse(_ string, doc []byte, u *parsers.Usage) {
	if !bytes.Contains(doc, []byte(`"meta_info"`)) {
		return
	}
	var d parsers.Decoder
	d.Reset(doc)
	switch d.Kind() {
	case parsers.Array:
		d.Array()
		if d.More() && d.Kind() == parsers.Object {
			readMeta(&d, u)
		}
	case parsers.Object:
		readMeta(&d, u)
	}
}

func readMeta(d *parsers.Decoder, u *parsers.Usage) {
	d.Object()
	for d.More() {
		if string(d.Key()) == "meta_info" {
			parsers.ReadUsage(d, u)
			continue
		}
		d.Skip()
	}
}

func badRequest(format string, args ...any) error {
	return fmt.Errorf("sglang-parser: %w: %s", parsers.ErrBadRequest, fmt.Sprintf(format, args...))
}
