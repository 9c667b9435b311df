package kvindex_test

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/eppkit/eppkit/kvindex"
)

func ExampleEventIndex() {
	// An engine reports that it stored two 16-token blocks of a prompt.
	prompt := make([]uint32, 40) // 2 full blocks and a partial one
	for i := range prompt {
		prompt[i] = uint32(1000 + i)
	}
	payload, _ := msgpack.Marshal([]any{1712345678.5, []any{
		[]any{"BlockStored", []any{uint64(0xa1), uint64(0xa2)}, nil, prompt[:32], 16, nil, "GPU", nil},
	}, 0})
	var dec kvindex.Decoder
	batch, err := dec.Decode("kv@10.0.0.1@llama-3-8b", 0, payload)
	if err != nil {
		panic(err)
	}
	x, _ := kvindex.NewEventIndex(kvindex.EventIndexConfig{})
	x.Apply("10.0.0.1:8000", batch)

	// A request for the same prompt: which endpoint holds how much of it?
	keys := x.BlockKeys(nil, "llama-3-8b", "", prompt, 0)
	endpoints := []string{"10.0.0.1:8000", "10.0.0.2:8000"}
	matched := make([]float64, len(endpoints))
	x.Match(keys, endpoints, matched)
	for i, e := range endpoints {
		fmt.Printf("%s: %.0f of %d blocks\n", e, matched[i], len(keys))
	}
	// Output:
	// 10.0.0.1:8000: 2 of 2 blocks
	// 10.0.0.2:8000: 0 of 2 blocks
}

func ExampleParseTopic() {
	endpoint, model, ok := kvindex.ParseTopic("kv@10.0.0.1:8000@meta-llama/Llama-3.1-8B")
	fmt.Println(endpoint, model, ok)
	// Output: 10.0.0.1:8000 meta-llama/Llama-3.1-8B true
}

func ExampleVLLMHasher() {
	// vLLM's sha256_cbor block hashes with PYTHONHASHSEED=0.
	h := kvindex.NewVLLMHasher("0")
	tokens := make([]uint32, 32)
	for i := range tokens {
		tokens[i] = uint32(i + 1)
	}
	fmt.Println(h.AppendHashes(nil, tokens, 16, "", "", 0))
	// Output: [3236607068019569386 2758186210834249151]
}
