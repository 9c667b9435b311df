package precise_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/kvindex/redisindex/redistest"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/requestcontrol/producers/precise"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/schedulingtest"
)

func TestModeNoneNeedsRedis(t *testing.T) {
	_, err := std.Registry().Build(precise.TypeName, "p", []byte(`{"kvEventsConfig":{"mode":"none"}}`))
	if err == nil || !strings.Contains(err.Error(), "kvEventsConfig.mode: none needs indexBackend redis") {
		t.Fatalf("error %v", err)
	}
	_, err = std.Registry().Build(precise.TypeName, "p", []byte(`{"indexBackend":"redis"}`))
	if err == nil || !strings.Contains(err.Error(), "redis.address: required") {
		t.Fatalf("error %v", err)
	}
}

func redisParams(addr, mode, extra string) string {
	return fmt.Sprintf(`{"indexBackend":"redis","redis":{"address":%q,"keyPrefix":"precise-test:","timeout":"1s"},
		"kvEventsConfig":{"mode":%q,"zmqEndpoint":"tcp://127.0.0.1:0"}%s}`, addr, mode, extra)
}

// TestRedisReaderSeesWriters: a producer that follows no events (mode none)
// matches what another producer's subscriber applied to the shared index.
func TestRedisReaderSeesWriters(t *testing.T) {
	srv := redistest.Start(t)
	writer, _ := build(t, redisParams(srv.Addr, "bind", ""))
	reader, _ := build(t, redisParams(srv.Addr, "none", ""))
	if reader.Subscriber() != nil || reader.Index() != nil || reader.Store() == nil {
		t.Fatal("a reader in mode none has a subscriber or a local index, or no store")
	}
	eps := schedulingtest.Eps(schedulingtest.Ep("a"), schedulingtest.Ep("b"))
	toks := tokens(3, 16*4)
	writer.Store().Apply(eps[1].HostPort(), &kvindex.Batch{Model: "m", Events: []kvindex.Event{stored(1, toks, 0, 3, "GPU")}})
	if m := produce(t, reader, request(toks), eps); !near(m.Matched, []float64{0, 3}) || m.TotalBlocks != 4 {
		t.Fatalf("reader matched %v of %d", m.Matched, m.TotalBlocks)
	}
	// Removing the endpoint from the writer's pool forgets it for all.
	writer.EndpointRemoved(eps[1])
	if m := produce(t, reader, request(toks), eps); !m.Cold() {
		t.Fatalf("reader matched %v after the writer removed the endpoint", m.Matched)
	}
	if st := reader.BackendStats(); st.Backend != "redis" || st.Lookups != 2 {
		t.Fatalf("reader stats %+v", st)
	}
}

// TestRedisDownFallsBackToSpeculation: with the server unreachable a
// request gets no prefix data within the timeout — or, with speculative
// indexing, this replica's own recent picks.
func TestRedisDownFallsBackToSpeculation(t *testing.T) {
	down := `{"indexBackend":"redis","redis":{"address":"127.0.0.1:1","timeout":"200ms"},"kvEventsConfig":{"mode":"none"}%s}`
	eps := schedulingtest.Eps(schedulingtest.Ep("a"), schedulingtest.Ep("b"))
	toks := tokens(5, 16*3)

	p, _ := build(t, fmt.Sprintf(down, ""))
	req := request(toks)
	start := time.Now()
	if err := p.Produce(ctx, req, eps); err != nil {
		t.Fatalf("Produce: %v (want no data, no error)", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Produce took %v with the server down", d)
	}
	if _, ok := plugins.Get(&req.Data, scheduling.PrefixMatchKey(precise.TypeName)); ok {
		t.Fatal("prefix data written though the index did not answer")
	}
	if st := p.BackendStats(); st.Errors != 1 {
		t.Fatalf("stats %+v", st)
	}

	spec, _ := build(t, fmt.Sprintf(down, `,"speculativeIndexing":true`))
	r := request(toks)
	spec.Produce(ctx, r, eps)
	spec.PreRequest(ctx, r, &scheduling.Result{Primary: "default",
		Profiles: []scheduling.ProfileResult{{Profile: "default", Endpoints: eps[1:]}}})
	if m := produce(t, spec, request(toks), eps); !near(m.Matched, []float64{0, 3}) {
		t.Fatalf("speculative fallback matched %v", m.Matched)
	}
}
