package parsers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrBadRequest marks a body the parser rejects; the pipeline answers 400.
var ErrBadRequest = errors.New("bad request")

// ErrNoParser is returned when no parser claims a path and there is no
// fallback parser; the pipeline answers 400.
var ErrNoParser = errors.New("no parser for path")

// Parser parses request bodies of one API family. ParseRequest is called once
// per request from any goroutine; it must not keep body after returning except
// through Body.Raw (fields of the Body may alias it), and must return an
// error wrapping ErrBadRequest for input it cannot parse, never panic.
type Parser interface {
	// Paths returns the URL-path suffixes the parser claims, without leading
	// slash, e.g. "chat/completions". A parser that claims none is a
	// fallback: it parses the requests no other parser claims.
	Paths() []string
	// ParseRequest parses body for the API at the claimed suffix ("" for a
	// fallback).
	ParseRequest(suffix string, body []byte) (*Body, error)
}

// ResponseParser is implemented by parsers that read their API's responses.
// ParseResponse is called with one JSON document of a response to a request
// the parser parsed as api (Body.API): the whole body of a non-streaming
// response, or the data of one server-sent event (without the "data:"
// prefix; "[DONE]" is never passed). It sets the fields of u that the
// document reports and leaves the others, so usage split over several events
// (Anthropic's message_start and message_delta) adds up. It is best effort:
// a document it does not understand changes nothing. It must not keep doc
// and must not panic.
type ResponseParser interface {
	ParseResponse(api string, doc []byte, u *Usage)
}

// Usage is the token usage an engine reports for one request.
type Usage struct {
	PromptTokens     int // all prompt tokens, cached ones included
	CompletionTokens int
	CachedTokens     int // prompt tokens served from the engine's prefix cache
}

// Body is the typed view of a request body.
type Body struct {
	API      string    // the claimed suffix the body was parsed as, e.g. "chat/completions"
	Model    string    // the model the client asked for ("" when the API has none)
	Prompt   string    // completions-style prompt text (also embeddings input)
	Messages []Message // chat-style messages, in order
	// Tools are the tool (function) definitions as they appear in the body.
	Tools    json.RawMessage
	System   string   // a top-level system prompt (Anthropic, Responses instructions)
	TokenIDs []uint32 // token ids when the client sent them
	Stream   bool
	// IncludeUsage is stream_options.include_usage.
	IncludeUsage bool
	MaxTokens    int
	CacheSalt    string
	// Raw is the body as received, or as rewritten by SetModel.
	Raw []byte
}

// Message is one chat message: its role, its text content flattened (text
// parts, reasoning, tool calls and tool results, in order), and its non-text
// parts.
type Message struct {
	Role    string
	Content string
	// Media are the message's non-text parts (images, audio, video, files),
	// in order; nil for text-only messages.
	Media []Media
}

// Media is a non-text content part: its type as the API names it
// ("image_url", "input_audio", "image", "document", ...) and what identifies
// its content: the URL, the inline (base64) data, or the file id.
type Media struct {
	Type string
	Ref  string
}

// PromptLen returns the number of prompt bytes the prefix hashing will see:
// tools, system, each message's role and content, and the prompt.
func (b *Body) PromptLen() int {
	n := len(b.Tools) + len(b.System) + len(b.Prompt)
	for _, m := range b.Messages {
		n += len(m.Role) + len(m.Content)
	}
	return n
}

// BytesPerToken is the prompt bytes counted as one token when a request
// carries text rather than token ids: the pseudo-token size of SPEC §5.1.
const BytesPerToken = 4

// TokenEstimate returns the request's prompt tokens: the token ids when the
// client sent them, otherwise PromptLen / BytesPerToken rounded up.
func (b *Body) TokenEstimate() int {
	if len(b.TokenIDs) > 0 {
		return len(b.TokenIDs)
	}
	return (b.PromptLen() + BytesPerToken - 1) / BytesPerToken
}

