package config_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/kvindex/redisindex/redistest"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/requestcontrol/producers/inflight"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/scorers"
)

const inflightReplicaConfig = `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: inflight-load-producer
  parameters:
    indexBackend: %s
    redis:
      address: %s
      keyPrefix: "inflight-e2e:"
      timeout: 300ms
    syncInterval: 10ms
    expiry: 1s
- type: active-request-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: active-request-scorer
  - pluginRef: max-score-picker
`

func inflightOf(t *testing.T, rt *config.Runtime) *inflight.Producer {
	t.Helper()
	p, ok := rt.Plugin(scorers.DefaultInFlightProducer)
	if !ok {
		t.Fatal("no inflight-load-producer")
	}
	return p.(*inflight.Producer)
}

// TestReplicasShareInFlightLoad: replica A sends three requests to ep-0;
// replica B, built from the same configuration, then sends every request to
// ep-1, the endpoint the cluster has least in flight on. When A's requests
// complete B sees ep-0 idle again. With the memory backend B knows nothing
// of A's requests and its picks are ties.
func TestReplicasShareInFlightLoad(t *testing.T) {
	srv := redistest.Start(t)
	eps := replicaEndpoints()[:2]
	bPicks := func(a, b *config.Runtime, wait bool) (onIdle int) {
		var open []*scheduling.Request
		for i := range 3 {
			req := chatRequest(i)
			if got := schedule(t, a, req, eps[:1]); got != eps[0].HostPort() {
				t.Fatalf("A picked %s from the one candidate %s", got, eps[0].HostPort())
			}
			open = append(open, req)
		}
		if wait {
			waitFor(t, "B sees A's 3 requests on ep-0", func() bool {
				n, _ := inflightOf(t, b).InFlight(eps[0])
				return n == 3
			})
		}
		for i := 10; i < 18; i++ {
			req := chatRequest(i)
			if schedule(t, b, req, eps) == eps[1].HostPort() {
				onIdle++
			}
			b.Director.Complete(context.Background(), req, nil, parsers.Usage{}, nil)
		}
		for _, req := range open {
			a.Director.Complete(context.Background(), req, eps[0], parsers.Usage{}, nil)
		}
		return onIdle
	}
	shared := fmt.Sprintf(inflightReplicaConfig, "redis", srv.Addr)
	a, b := buildReplica(t, shared, 1), buildReplica(t, shared, 2)
	if n := bPicks(a, b, true); n != 8 {
		t.Fatalf("replica B sent %d of 8 requests to the endpoint idle across replicas, want 8", n)
	}
	waitFor(t, "B sees A's requests complete", func() bool {
		n, _ := inflightOf(t, b).InFlight(eps[0])
		return n == 0
	})
	if st := inflightOf(t, b).BackendStats(); st.Writes == 0 {
		t.Errorf("B's backend stats %+v", st)
	}

	// Control: replicas counting only their own requests do not agree.
	local := fmt.Sprintf(inflightReplicaConfig, "memory", srv.Addr)
	if n := bPicks(buildReplica(t, local, 1), buildReplica(t, local, 2), false); n == 8 {
		t.Fatal("with memory backends B avoided A's endpoint on every pick: the test cannot tell sharing from chance")
	}
}

// waitFor polls cond until it holds, failing the test after 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
