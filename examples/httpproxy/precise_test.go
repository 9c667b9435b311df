package httpproxy

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/eppkit/eppkit/examples/fakeserver"
	"github.com/eppkit/eppkit/requestcontrol/producers/precise"
)

// freePort returns a TCP port free on 127.0.0.1 now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestPreciseRouting: the fake servers publish their KV-cache events to the
// picker's subscriber (bind mode); a prompt served directly by one server
// (so no routing decision could have taught the picker) is indexed from its
// events, and the next request sharing that prefix is sent there. Token ids
// come from the servers' render endpoints.
func TestPreciseRouting(t *testing.T) {
	leakCheck(t)
	events := fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
	fc := fakeserver.Config{KVEvents: &fakeserver.KVEvents{Endpoint: events}}
	e := newEnv(t, envConfig{fake: three(fc), yaml: header + `
plugins:
- type: precise-prefix-cache-producer
  parameters:
    kvEventsConfig:
      mode: bind
      zmqEndpoint: ` + events + `
    render:
      enabled: true
- type: prefix-cache-scorer
  parameters:
    prefixMatchInfoProducerName: precise-prefix-cache-producer
- type: queue-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
    weight: 3
  - pluginRef: queue-scorer
  - pluginRef: max-score-picker
`})
	p, ok := e.rt.Plugin(precise.TypeName)
	if !ok {
		t.Fatal("no precise producer")
	}
	index, sub := p.(*precise.Producer).Index(), p.(*precise.Producer).Subscriber()
	// ZeroMQ drops what a publisher sends before the subscription reaches
	// it: send throwaway prompts to each server until its events arrive.
	for i, f := range e.fakes {
		for try := 0; ; try++ {
			before := sub.Stats().Applied
			directPost(t, e, f, chat("fake-model", fmt.Sprintf("warm-up %d %d %s", i, try, strings.Repeat("w ", 40))))
			deadline := time.Now().Add(200 * time.Millisecond)
			for sub.Stats().Applied == before && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if sub.Stats().Applied > before {
				break
			}
			if try == 50 {
				t.Fatalf("no KV events from %s", f.Addr())
			}
		}
	}
	for round, home := range []int{2, 0, 1} {
		system := strings.Repeat(fmt.Sprintf("Round %d shared context, long enough for many blocks. ", round), 40)
		// Served behind the picker's back: only the engine's events can
		// tell where this prefix is.
		before := index.Len()
		if status := directPost(t, e, e.fakes[home], chat("fake-model", system+"first question")); status != 200 {
			t.Fatalf("direct request: status %d", status)
		}
		e.waitFor("the KV events to be indexed", func() bool { return index.Len() > before })
		for i := range 3 {
			r, body := e.post("/v1/chat/completions", chat("fake-model", system+fmt.Sprintf("follow-up %d", i)))
			if got := r.Header.Get(fakeserver.HeaderServedBy); r.StatusCode != 200 || got != e.fakes[home].Addr() {
				t.Fatalf("round %d request %d: %d from %s, the prefix is on %s: %s", round, i, r.StatusCode, got, e.fakes[home].Addr(), body)
			}
		}
	}
	st := sub.Stats()
	if st.Applied == 0 || st.Malformed != 0 {
		t.Errorf("subscriber stats %+v", st)
	}
}

// directPost sends body to a fake server, not through the proxy.
func directPost(t *testing.T, e *env, f *fakeserver.Server, body string) int {
	t.Helper()
	resp, err := e.client.Post(f.URL()+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
