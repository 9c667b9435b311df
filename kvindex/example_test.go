package kvindex_test

import (
	"fmt"
	"strings"

	"github.com/eppkit/eppkit/kvindex"
)

func Example() {
	const model = "llama-3-8b"
	system := strings.Repeat("You are a terse assistant for the billing team. ", 30) // 1,440 bytes

	// A request went to endpoint a: credit it with the request's blocks.
	x := kvindex.NewPrefixIndex(kvindex.PrefixIndexConfig{})
	first := kvindex.HashPrompt(nil, model, "", system+"What is my balance?", kvindex.DefaultBlockTokens, kvindex.DefaultMaxBlocks)
	x.Add("10.0.0.1:8000", first)

	// A new request shares the system prompt: a holds its first 5 blocks.
	next := kvindex.HashPrompt(nil, model, "", system+"Cancel my plan.", kvindex.DefaultBlockTokens, kvindex.DefaultMaxBlocks)
	endpoints := []string{"10.0.0.1:8000", "10.0.0.2:8000"}
	matched := make([]int, len(endpoints))
	x.Match(next, endpoints, matched)
	for i, e := range endpoints {
		fmt.Printf("%s: %d of %d blocks\n", e, matched[i], len(next))
	}
	// Output:
	// 10.0.0.1:8000: 5 of 6 blocks
	// 10.0.0.2:8000: 0 of 6 blocks
}

func ExampleChainHasher() {
	// Hash a chat request piece by piece, without building the prompt.
	var h kvindex.ChainHasher
	h.Reset("llama-3-8b", "", kvindex.DefaultBlockTokens, kvindex.DefaultMaxBlocks)
	for _, m := range []struct{ role, content string }{
		{"system", strings.Repeat("Answer in French. ", 40)},
		{"user", "How are you?"},
	} {
		if h.Full() {
			break
		}
		h.WriteString(m.role)
		h.WriteString(m.content)
	}
	fmt.Println(len(h.AppendSum(nil)), "blocks")
	// Output: 3 blocks
}

func ExampleHashPrompt() {
	prompt := strings.Repeat("You are a helpful assistant. ", 20) // 580 bytes
	hashes := kvindex.HashPrompt(nil, "llama-3-8b", "", prompt, kvindex.DefaultBlockTokens, kvindex.DefaultMaxBlocks)
	fmt.Println(len(hashes), "blocks") // 256 + 256 + a partial 68
	// Output: 3 blocks
}

func ExampleCapacityFromEngine() {
	// An engine with 16-token blocks and 31,250 of them on the GPU holds
	// 500,000 tokens: 7,812 index blocks of 64 tokens.
	blocks := kvindex.CapacityFromEngine(16, 31_250, kvindex.DefaultBlockTokens)
	x := kvindex.NewPrefixIndex(kvindex.PrefixIndexConfig{})
	x.SetCapacity("10.0.0.1:8000", blocks)
	fmt.Println(blocks)
	// Output: 7812
}
