package anthropic_test

import (
	"fmt"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/parsers/anthropic"
)

// Anthropic streams split usage: input and cache tokens in message_start,
// output tokens in message_delta.
func ExampleParser_ParseResponse() {
	p := &anthropic.Parser{}
	var u parsers.Usage
	p.ParseResponse(anthropic.Messages, []byte(`{"type":"message_start","message":{"usage":{"input_tokens":20,"cache_read_input_tokens":80,"output_tokens":1}}}`), &u)
	p.ParseResponse(anthropic.Messages, []byte(`{"type":"message_delta","usage":{"output_tokens":42}}`), &u)
	fmt.Printf("%+v\n", u)
	// Output: {PromptTokens:100 CompletionTokens:42 CachedTokens:80}
}
