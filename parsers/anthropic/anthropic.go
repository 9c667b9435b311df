package anthropic

import (
	"bytes"
	"fmt"

	"github.com/eppkit/eppkit/parsers"
)

// The API suffixes the parser claims.
const (
	Messages    = "messages"
	CountTokens = "messages/count_tokens"
)

// Parser is the anthropic-parser plugin. It has no parameters.
type Parser struct{}

var (
	_ parsers.Parser         = (*Parser)(nil)
	_ parsers.ResponseParser = (*Parser)(nil)
)

// Paths returns the suffixes the parser claims.
func (*Parser) Paths() []string { return []string{Messages, CountTokens} }

// ParseRequest parses a messages or count_tokens body; model and a non-empty
// messages array are required.
func (*Parser) ParseRequest(suffix string, body []byte) (*parsers.Body, error) {
	var d parsers.Decoder
	d.Reset(body)
	b := &parsers.Body{API: suffix, Raw: body}
	if d.Object() {
		for d.More() {
			switch string(d.Key()) {
			case "model":
				b.Model = d.OptString()
			case "system":
				var t parsers.Concat
				readBlocks(&d, &t, nil)
				b.System = t.String()
			case "messages":
				if d.Null() || !d.Array() {
					continue
				}
				b.Messages = make([]parsers.Message, 0, 4)
				for d.More() {
					b.Messages = append(b.Messages, readMessage(&d))
				}
			case "tools":
				if !d.Null() {
					b.Tools = d.Raw()
				}
			case "stream":
				b.Stream = d.OptBool()
			case "max_tokens":
				b.MaxTokens, _ = d.OptCount()
			default:
				d.Skip()
			}
		}
	}
	if err := d.End(); err != nil {
		return nil, badRequest("%v", err)
	}
	switch {
	case b.Model == "":
		return nil, badRequest("missing model")
	case len(b.Messages) == 0:
		return nil, badRequest("%s: missing messages", suffix)
	}
	return b, nil
}

func readMessage(d *parsers.Decoder) parsers.Message {
	var m parsers.Message
	if !d.Object() {
		return m
	}
	var t parsers.Concat
	for d.More() {
		switch string(d.Key()) {
		case "role":
			m.Role = d.OptString()
		case "content":
			readBlocks(d, &t, &m.Media)
		default:
			d.Skip()
		}
	}
	m.Content = t.String()
	return m
}

// readBlocks reads content: a string or an array of blocks. media may be nil
// (the system prompt has none).
func readBlocks(d *parsers.Decoder, t *parsers.Concat, media *[]parsers.Media) {
	if parsers.ReadContent(d, t, "content blocks") {
		for d.More() {
			readBlock(d, t, media)
		}
	}
}

// readBlock reads one content block.
func readBlock(d *parsers.Decoder, t *parsers.Concat, media *[]parsers.Media) {
	if !d.Object() {
		return
	}
	var typ, txt, name, ref string
	var input []byte
	var nested parsers.Concat
	var nestedMedia []parsers.Media
	for d.More() {
		switch string(d.Key()) {
		case "type":
			typ = d.OptString()
		case "text", "thinking":
			txt = d.OptString()
		case "data": // redacted_thinking
			if d.Kind() == parsers.String {
				txt = d.String()
			} else {
				d.Skip()
			}
		case "name":
			name = d.OptString()
		case "input":
			input = d.Raw()
		case "content": // tool_result
			readBlocks(d, &nested, &nestedMedia)
		case "source":
			ref = readSource(d)
		default:
			d.Skip()
		}
	}
	switch {
	case ref != "":
		if media != nil {
			*media = append(*media, parsers.Media{Type: typ, Ref: ref})
		}
	case typ == "tool_use" || typ == "server_tool_use":
		t.Add(name)
		t.Add(string(input))
	default:
		t.Add(txt)
		t.Add(nested.String())
		if media != nil {
			*media = append(*media, nestedMedia...)
		}
	}
}

// readSource reads an image or document source: base64 data, a URL or a
// file id.
func readSource(d *parsers.Decoder) string {
	if d.Null() || !d.Object() {
		return ""
	}
	ref := ""
	for d.More() {
		switch string(d.Key()) {
		case "data", "url", "file_id":
			if d.Kind() != parsers.String {
				d.Skip()
				continue
			}
			if s := d.String(); ref == "" {
				ref = s
			}
		default:
			d.Skip()
		}
	}
	return ref
}

// ParseResponse reads usage from a non-streaming body (top-level usage),
// from message_start (message.usage: input, cache and initial output tokens)
// and message_delta (usage: cumulative output tokens) events, and from a
// count_tokens response (input_tokens).
func (*Parser) ParseResponse(api string, doc []byte, u *parsers.Usage) {
	if !bytes.Contains(doc, []byte(`_tokens"`)) {
		return
	}
	var d parsers.Decoder
	d.Reset(doc)
	if d.Kind() != parsers.Object {
		return
	}
	d.Object()
	for d.More() {
		switch string(d.Key()) {
		case "usage":
			parsers.ReadUsage(&d, u)
		case "message":
			if d.Kind() != parsers.Object {
				d.Skip()
				continue
			}
			d.Object()
			for d.More() {
				if string(d.Key()) == "usage" {
					parsers.ReadUsage(&d, u)
					continue
				}
				d.Skip()
			}
		case "input_tokens":
			if n, ok := d.OptCount(); ok && api == CountTokens {
				u.PromptTokens = n
			}
		default:
			d.Skip()
		}
	}
}

func badRequest(format string, args ...any) error {
	return fmt.Errorf("anthropic-parser: %w: %s", parsers.ErrBadRequest, fmt.Sprintf(format, args...))
}
