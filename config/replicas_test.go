package config_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/kvindex/kvindextest"
	"github.com/eppkit/eppkit/kvindex/redisindex/redistest"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/requestcontrol/producers/precise"
	"github.com/eppkit/eppkit/requestcontrol/producers/prefix"
	"github.com/eppkit/eppkit/scheduling"
)

// The two-replica tests of docs/replicas.md: picker replicas built from
// the same configuration share one redis-server, and route as one.

const approxReplicaConfig = `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: approx-prefix-cache-producer
  parameters:
    indexBackend: %s
    redis:
      address: %s
      keyPrefix: "%s"
      timeout: 300ms
      mirror: %t
- type: prefix-cache-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
  - pluginRef: max-score-picker
`

func buildReplica(t *testing.T, yaml string, seed uint64) *config.Runtime {
	t.Helper()
	cfg, err := config.Load([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := config.Build(context.Background(), cfg, std.Registry(), config.Options{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// replicaEndpoints are eight endpoints with identical metrics: without prefix
// data every pick is a random tie.
func replicaEndpoints() []*datalayer.Endpoint {
	eps := make([]*datalayer.Endpoint, 8)
	for i := range eps {
		eps[i] = datalayer.New(fmt.Sprint("ep-", i), "127.0.0.1", 8000+i, nil).
			WithMetrics(datalayer.Metrics{UpdateTime: time.Now()})
	}
	return eps
}

func chatRequest(i int) *scheduling.Request {
	system := strings.Repeat(fmt.Sprintf("You are assistant number %d. ", i), 40)
	return &scheduling.Request{ID: fmt.Sprint("r", i), IncomingModel: "m", TargetModel: "m", Body: &parsers.Body{
		Model: "m", Messages: []parsers.Message{{Role: "system", Content: system}, {Role: "user", Content: "hello"}}}}
}

func schedule(t *testing.T, rt *config.Runtime, req *scheduling.Request, eps []*datalayer.Endpoint) string {
	t.Helper()
	req.Data.Reset()
	d, err := rt.Director.Schedule(context.Background(), req, eps)
	if err != nil {
		t.Fatal(err)
	}
	return d.Endpoints[0]
}

func approxOf(t *testing.T, rt *config.Runtime) *prefix.Approx {
	t.Helper()
	p, ok := rt.Plugin(scheduling.DefaultPrefixProducer)
	if !ok {
		t.Fatal("no approx-prefix-cache-producer")
	}
	return p.(*prefix.Approx)
}

// TestReplicasShareApproximateIndex: a prompt routed by replica A is found by
// replica B, which sends it to the same endpoint; with each replica on its
// own memory index B's picks are random. Then redis-server restarts: while
// it is down requests keep flowing (no prefix data, errors counted), and
// routing recovers on its own.
func TestReplicasShareApproximateIndex(t *testing.T) {
	srv := redistest.Start(t)
	eps := replicaEndpoints()
	shared := fmt.Sprintf(approxReplicaConfig, "redis", srv.Addr, "approx-e2e:", false)
	a, b := buildReplica(t, shared, 1), buildReplica(t, shared, 2)
	follow := func(a, b *config.Runtime, from, n int) (same int) {
		for i := from; i < from+n; i++ {
			picked := schedule(t, a, chatRequest(i), eps)
			if err := approxOf(t, a).Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if schedule(t, b, chatRequest(i), eps) == picked {
				same++
			}
		}
		return same
	}
	if same := follow(a, b, 0, 12); same != 12 {
		t.Fatalf("replica B sent %d of 12 prompts where replica A had sent them, want all", same)
	}
	// Control: replicas on their own memory indexes do not agree.
	local := fmt.Sprintf(approxReplicaConfig, "memory", srv.Addr, "unused:", false)
	if same := follow(buildReplica(t, local, 1), buildReplica(t, local, 2), 0, 12); same == 12 {
		t.Fatal("replicas with memory indexes agreed on every pick: the test cannot tell sharing from chance")
	}

	srv.Stop()
	for i := 100; i < 105; i++ {
		start := time.Now()
		schedule(t, b, chatRequest(i), eps) // a pick, without prefix data
		if d := time.Since(start); d > time.Second {
			t.Fatalf("a request took %v with redis-server down (timeout 300ms)", d)
		}
	}
	if st := approxOf(t, b).BackendStats(); st.Errors == 0 {
		t.Fatalf("no error counted with redis-server down: %+v", st)
	}
	srv.Restart()
	deadline := time.Now().Add(10 * time.Second)
	for i := 200; follow(a, b, i, 3) != 3; i += 3 { // three in a row: not a lucky tie
		if time.Now().After(deadline) {
			t.Fatalf("routing did not recover after the restart: %+v", approxOf(t, b).BackendStats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if same := follow(a, b, 300, 8); same != 8 {
		t.Fatalf("after recovery replica B followed A on %d of 8 prompts", same)
	}
}

const preciseReplicaConfig = `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: precise-prefix-cache-producer
  parameters:
    indexBackend: redis
    redis:
      address: %s
      keyPrefix: "precise-e2e:"
      timeout: 300ms
      mirror: %t
    kvEventsConfig:
      mode: %s
      zmqEndpoint: tcp://127.0.0.1:0
- type: prefix-cache-scorer
  parameters:
    prefixMatchInfoProducerName: precise-prefix-cache-producer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
  - pluginRef: max-score-picker
`

// TestReplicasSharePreciseIndex: an engine publishes its KV events to two
// replicas (both subscribed, both applying every batch); a third replica
// that follows no events routes by them too, and the duplicates counted
// nothing twice.
func TestReplicasSharePreciseIndex(t *testing.T) {
	srv := redistest.Start(t)
	eps := replicaEndpoints()
	producer := func(rt *config.Runtime) *precise.Producer {
		p, ok := rt.Plugin(precise.TypeName)
		if !ok {
			t.Fatal("no precise producer")
		}
		return p.(*precise.Producer)
	}
	a := buildReplica(t, fmt.Sprintf(preciseReplicaConfig, srv.Addr, false, "bind"), 1)
	b := buildReplica(t, fmt.Sprintf(preciseReplicaConfig, srv.Addr, false, "bind"), 2)
	reader := buildReplica(t, fmt.Sprintf(preciseReplicaConfig, srv.Addr, false, "none"), 3)
	mirrored := buildReplica(t, fmt.Sprintf(preciseReplicaConfig, srv.Addr, true, "none"), 4)
	engineEp := eps[5]
	for _, rt := range []*config.Runtime{a, b} {
		producer(rt).EndpointAdded(engineEp)
	}

	// The engine: a PUB socket dialling both replicas' bound sockets.
	pub := zmq4.NewPub(context.Background())
	t.Cleanup(func() { pub.Close() })
	for _, rt := range []*config.Runtime{a, b} {
		if err := pub.Dial(producer(rt).Subscriber().Addr()); err != nil {
			t.Fatal(err)
		}
	}
	eng := kvindextest.Engine{Seed: 5, BlockTokens: 16}
	toks := kvindextest.Tokens(5, 16*6)
	ev := eng.Stored(toks, 0, 6, "GPU")
	payload, err := msgpack.Marshal([]any{1.0, []any{[]any{"BlockStored", ev.BlockHashes, nil, ev.TokenIDs, 16, nil, "GPU"}}, 0})
	if err != nil {
		t.Fatal(err)
	}
	topic := "kv@" + engineEp.HostPort() + "@m"
	req := func() *scheduling.Request {
		return &scheduling.Request{ID: "p", IncomingModel: "m", TargetModel: "m", Body: &parsers.Body{Model: "m", TokenIDs: toks}}
	}
	applied := func(rt *config.Runtime) bool { return producer(rt).Subscriber().Stats().Applied > 0 }
	deadline := time.Now().Add(10 * time.Second)
	for !applied(a) || !applied(b) { // subscriptions take a moment to reach the publisher
		if time.Now().After(deadline) {
			t.Fatal("the replicas never received the engine's events")
		}
		if err := pub.Send(zmq4.NewMsgFrom([]byte(topic), binary.BigEndian.AppendUint64(nil, 0), payload)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := producer(mirrored).Flush(context.Background()); err != nil { // its copy has read the batch
		t.Fatal(err)
	}
	for i, rt := range []*config.Runtime{reader, a, b, mirrored} {
		r := req()
		if got := schedule(t, rt, r, eps); got != engineEp.HostPort() {
			t.Fatalf("replica %d picked %s, want %s (the engine holding the prompt)", i, got, engineEp.HostPort())
		}
		m, _ := plugins.Get(&r.Data, scheduling.PrefixMatchKey(precise.TypeName))
		if got := m.MatchedFor(engineEp, 5); got != 6 || m.TotalBlocks != 6 {
			t.Fatalf("replica %d matched %v of %d blocks, want 6 of 6", i, got, m.TotalBlocks)
		}
	}
	if st := producer(reader).BackendStats(); st.Lookups == 0 || st.Errors != 0 {
		t.Fatalf("reader backend stats %+v", st)
	}
	if st := producer(mirrored).BackendStats(); st.MirrorLookups != 1 || st.Lookups != 0 || st.Errors != 0 {
		t.Fatalf("mirroring reader backend stats %+v: want its lookup from its copy", st)
	}
}

// TestReplicasShareApproximateIndexMirror: a replica with redis.mirror
// routes a prompt replica A routed to the same endpoint, from its own copy
// of the shared index.
func TestReplicasShareApproximateIndexMirror(t *testing.T) {
	srv := redistest.Start(t)
	eps := replicaEndpoints()
	a := buildReplica(t, fmt.Sprintf(approxReplicaConfig, "redis", srv.Addr, "approx-mirror:", false), 1)
	b := buildReplica(t, fmt.Sprintf(approxReplicaConfig, "redis", srv.Addr, "approx-mirror:", true), 2)
	for i := range 12 {
		picked := schedule(t, a, chatRequest(i), eps)
		for _, rt := range []*config.Runtime{a, b} { // A's credit written, B's copy up to date
			if err := approxOf(t, rt).Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if got := schedule(t, b, chatRequest(i), eps); got != picked {
			t.Fatalf("prompt %d: replica B picked %s, replica A %s", i, got, picked)
		}
	}
	if st := approxOf(t, b).BackendStats(); st.MirrorLookups != 12 || st.Lookups != 0 || st.Errors != 0 {
		t.Fatalf("replica B backend stats %+v: want every lookup from its copy", st)
	}
}
