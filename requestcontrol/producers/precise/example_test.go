package precise_test

import (
	"context"
	"fmt"

	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/requestcontrol/producers/precise"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/schedulingtest"
)

func Example() {
	// The producer as a configuration builds it (defaults: connect mode,
	// 16-token blocks, xxh64 keys).
	v, _ := std.Registry().Build(precise.TypeName, precise.TypeName, nil)
	p := v.(*precise.Producer)
	p.Init(context.Background(), plugins.Deps{Name: precise.TypeName})
	defer p.Close()

	// Engine a reported two blocks of the prompt (normally through the
	// subscriber).
	prompt := make([]uint32, 48)
	for i := range prompt {
		prompt[i] = uint32(500 + i)
	}
	eps := schedulingtest.Eps(schedulingtest.Ep("a"), schedulingtest.Ep("b"))
	p.Index().Apply(eps[0].HostPort(), &kvindex.Batch{Model: "m", Events: []kvindex.Event{{
		Kind: kvindex.BlockStored, BlockHashes: []uint64{1, 2}, TokenIDs: prompt[:32], BlockSize: 16, Medium: "GPU",
	}}})

	req := schedulingtest.Req("m").Body(&parsers.Body{Model: "m", TokenIDs: prompt}).Build()
	p.Produce(context.Background(), req, eps)
	m, _ := plugins.Get(&req.Data, scheduling.PrefixMatchKey(precise.TypeName))
	fmt.Println(m.Matched, "of", m.TotalBlocks)
	// Output: [2 0] of 3
}
