package prefix_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eppkit/eppkit/kvindex/redisindex/redistest"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/requestcontrol/producers/prefix"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/schedulingtest"
)

func TestRedisParamsAreChecked(t *testing.T) {
	for params, want := range map[string]string{
		`{"indexBackend":"etcd"}`:                                                         `indexBackend: "etcd" is not memory or redis`,
		`{"indexBackend":"redis"}`:                                                        "redis.address: required",
		`{"indexBackend":"redis","redis":{"address":"nohost"}}`:                           "redis.address: \"nohost\" is not host:port",
		`{"indexBackend":"redis","redis":{"address":"h:1","timeout":"0s"}}`:               "redis.timeout: must be > 0",
		`{"indexBackend":"redis","redis":{"address":"h:1","writeQueue":0}}`:               "redis.writeQueue: must be > 0",
		`{"indexBackend":"redis","redis":{"address":"h:1","tls":{"caFile":"/ca.pem"}}}`:   "redis.tls: set enabled: true",
		`{"indexBackend":"redis","redis":{"address":"h:1","db":-1,"keyPrefix":""}}`:       "redis.keyPrefix: must not be empty",
		`{"indexBackend":"redis","redis":{"address":"h:1","ttl":"-1s","poolSize":-2}}`:    "redis.ttl: must be ≥ 0",
		`{"indexBackend":"memory","redis":{"address":"ignored with the memory backend"}}`: "",
	} {
		_, err := std.Registry().Build(scheduling.DefaultPrefixProducer, "p", []byte(params))
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", params, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: error %v, want one saying %q", params, err, want)
		}
	}
}

func TestRedisInitErrors(t *testing.T) {
	for params, want := range map[string]string{
		`{"indexBackend":"redis","redis":{"address":"127.0.0.1:1","passwordEnv":"EPPKIT_TEST_UNSET_PASSWORD"}}`:            "redis.passwordEnv: environment variable EPPKIT_TEST_UNSET_PASSWORD is not set",
		`{"indexBackend":"redis","redis":{"address":"127.0.0.1:1","tls":{"enabled":true,"caFile":"/nonexistent/ca.pem"}}}`: "redis.tls.caFile",
	} {
		v, err := std.Registry().Build(scheduling.DefaultPrefixProducer, "p", []byte(params))
		if err != nil {
			t.Fatal(err)
		}
		err = plugins.Init(ctx, v, pluginstest.Deps(t))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Init error %v, want %q", params, err, want)
		}
	}
}

func redisProducer(t *testing.T, addr, keyPrefix, timeout string) *prefix.Approx {
	t.Helper()
	return newProducer(t, fmt.Sprintf(`{"indexBackend":"redis","redis":{"address":%q,"keyPrefix":%q,"timeout":%q}}`, addr, keyPrefix, timeout))
}

// TestRedisProducersShareCredits: what one producer credits after a pick,
// another producer on the same server matches.
func TestRedisProducersShareCredits(t *testing.T) {
	srv := redistest.Start(t)
	a, b := redisProducer(t, srv.Addr, "share:", "1s"), redisProducer(t, srv.Addr, "share:", "1s")
	if a.Index() != nil {
		t.Fatal("a producer with a shared index has a local one")
	}
	eps := schedulingtest.Eps(schedulingtest.Ep("a"), schedulingtest.Ep("b"), schedulingtest.Ep("c"))
	system := strings.Repeat("shared system prompt ", 100)
	r1 := chat("m", system, "first question")
	match(t, a, r1, eps)
	pick(a, r1, eps[2], nil)
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	m := match(t, b, chat("m", system, "first question"), eps)
	if m.Matched[2] != float64(m.TotalBlocks) || m.Matched[0] != 0 || m.Matched[1] != 0 {
		t.Fatalf("the other producer matched %v of %d, want all on c", m.Matched, m.TotalBlocks)
	}
	b.EndpointRemoved(eps[2])
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if m := match(t, a, chat("m", system, "first question"), eps); !m.Cold() {
		t.Fatalf("an endpoint removed by one producer still matches for the other: %v", m.Matched)
	}
	if st := a.BackendStats(); st.Backend != "redis" || st.Lookups == 0 || st.Errors != 0 {
		t.Fatalf("backend stats %+v", st)
	}
}

// TestRedisDownMeansNoData: with the server unreachable a request gets no
// prefix data within the timeout, the error is counted, and the pick's
// credit does not fail.
func TestRedisDownMeansNoData(t *testing.T) {
	p := redisProducer(t, "127.0.0.1:1", "down:", "200ms") // nothing listens on port 1
	eps := schedulingtest.Eps(schedulingtest.Ep("a"), schedulingtest.Ep("b"))
	for range 5 {
		r := chat("m", strings.Repeat("x", 1000), "q")
		start := time.Now()
		if err := p.Produce(ctx, r, eps); err != nil {
			t.Fatalf("Produce: %v (want no data, no error)", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Produce took %v with the server down (timeout 200ms)", d)
		}
		if _, ok := plugins.Get(&r.Data, scheduling.PrefixMatchKey(scheduling.DefaultPrefixProducer)); ok {
			t.Fatal("prefix data written though the index did not answer")
		}
		pick(p, r, eps[0], nil)
	}
	if st := p.BackendStats(); st.Errors == 0 || st.Skipped == 0 {
		t.Fatalf("backend stats %+v: want errors, then skipped lookups", st)
	}
}

func TestMemoryBackendStats(t *testing.T) {
	p := newProducer(t, "")
	if st := p.BackendStats(); st.Backend != "" {
		t.Fatalf("memory backend stats %+v", st)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}
