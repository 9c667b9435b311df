package vllmhttp_test

import (
	"fmt"

	"github.com/eppkit/eppkit/parsers/vllmhttp"
)

func ExampleParser_ParseRequest() {
	b, err := (&vllmhttp.Parser{}).ParseRequest(vllmhttp.Generate, []byte(`{"token_ids":[101,2023,2003],"sampling_params":{"max_tokens":8}}`))
	fmt.Println(b.TokenIDs, b.MaxTokens, err)
	// Output: [101 2023 2003] 8 <nil>
}
