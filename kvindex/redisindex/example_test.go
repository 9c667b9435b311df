package redisindex_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/kvindex/redisindex"
)

// A lookup that the server does not answer — here there is none — fails
// within the timeout, and the request goes on without prefix data. After a
// few failures in a row the backend is marked down and lookups fail at
// once, until it is tried again.
func Example() {
	x, err := redisindex.NewPrefixIndex(redisindex.Config{
		Address: "127.0.0.1:1", // nothing listens there
		Timeout: 100 * time.Millisecond,
	}, kvindex.PrefixIndexConfig{})
	if err != nil {
		panic(err)
	}
	defer x.Close()
	chain := kvindex.HashPrompt(nil, "m", "", "a prompt of some length, long enough for a block or two", 4, 0)
	matched := make([]int, 2)
	for range redisindex.DefaultDownAfter + 1 {
		err = x.MatchContext(context.Background(), chain, []string{"10.0.0.1:8000", "10.0.0.2:8000"}, matched)
	}
	fmt.Println(matched, errors.Is(err, redisindex.ErrUnavailable))
	st := x.BackendStats()
	fmt.Println(st.Errors, st.Skipped, st.Down)
	// Output:
	// [0 0] true
	// 3 1 true
}

// Two replicas of a picker share the approximate index: what one credits
// after a pick, the other finds.
func ExamplePrefixIndex() {
	cfg := redisindex.Config{Address: "localhost:6379", KeyPrefix: "pool-a:"}
	a, _ := redisindex.NewPrefixIndex(cfg, kvindex.PrefixIndexConfig{})
	b, _ := redisindex.NewPrefixIndex(cfg, kvindex.PrefixIndexConfig{})
	defer a.Close()
	defer b.Close()

	chain := kvindex.HashPrompt(nil, "m", "", "the prompt of a request replica A sent to 10.0.0.2", 4, 0)
	a.Add("10.0.0.2:8000", chain)     // after A's pick; written in the background
	_ = a.Flush(context.Background()) // only so that B sees it at once

	matched := make([]int, 2)
	if err := b.MatchContext(context.Background(), chain, []string{"10.0.0.1:8000", "10.0.0.2:8000"}, matched); err != nil {
		fmt.Println("no prefix data:", err)
		return
	}
	fmt.Println(matched)
}

// A replica's subscriber applies an engine's KV events to the shared
// precise index; any replica looks requests up in it.
func ExampleEventIndex() {
	cfg := redisindex.Config{Address: "localhost:6379"}
	x, err := redisindex.NewEventIndex(cfg, kvindex.EventIndexConfig{BlockTokens: 16})
	if err != nil {
		panic(err)
	}
	defer x.Close()
	sub, err := kvindex.NewSubscriber(kvindex.SubscriberConfig{Mode: kvindex.ModeBind, BindAddress: "tcp://*:5557"}, x)
	if err != nil {
		panic(err)
	}
	defer sub.Close()

	tokens := make([]uint32, 64) // the request's token ids
	keys := x.BlockKeys(nil, "m", "", tokens, 0)
	matched := make([]float64, 1)
	_ = x.MatchContext(context.Background(), keys, []string{"10.0.0.1:8000"}, matched)
	fmt.Println(matched)
}
