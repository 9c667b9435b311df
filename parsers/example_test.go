package parsers_test

import (
	"fmt"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/parsers/anthropic"
	"github.com/eppkit/eppkit/parsers/openai"
	"github.com/eppkit/eppkit/parsers/passthrough"
)

// The selector picks the parser by the longest path suffix; the fallback
// takes what no parser claims.
func ExampleSelector() {
	s := parsers.NewSelector(&openai.Parser{}, &anthropic.Parser{}, &passthrough.Parser{})
	b, err := s.Parse("/v1/chat/completions?debug=1", []byte(`{"model":"llama","messages":[
		{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"https://x/cat.png"}}]}]}`))
	fmt.Println(b.API, b.Model, b.Messages[0].Content, b.Messages[0].Media, err)
	_, suffix, _ := s.Select("/v1/messages/count_tokens")
	fmt.Println(suffix)
	_, err = s.Parse("/v1/chat/completions", []byte(`{"model":"llama","messages":[{"role":"user","content":7}]}`))
	fmt.Println(err)
	// Output:
	// chat/completions llama what is this? [{image_url https://x/cat.png}] <nil>
	// messages/count_tokens
	// openai-parser: bad request: messages[0].content: want a string or an array of content parts
}

// ReplaceModel rewrites the engine's model name back in any JSON or SSE
// bytes, leaving names inside text alone.
func ExampleReplaceModel() {
	event := []byte(`data: {"model":"llama-canary","choices":[{"delta":{"content":"I am \"model\":\"llama-canary\""}}]}`)
	fmt.Println(string(parsers.ReplaceModel(event, "llama-canary", "llama")))
	// Output:
	// data: {"model":"llama","choices":[{"delta":{"content":"I am \"model\":\"llama-canary\""}}]}
}

// A Decoder walks JSON without reflection; errors name the path.
func ExampleDecoder() {
	var d parsers.Decoder
	d.Reset([]byte(`{"model":"m","max_tokens":"many"}`))
	for d.Object(); d.More(); {
		switch string(d.Key()) {
		case "max_tokens":
			fmt.Println(d.Int())
		default:
			d.Skip()
		}
	}
	fmt.Println(d.End())
	// Output:
	// 0
	// max_tokens: want a number, got a string
}
