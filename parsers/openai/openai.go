// Package openai parses OpenAI-compatible request bodies: completions and
// chat/completions, the APIs vLLM, SGLang and most engines serve.
package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/eppkit/eppkit/parsers"
)

// Parser is the openai-parser plugin. It has no parameters.
type Parser struct{}

var _ parsers.Parser = (*Parser)(nil)

// Paths returns the suffixes the parser claims.
func (*Parser) Paths() []string { return []string{"completions", "chat/completions"} }

type request struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	Messages      []message       `json:"messages"`
	Tools         json.RawMessage `json:"tools"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int   `json:"max_tokens"`
	MaxCompletionTokens *int   `json:"max_completion_tokens"`
	CacheSalt           string `json:"cache_salt"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// ParseRequest parses a completions or chat/completions body.
func (*Parser) ParseRequest(suffix string, body []byte) (*parsers.Body, error) {
	var r request
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, badRequest("invalid JSON body: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if r.Model == "" {
		return nil, badRequest("missing model")
	}
	b := &parsers.Body{
		API: suffix, Model: r.Model, Stream: r.Stream, CacheSalt: r.CacheSalt, Raw: body,
	}
	if r.StreamOptions != nil {
		b.IncludeUsage = r.StreamOptions.IncludeUsage
	}
	switch {
	case r.MaxCompletionTokens != nil:
		b.MaxTokens = *r.MaxCompletionTokens
	case r.MaxTokens != nil:
		b.MaxTokens = *r.MaxTokens
	}
	if len(r.Tools) > 0 && !isNull(r.Tools) {
		b.Tools = r.Tools
	}
	switch suffix {
	case "chat/completions":
		if len(r.Messages) == 0 {
			return nil, badRequest("chat/completions: missing messages")
		}
		b.Messages = make([]parsers.Message, len(r.Messages))
		for i, m := range r.Messages {
			text, err := flattenContent(m.Content)
			if err != nil {
				return nil, badRequest("messages[%d].content: %v", i, err)
			}
			b.Messages[i] = parsers.Message{Role: m.Role, Content: text}
		}
	default:
		if err := parsePrompt(r.Prompt, b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// flattenContent returns a message's text: a string, or the concatenated
// text of its content parts (non-text parts contribute nothing).
func flattenContent(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("want a string or an array of content parts")
	}
	var sb strings.Builder
	for _, p := range parts {
		if p.Type == "text" || p.Type == "input_text" {
			sb.WriteString(p.Text)
		}
	}
	return sb.String(), nil
}

// parsePrompt accepts a string, an array of strings (joined), an array of
// token ids, or an array of token-id arrays (the first is used, as the batch's
// requests share one endpoint).
func parsePrompt(raw json.RawMessage, b *parsers.Body) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return badRequest("completions: missing prompt")
	}
	switch raw[0] {
	case '"':
		return unmarshalPrompt(raw, &b.Prompt)
	case '[':
	default:
		return badRequest("completions: prompt must be a string or an array")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return badRequest("completions: prompt: %v", err)
	}
	if len(items) == 0 {
		return badRequest("completions: empty prompt array")
	}
	first := bytes.TrimSpace(items[0])
	switch {
	case len(first) > 0 && first[0] == '"':
		var ss []string
		if err := json.Unmarshal(raw, &ss); err != nil {
			return badRequest("completions: prompt: mixed array")
		}
		b.Prompt = strings.Join(ss, "")
	case len(first) > 0 && first[0] == '[':
		return unmarshalPrompt(first, &b.TokenIDs)
	default:
		return unmarshalPrompt(raw, &b.TokenIDs)
	}
	return nil
}

func unmarshalPrompt(raw json.RawMessage, dst any) error {
	if err := json.Unmarshal(raw, dst); err != nil {
		return badRequest("completions: prompt: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

func badRequest(format string, args ...any) error {
	return fmt.Errorf("openai-parser: %w: %s", parsers.ErrBadRequest, fmt.Sprintf(format, args...))
}
