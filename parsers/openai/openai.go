package openai

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/eppkit/eppkit/parsers"
)

// The API suffixes the parser claims.
const (
	Completions           = "completions"
	ChatCompletions       = "chat/completions"
	Embeddings            = "embeddings"
	Responses             = "responses"
	Conversations         = "conversations"
	ChatCompletionsRender = "chat/completions/render"
	CompletionsRender     = "completions/render"
)

// Parser is the openai-parser plugin. It has no parameters.
type Parser struct{}

var (
	_ parsers.Parser         = (*Parser)(nil)
	_ parsers.ResponseParser = (*Parser)(nil)
)

// Paths returns the suffixes the parser claims.
func (*Parser) Paths() []string {
	return []string{Completions, ChatCompletions, Embeddings, Responses, Conversations, ChatCompletionsRender, CompletionsRender}
}

// ParseRequest parses a body of the API at suffix. The model is required
// except for conversations (the API has none); chat needs messages,
// completions a prompt, embeddings an input (or messages), responses an
// input.
func (*Parser) ParseRequest(suffix string, body []byte) (*parsers.Body, error) {
	var d parsers.Decoder
	d.Reset(body)
	b := &parsers.Body{API: suffix, Raw: body}
	var hasMessages, hasPrompt bool
	maxPrio := 0 // max_completion_tokens beats max_tokens and max_output_tokens
	if d.Object() {
		for d.More() {
			switch string(d.Key()) {
			case "model":
				b.Model = d.OptString()
			case "messages":
				hasMessages = !d.Null()
				if hasMessages {
					b.Messages = readMessages(&d, b.Messages)
				}
			case "prompt":
				hasPrompt = readPrompt(&d, b)
			case "input":
				if suffix == Responses {
					hasPrompt = readInput(&d, b)
				} else {
					hasPrompt = readPrompt(&d, b)
				}
			case "items":
				if !d.Null() {
					b.Messages = readMessages(&d, b.Messages)
				}
			case "instructions":
				b.System = d.OptString()
			case "tools":
				if !d.Null() {
					b.Tools = d.Raw()
				}
			case "functions": // the deprecated form of tools
				if !d.Null() {
					if raw := d.Raw(); b.Tools == nil {
						b.Tools = raw
					}
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
			case "max_completion_tokens":
				if n, ok := d.OptCount(); ok {
					b.MaxTokens, maxPrio = n, 2
				}
			case "max_tokens", "max_output_tokens":
				if n, ok := d.OptCount(); ok && maxPrio < 2 {
					b.MaxTokens, maxPrio = n, 1
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
	switch {
	case b.Model == "" && suffix != Conversations:
		return nil, badRequest("missing model")
	case (suffix == ChatCompletions || suffix == ChatCompletionsRender) && len(b.Messages) == 0:
		return nil, badRequest("%s: missing messages", suffix)
	case (suffix == Completions || suffix == CompletionsRender) && !hasPrompt:
		return nil, badRequest("%s: missing prompt", suffix)
	case suffix == Embeddings && !hasPrompt && !hasMessages:
		return nil, badRequest("embeddings: missing input")
	case suffix == Responses && !hasPrompt:
		return nil, badRequest("responses: missing input")
	}
	return b, nil
}

// ParseResponse reads usage from a response document: the top-level "usage"
// of chat, completions, embeddings and responses bodies and of the final
// chunk of a stream with include_usage, or the "usage" of the response object
// in a Responses stream's response.completed event.
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
		switch string(d.Key()) {
		case "usage":
			parsers.ReadUsage(&d, u)
		case "response":
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
		default:
			d.Skip()
		}
	}
}

// readPrompt reads a prompt or embeddings input: a string, an array of
// strings (joined), an array of token ids, or an array of token-id arrays
// (the first is used: a batch's requests share one endpoint). It reports
// whether a prompt was present.
func readPrompt(d *parsers.Decoder, b *parsers.Body) bool {
	switch d.Kind() {
	case parsers.Null:
		d.Null()
		return false
	case parsers.String:
		b.Prompt = d.String()
		return true
	case parsers.Array:
	default:
		if d.Kind() != parsers.Invalid {
			d.Errorf("want a string or an array")
		}
		d.Skip()
		return false
	}
	d.Array()
	var first parsers.Kind
	var texts []string
	n := 0
	for ; d.More(); n++ {
		k := d.Kind()
		if n == 0 {
			first = k
		} else if k != first && k != parsers.Invalid {
			d.Errorf("mixed array: want all strings, all token ids or all token-id arrays")
			return false
		}
		switch k {
		case parsers.String:
			texts = append(texts, d.String())
		case parsers.Number:
			b.TokenIDs = append(b.TokenIDs, d.Uint32())
		case parsers.Array:
			b.TokenIDs = readTokens(d, b.TokenIDs, n == 0)
		case parsers.Invalid:
			d.Skip() // reports the syntax error
			return false
		default:
			d.Errorf("want a string, a token id or an array of token ids, got %s", k)
			return false
		}
	}
	if n == 0 {
		d.Errorf("empty array")
		return false
	}
	if len(texts) == 1 {
		b.Prompt = texts[0]
	} else if len(texts) > 1 {
		b.Prompt = strings.Join(texts, "")
	}
	return true
}

// readTokens reads an array of token ids, appending them to dst when keep
// is set (otherwise it only validates them).
func readTokens(d *parsers.Decoder, dst []uint32, keep bool) []uint32 {
	if !d.Array() {
		return dst
	}
	for d.More() {
		if t := d.Uint32(); keep {
			dst = append(dst, t)
		}
	}
	return dst
}

// readInput reads a Responses-API input: a string (one user message) or an
// array of items.
func readInput(d *parsers.Decoder, b *parsers.Body) bool {
	switch d.Kind() {
	case parsers.Null:
		d.Null()
		return false
	case parsers.String:
		b.Messages = append(b.Messages, parsers.Message{Role: "user", Content: d.String()})
		return true
	}
	b.Messages = readMessages(d, b.Messages)
	return true
}

// readMessages reads an array of chat messages or Responses/conversation
// items.
func readMessages(d *parsers.Decoder, dst []parsers.Message) []parsers.Message {
	if !d.Array() {
		return dst
	}
	if dst == nil {
		dst = make([]parsers.Message, 0, 4)
	}
	for d.More() {
		dst = append(dst, readMessage(d))
	}
	return dst
}

// readMessage reads one chat message or input item. Members may come in any
// order, so what decides the role and text is assembled at the end.
func readMessage(d *parsers.Decoder) parsers.Message {
	var m parsers.Message
	if !d.Object() {
		return m
	}
	var typ, name, args string
	var text parsers.Concat
	for d.More() {
		switch string(d.Key()) {
		case "role":
			m.Role = d.OptString()
		case "type":
			typ = d.OptString()
		case "content":
			readContent(d, &text, &m.Media)
		case "output": // function_call_output
			readContent(d, &text, &m.Media)
		case "summary": // reasoning items
			readContent(d, &text, &m.Media)
		case "tool_calls":
			readToolCalls(d, &text)
		case "name":
			name = d.OptString()
		case "arguments":
			args = d.OptString()
		default:
			d.Skip()
		}
	}
	switch typ {
	case "function_call", "custom_tool_call":
		if m.Role == "" {
			m.Role = "assistant"
		}
		text.Add(name)
		text.Add(args)
	case "function_call_output", "custom_tool_call_output":
		if m.Role == "" {
			m.Role = "tool"
		}
	case "reasoning":
		if m.Role == "" {
			m.Role = "assistant"
		}
	}
	m.Content = text.String()
	return m
}

// readContent reads message content: null, a string, or an array of parts.
func readContent(d *parsers.Decoder, t *parsers.Concat, media *[]parsers.Media) {
	if parsers.ReadContent(d, t, "content parts") {
		for d.More() {
			readPart(d, t, media)
		}
	}
}

// readPart reads one content part: text-like parts add to text, others with
// a reference become media.
func readPart(d *parsers.Decoder, text *parsers.Concat, media *[]parsers.Media) {
	if d.Kind() == parsers.String { // a bare string part
		text.Add(d.String())
		return
	}
	if !d.Object() {
		return
	}
	var typ, txt, ref string
	for d.More() {
		switch key := string(d.Key()); key {
		case "type":
			typ = d.OptString()
		case "text", "refusal":
			txt = d.OptString()
		case "image_url", "video_url", "audio_url", "input_audio", "file", "file_url", "file_id", "file_data":
			if r := readRef(d); r != "" && ref == "" {
				ref = r
			}
		default:
			d.Skip()
		}
	}
	switch {
	case txt != "" || typ == "text" || typ == "input_text" || typ == "output_text" || typ == "refusal" || typ == "summary_text":
		text.Add(txt)
	case ref != "":
		*media = append(*media, parsers.Media{Type: typ, Ref: ref})
	}
}

// readRef reads what identifies a media part: a string, or the url, data,
// file_id or file_data of an object.
func readRef(d *parsers.Decoder) string {
	switch d.Kind() {
	case parsers.String:
		return d.String()
	case parsers.Object:
		d.Object()
		ref := ""
		for d.More() {
			switch string(d.Key()) {
			case "url", "data", "file_id", "file_data", "file_url":
				if s := d.OptString(); ref == "" {
					ref = s
				}
			default:
				d.Skip()
			}
		}
		return ref
	}
	d.Skip()
	return ""
}

// readToolCalls adds each tool call's function name and arguments to text.
func readToolCalls(d *parsers.Decoder, text *parsers.Concat) {
	if d.Null() || !d.Array() {
		return
	}
	for d.More() {
		if !d.Object() {
			return
		}
		for d.More() {
			if string(d.Key()) != "function" || d.Kind() != parsers.Object {
				d.Skip()
				continue
			}
			d.Object()
			var name, args string
			for d.More() {
				switch string(d.Key()) {
				case "name":
					name = d.OptString()
				case "arguments":
					args = d.OptString()
				default:
					d.Skip()
				}
			}
			text.Add(name)
			text.Add(args)
		}
	}
}

func badRequest(format string, args ...any) error {
	return fmt.Errorf("openai-parser: %w: %s", parsers.ErrBadRequest, fmt.Sprintf(format, args...))
}
