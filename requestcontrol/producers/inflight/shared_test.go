package inflight_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eppkit/eppkit/kvindex/redisindex/redistest"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins/pluginstest"
	"github.com/eppkit/eppkit/requestcontrol/producers/inflight"
	"github.com/eppkit/eppkit/scheduling"
	. "github.com/eppkit/eppkit/scheduling/schedulingtest"
	"github.com/eppkit/eppkit/scheduling/scorers"
)

// sharedReplica builds an inflight-load-producer sharing its counts through
// the server at addr, publishing every 10ms.
func sharedReplica(t *testing.T, addr, id string) *inflight.Producer {
	t.Helper()
	return pluginstest.Build[*inflight.Producer](t, registry(), "inflight-load-producer", fmt.Sprintf(
		`{"indexBackend":"redis","redis":{"address":%q,"keyPrefix":"inflight-test:","timeout":"300ms"},"syncInterval":"10ms","expiry":"1s","replicaID":%q}`,
		addr, id))
}

// until polls cond until it holds, failing the test after 10 seconds.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func inFlightIs(p *inflight.Producer, e *scheduling.Endpoint, requests, tokens int64) func() bool {
	return func() bool {
		r, tok := p.InFlight(e)
		return r == requests && tok == tokens
	}
}

// start sends n requests of 100 prompt tokens through p to e.
func start(t *testing.T, p *inflight.Producer, e *scheduling.Endpoint, n int) []*scheduling.Request {
	t.Helper()
	var reqs []*scheduling.Request
	for range n {
		req := Req("m").Prompt(string(make([]byte, 400))).Build()
		p.PreRequest(ctx, req, pickResult(e))
		reqs = append(reqs, req)
	}
	return reqs
}

// TestReplicasShareInFlight: requests in flight through replica A count in
// replica B's load scorers after a publish; A's first chunks and
// completions lower them; each replica counts its own once.
func TestReplicasShareInFlight(t *testing.T) {
	srv := redistest.Start(t)
	a, b := sharedReplica(t, srv.Addr, "a"), sharedReplica(t, srv.Addr, "b")
	eps := Eps(Ep("x"), Ep("y"), Ep("z"))
	onA := start(t, a, eps[0], 3)
	start(t, b, eps[1], 1)
	if r, tok := b.InFlight(eps[1]); r != 1 || tok != 100 {
		t.Fatalf("B's own request counted %d %d, want 1 100 at once", r, tok)
	}
	until(t, "B sees A's 3 requests on x", inFlightIs(b, eps[0], 3, 300))
	until(t, "A sees B's request on y", inFlightIs(a, eps[1], 1, 100))
	if r, tok := a.InFlight(eps[0]); r != 3 || tok != 300 {
		t.Errorf("A counts its own requests as %d %d, want 3 300", r, tok)
	}

	// B's scorers rank by the cluster's load: x (3 via A) is the busiest.
	active := &scorers.ActiveRequest{}
	active.SetDefaults()
	until(t, "B's active-request scores rank x busiest", func() bool {
		req := Req("m").Prompt("abcd").Build()
		if err := b.Produce(ctx, req, eps); err != nil {
			t.Fatal(err)
		}
		got := Score(active, req, eps...)
		return got[0] == 0 && got[1] == 2.0/3 && got[2] == 1
	})

	for _, r := range onA {
		a.ResponseChunk(ctx, r, nil, []byte("x"))
	}
	until(t, "B sees A's tokens released", inFlightIs(b, eps[0], 3, 0))
	for _, r := range onA[:2] {
		a.ResponseComplete(ctx, r, nil, parsers.Usage{}, nil)
	}
	until(t, "B sees A's completions", inFlightIs(b, eps[0], 1, 0))
	if st := b.BackendStats(); st.Backend != "redis" || st.Writes == 0 {
		t.Errorf("B's backend stats %+v", st)
	}
}

// TestDeadReplicaAndRestart: replica A is cut off without cleaning up (as
// if killed): its requests leave B's counts after the expiry, and A goes on
// with its own. Then the server restarts empty: B counts its own only while
// it is down, and sees A's requests again when it is back.
func TestDeadReplicaAndRestart(t *testing.T) {
	srv := redistest.Start(t)
	proxy := srv.Proxy(t)
	a, b := sharedReplica(t, proxy.Addr, "a"), sharedReplica(t, srv.Addr, "b")
	c := sharedReplica(t, srv.Addr, "c")
	e := Ep("x").Build()
	start(t, a, e, 2)
	start(t, b, e, 1)
	start(t, c, e, 4)
	until(t, "B sees A and C", inFlightIs(b, e, 7, 700))
	proxy.Cut()
	until(t, "A's requests leave B's counts", inFlightIs(b, e, 5, 500))
	until(t, "A falls back to its own requests", inFlightIs(a, e, 2, 200))
	if st := a.BackendStats(); st.Errors == 0 {
		t.Errorf("A counted no error cut off from the server: %+v", st)
	}

	srv.Stop()
	until(t, "B falls back to its own request", inFlightIs(b, e, 1, 100))
	srv.Restart()
	until(t, "B sees C again after the restart", inFlightIs(b, e, 5, 500))
	until(t, "C sees B again after the restart", inFlightIs(c, e, 5, 500))
}

func TestSharedParameters(t *testing.T) {
	for params, want := range map[string]string{
		`{"indexBackend":"redis"}`: "redis.address: required",
		`{"indexBackend":"disk"}`:  "indexBackend",
		`{"indexBackend":"redis","redis":{"address":"127.0.0.1:6379"},"syncInterval":"100ms","expiry":"150ms"}`: "expiry: must be at least twice syncInterval",
		`{"indexBackend":"redis","redis":{"address":"127.0.0.1:6379"},"syncInterval":"0s"}`:                     "syncInterval: must be > 0",
	} {
		_, err := registry().Build("inflight-load-producer", "x", []byte(params))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", params, err, want)
		}
	}
	// The memory backend ignores the sharing parameters.
	p := pluginstest.Build[*inflight.Producer](t, registry(), "inflight-load-producer", `{"syncInterval":"0s"}`)
	if st := p.BackendStats(); st.Backend != "" {
		t.Errorf("memory backend stats %+v", st)
	}
}
