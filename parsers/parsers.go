package parsers

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrBadRequest marks a body the parser rejects; the pipeline answers 400.
var ErrBadRequest = errors.New("bad request")

// ErrNoParser is returned when no parser claims a path; the pipeline answers 400.
var ErrNoParser = errors.New("no parser for path")

// Parser parses request bodies of one API family. ParseRequest is called once
// per request from any goroutine; it must not keep body after returning except
// through Body.Raw, and must return an error wrapping ErrBadRequest for input
// it cannot parse, never panic.
type Parser interface {
	// Paths returns the URL-path suffixes the parser claims, without leading
	// slash, e.g. "chat/completions".
	Paths() []string
	// ParseRequest parses body for the API at the claimed suffix.
	ParseRequest(suffix string, body []byte) (*Body, error)
}

// Body is the typed view of a request body.
type Body struct {
	API      string // the claimed suffix the body was parsed as, e.g. "chat/completions"
	Model    string
	Prompt   string    // completions-style prompt text
	Messages []Message // chat-style messages
	Tools    json.RawMessage
	System   string   // a top-level system prompt (Anthropic)
	TokenIDs []uint32 // token ids when the client sent them
	Stream   bool
	// IncludeUsage is stream_options.include_usage.
	IncludeUsage bool
	MaxTokens    int
	CacheSalt    string
	// Raw is the body as received; the pipeline re-serialises it on rewrite.
	Raw []byte
}

// Message is one chat message with its text content flattened.
type Message struct {
	Role    string
	Content string
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

// Selector chooses a parser by the longest matching path suffix.
type Selector struct {
	entries []entry
}

type entry struct {
	suffix string
	p      Parser
}

// NewSelector returns a selector over ps. When two parsers claim the same
// suffix the first wins, so configuration order decides.
func NewSelector(ps ...Parser) *Selector {
	s := &Selector{}
	seen := map[string]bool{}
	for _, p := range ps {
		for _, suf := range p.Paths() {
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
// "chat/completions"; the longer wins).
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
