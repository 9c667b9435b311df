package fakeserver_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/eppkit/eppkit/examples/fakeserver"
)

// A fake server answers OpenAI requests and names itself in x-served-by.
func Example() {
	s, err := fakeserver.Start(fakeserver.Config{}, "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer s.Close()
	resp, err := http.Post(s.URL()+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"fake-model","prompt":"hello there","max_tokens":3}`))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct{ Text string }
		Usage   struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	fmt.Println(resp.Header.Get(fakeserver.HeaderServedBy) == s.Addr())
	fmt.Printf("%q, %d prompt tokens\n", out.Choices[0].Text, out.Usage.PromptTokens)
	// Output:
	// true
	// "the quick brown ", 3 prompt tokens
}

// The tokenizer is one token per word, so a test can count blocks.
func ExampleTokenize() {
	fmt.Println(len(fakeserver.Tokenize(nil, "one two  three\nfour")))
	// Output: 4
}
