package redisindex

import (
	"context"
	"testing"

	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/kvindex/kvindextest"
	"github.com/eppkit/eppkit/kvindex/redisindex/redistest"
)

// TestSweepsOverlap: replica B's sweep of a dropped id is under way when
// replica A's completes and frees the id, and a new endpoint takes it; B's
// remaining steps and its freeing must leave the newcomer's bits and id
// alone.
func TestSweepsOverlap(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	cfg := Config{Address: srv.Addr, KeyPrefix: "sweep:", TTL: -1}
	a, err := NewPrefixIndex(cfg, kvindex.PrefixIndexConfig{DefaultCapacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	old := kvindextest.Chain(1, 3000) // more fields than one sweep step scans
	a.Add("gone", old)
	kvindextest.Sync(t, a)
	a.RemoveEndpoint("gone") // id 0 dropped, its 3,000 bits left
	kvindextest.Sync(t, a)

	keys := []string{a.h.hold, a.h.owners, a.h.log, a.h.epoch}
	idp := cfg.KeyPrefix + "ai:"
	ids, err := orphansScript.Run(ctx, a.c.client, keys, idp).StringSlice()
	if err != nil || len(ids) != 1 || ids[0] != "0" {
		t.Fatalf("orphans %v %v, want [0]", ids, err)
	}
	// B: one step of its sweep.
	bArgs := []any{"0", 100, 1, idp, "0"}
	cursor, err := sweepScript.Run(ctx, a.c.client, keys, bArgs...).Text()
	if err != nil || cursor == "0" {
		t.Fatalf("first step: cursor %q %v", cursor, err)
	}
	// A: a whole sweep, which frees id 0; a newcomer takes it.
	sweep(a.c, a.h)
	fresh := kvindextest.Chain(2, 3000)
	a.Add("new", fresh)
	kvindextest.Sync(t, a)
	if id, _ := a.c.client.Get(ctx, idp+"new").Result(); id != "0" {
		t.Fatalf("the newcomer has id %q, want the freed 0", id)
	}
	// B goes on to the end and frees what it swept.
	for cursor != "0" {
		bArgs[0] = cursor
		if cursor, err = sweepScript.Run(ctx, a.c.client, keys, bArgs...).Text(); err != nil {
			t.Fatal(err)
		}
	}
	if err := freeScript.Run(ctx, a.c.client, keys, idp, "0").Err(); err != nil {
		t.Fatal(err)
	}
	m := make([]int, 2)
	if err := a.MatchContext(ctx, fresh, []string{"new", "gone"}, m); err != nil || m[0] != 3000 || m[1] != 0 {
		t.Fatalf("matched %v %v, want [3000 0]: B's sweep touched the newcomer", m, err)
	}
	if owner, _ := a.c.client.HGet(ctx, a.h.owners, "0").Result(); owner != "new" {
		t.Fatalf("owner of id 0 %q, want new", owner)
	}
}