// SetModel sets the model to name and rewrites Raw to match: the top-level
// "model" member's value is replaced (or a "model" member is added at the
// front when there is none), everything else is kept byte for byte. Raw gets
// a new array; the old one is not modified. It fails only when Raw is not a
// JSON object.
func (b *Body) SetModel(name string) error {
	var d Decoder
	d.Reset(b.Raw)
	if !d.Object() {
		return fmt.Errorf("parsers: set model: %w", d.Err())
	}
	open := d.Offset() // just after '{'
	start, end := -1, -1
	for d.More() {
		key := d.Key()
		d.skipWS()
		if string(key) == "model" {
			start = d.Offset()
			d.Skip()
			end = d.Offset()
			continue
		}
		d.Skip()
	}
	if err := d.End(); err != nil {
		return fmt.Errorf("parsers: set model: %w", err)
	}
	var raw []byte
	if start >= 0 {
		raw = make([]byte, 0, len(b.Raw)-(end-start)+len(name)+2)
		raw = append(raw, b.Raw[:start]...)
		raw = AppendQuote(raw, name)
		raw = append(raw, b.Raw[end:]...)
	} else {
		raw = make([]byte, 0, len(b.Raw)+len(name)+11)
		raw = append(raw, b.Raw[:open]...)
		raw = append(raw, `"model":`...)
		raw = AppendQuote(raw, name)
		rest := b.Raw[open:]
		if bytes.TrimLeft(rest, " \t\r\n")[0] != '}' {
			raw = append(raw, ',')
		}
		raw = append(raw, rest...)
	}
	b.Raw, b.Model = raw, name
	return nil
}

// Selector chooses a parser by the longest matching path suffix.
type Selector struct {
	entries  []entry
	fallback Parser
}

type entry struct {
	suffix string
	p      Parser
}

// NewSelector returns a selector over ps. When two parsers claim the same
// suffix the first wins, so configuration order decides; the first parser
// that claims no suffix is the fallback for paths no parser claims.
func NewSelector(ps ...Parser) *Selector {
	s := &Selector{}
	seen := map[string]bool{}
	for _, p := range ps {
		paths := p.Paths()
		if len(paths) == 0 && s.fallback == nil {
			s.fallback = p
		}
		for _, suf := range paths {
			suf = strings.Trim(suf, "/")
			if suf == "" || seen[suf] {
				continue
			}
			seen[suf] = true
			s.entries = append(s.entries, entry{suf, p})
		}
	}
	return s
}

// Select returns the parser for path and the suffix it matched. The query
// string and trailing slashes are ignored; a suffix matches only at a segment
// boundary ("/v1/chat/completions" matches "completions" and
// "chat/completions"; the longer wins). A path no parser claims goes to the
// fallback parser with suffix "", or is an error wrapping ErrNoParser.
func (s *Selector) Select(path string) (Parser, string, error) {
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	path = strings.TrimRight(path, "/")
	var best *entry
	for i := range s.entries {
		e := &s.entries[i]
		if !strings.HasSuffix(path, e.suffix) {
			continue
		}
		if rest := path[:len(path)-len(e.suffix)]; rest != "" && !strings.HasSuffix(rest, "/") {
			continue
		}
		if best == nil || len(e.suffix) > len(best.suffix) {
			best = e
		}
	}
	if best == nil {
		if s.fallback != nil {
			return s.fallback, "", nil
		}
		return nil, "", fmt.Errorf("parsers: %w %q", ErrNoParser, path)
	}
	return best.p, best.suffix, nil
}

// Parse selects the parser for path and parses body.
func (s *Selector) Parse(path string, body []byte) (*Body, error) {
	p, suf, err := s.Select(path)
	if err != nil {
		return nil, err
	}
	return p.ParseRequest(suf, body)
}

// ReadContent starts reading message content as the chat APIs write it:
// null, a string (added to text), or an array of parts, for which it
// reports true and the caller reads each element while d.More(). Any other
// value is an error naming what the array holds (e.g. "content parts"); an
// invalid one a syntax error.
func ReadContent(d *Decoder, text *Concat, what string) (parts bool) {
	switch d.Kind() {
	case Null:
		d.Null()
	case String:
		text.Add(d.String())
	case Array:
		return d.Array()
	case Invalid:
		d.Skip() // reports the syntax error
	default:
		d.Errorf("want a string or an array of %s", what)
	}
	return false
}

// Concat builds a message's flattened text from its parts. The zero value is
// empty and ready; it allocates only for a second non-empty part, so the
// common one-part message keeps the parser's string as is.
type Concat struct {
	first string
	sb    *strings.Builder
}

// Add appends s.
func (c *Concat) Add(s string) {
	switch {
	case s == "":
	case c.sb != nil:
		c.sb.WriteString(s)
	case c.first == "":
		c.first = s
	default:
		c.sb = &strings.Builder{}
		c.sb.WriteString(c.first)
		c.sb.WriteString(s)
	}
}

// String returns the text so far.
func (c *Concat) String() string {
	if c.sb != nil {
		return c.sb.String()
	}
	return c.first
}
