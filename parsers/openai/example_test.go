package openai_test

import (
	"fmt"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/parsers/openai"
)

// Responses-API items become messages: function calls and their outputs
// included, so prefix routing sees the whole conversation.
func ExampleParser_ParseRequest() {
	b, _ := (&openai.Parser{}).ParseRequest(openai.Responses, []byte(`{"model":"gpt","instructions":"be brief","input":[
		{"role":"user","content":"weather in Paris?"},
		{"type":"function_call","name":"weather","arguments":"{\"city\":\"Paris\"}","call_id":"c1"},
		{"type":"function_call_output","call_id":"c1","output":"sunny"}]}`))
	fmt.Println(b.System)
	for _, m := range b.Messages {
		fmt.Printf("%s: %s\n", m.Role, m.Content)
	}
	var u parsers.Usage
	(&openai.Parser{}).ParseResponse(b.API, []byte(`{"type":"response.completed","response":{"usage":{"input_tokens":30,"output_tokens":5}}}`), &u)
	fmt.Printf("%+v\n", u)
	// Output:
	// be brief
	// user: weather in Paris?
	// assistant: weather{"city":"Paris"}
	// tool: sunny
	// {PromptTokens:30 CompletionTokens:5 CachedTokens:0}
}
