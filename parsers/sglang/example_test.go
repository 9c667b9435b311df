package sglang_test

import (
	"fmt"

	"github.com/eppkit/eppkit/parsers/sglang"
)

// SGLang's generate has no model field: the LoRA adapter names the model.
func ExampleParser_ParseRequest() {
	b, err := (&sglang.Parser{}).ParseRequest(sglang.Generate, []byte(`{"text":"Once upon a time","lora_path":"story-lora","sampling_params":{"max_new_tokens":64}}`))
	fmt.Println(b.Model, b.Prompt, b.MaxTokens, err)
	// Output: story-lora Once upon a time 64 <nil>
}
