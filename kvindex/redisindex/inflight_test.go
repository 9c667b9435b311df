package redisindex_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eppkit/eppkit/kvindex/redisindex"
	"github.com/eppkit/eppkit/kvindex/redisindex/redistest"
)

// counts stands in for a replica's load tracker.
type counts struct {
	mu sync.Mutex
	m  map[string][2]int64
}

func (c *counts) set(endpoint string, requests, tokens int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string][2]int64{}
	}
	c.m[endpoint] = [2]int64{requests, tokens}
}

func (c *counts) each(yield func(string, int64, int64)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e, v := range c.m {
		yield(e, v[0], v[1])
	}
}

// replica starts an InFlight publishing local's counts to addr every 10ms.
func replica(t *testing.T, addr, id string, expiry time.Duration, local *counts) *redisindex.InFlight {
	t.Helper()
	f, err := redisindex.NewInFlight(
		redisindex.Config{Address: addr, KeyPrefix: "if:", Timeout: 300 * time.Millisecond, RetryAfter: 50 * time.Millisecond},
		redisindex.InFlightConfig{ReplicaID: id, Interval: 10 * time.Millisecond, Expiry: expiry, Local: local.each})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// eventually polls cond until it holds, failing the test after 10 seconds.
func eventually(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("after 10s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

func remoteIs(f *redisindex.InFlight, endpoint string, requests, tokens int64) func() bool {
	return func() bool {
		r, tok := f.Remote(endpoint)
		return r == requests && tok == tokens
	}
}

// TestInFlightAcrossReplicas: what replica A has in flight shows in B's view
// after a publish, changes and completions follow, and A never counts its
// own twice. A replica that closes withdraws its counts at once.
func TestInFlightAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	var la, lb, lc counts
	a := replica(t, srv.Addr, "a", 5*time.Second, &la)
	b := replica(t, srv.Addr, "b", 5*time.Second, &lb)
	la.set("10.0.0.1:8000", 3, 300)
	lb.set("10.0.0.1:8000", 1, 10)
	lb.set("10.0.0.2:8000", 2, 0)
	eventually(t, "B sees A's 3 requests, 300 tokens", remoteIs(b, "10.0.0.1:8000", 3, 300))
	eventually(t, "A sees B's counts", func() bool {
		return remoteIs(a, "10.0.0.1:8000", 1, 10)() && remoteIs(a, "10.0.0.2:8000", 2, 0)()
	})
	if r, tok := b.Remote("10.0.0.2:8000"); r != 0 || tok != 0 {
		t.Errorf("B counts its own load as remote: %d %d", r, tok)
	}
	la.set("10.0.0.1:8000", 1, 0) // two completed, the third's prefill done
	eventually(t, "B sees A's load fall to 1 request", remoteIs(b, "10.0.0.1:8000", 1, 0))

	// A third replica adds up with A.
	c := replica(t, srv.Addr, "c", 5*time.Second, &lc)
	lc.set("10.0.0.1:8000", 4, 40)
	eventually(t, "B sums A and C", remoteIs(b, "10.0.0.1:8000", 5, 40))
	// C closes cleanly: its counts go at once, not after the 5s expiry.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if d := eventually(t, "C's counts withdrawn", remoteIs(b, "10.0.0.1:8000", 1, 0)); d > 2*time.Second {
		t.Errorf("C's counts lasted %v after Close", d)
	}
	la.set("10.0.0.1:8000", 0, 0)
	eventually(t, "B sees A idle", remoteIs(b, "10.0.0.1:8000", 0, 0))
	if st := b.BackendStats(); st.Writes == 0 {
		t.Errorf("B's backend stats %+v", st)
	}
}

// TestInFlightDeadReplicaExpires: replica A loses the server without a
// chance to clean up (its connections are cut, as if it were killed): its
// counts drop out of B's view after the expiry, and A falls back to its own
// counts only.
func TestInFlightDeadReplicaExpires(t *testing.T) {
	srv := redistest.Start(t)
	proxy := srv.Proxy(t)
	var la, lb counts
	const expiry = 500 * time.Millisecond
	a := replica(t, proxy.Addr, "a", expiry, &la)
	b := replica(t, srv.Addr, "b", expiry, &lb)
	la.set("e:1", 2, 20)
	lb.set("e:1", 5, 50)
	eventually(t, "B sees A", remoteIs(b, "e:1", 2, 20))
	eventually(t, "A sees B", remoteIs(a, "e:1", 5, 50))
	proxy.Cut()
	// A had no chance to withdraw: its hash is there until it expires.
	if n, err := srv.Do(time.Second, "EXISTS", "if:f:r:a"); err != nil || n != "1" {
		t.Fatalf("A's hash right after the cut: %q %v, want it still there", n, err)
	}
	eventually(t, "A's counts expire from B's view", remoteIs(b, "e:1", 0, 0))
	if n, err := srv.Do(time.Second, "EXISTS", "if:f:r:a"); err != nil || n != "0" {
		t.Errorf("A's hash after B dropped it: %q %v, want it expired", n, err)
	}
	eventually(t, "A falls back to its own counts", remoteIs(a, "e:1", 0, 0))
	if st := a.BackendStats(); st.Errors == 0 {
		t.Errorf("A counted no error without a server: %+v", st)
	}
	// The dead replica left the set of replicas too.
	eventually(t, "A pruned from the replicas set", func() bool {
		out, err := srv.Do(time.Second, "SMEMBERS", "if:f:replicas")
		return err == nil && out == "b"
	})
}

// TestInFlightServerRestart: while the server is down each replica counts
// its own load only; when it is back (empty) the replicas publish again and
// see each other, with no help.
func TestInFlightServerRestart(t *testing.T) {
	srv := redistest.Start(t)
	var la, lb counts
	a := replica(t, srv.Addr, "a", 500*time.Millisecond, &la)
	b := replica(t, srv.Addr, "b", 500*time.Millisecond, &lb)
	la.set("e:1", 2, 20) // unchanged across the restart: A must notice the server lost it
	lb.set("e:2", 1, 1)
	eventually(t, "B sees A", remoteIs(b, "e:1", 2, 20))
	srv.Stop()
	eventually(t, "B falls back to its own counts", remoteIs(b, "e:1", 0, 0))
	if st := b.BackendStats(); st.Errors == 0 {
		t.Errorf("no error counted with the server down: %+v", st)
	}
	srv.Restart()
	eventually(t, "B sees A again", remoteIs(b, "e:1", 2, 20))
	eventually(t, "A sees B again", remoteIs(a, "e:2", 1, 1))
	// The server loses everything between two publishes (a failover to an
	// empty node, no error seen): A's heartbeat finds its counts gone and
	// publishes them again.
	if _, err := srv.Do(time.Second, "FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "A republishes after FLUSHALL", func() bool {
		n, err := srv.Do(time.Second, "EXISTS", "if:f:r:a")
		return err == nil && n == "1"
	})
	eventually(t, "B sees A after FLUSHALL", remoteIs(b, "e:1", 2, 20))
}

// TestInFlightForeignFields: fields another writer left malformed are
// skipped; a replica's hash that expires leaves every view.
func TestInFlightForeignFields(t *testing.T) {
	srv := redistest.Start(t)
	var lb counts
	b := replica(t, srv.Addr, "b", time.Second, &lb)
	for _, cmd := range [][]string{
		{"HSET", "if:f:r:ghost", "e:1", "2 20", "e:2", "garbage", "e:3", "1"},
		{"PEXPIRE", "if:f:r:ghost", "400"},
		{"SADD", "if:f:replicas", "ghost"},
	} {
		if _, err := srv.Do(time.Second, cmd...); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "B reads the ghost's well-formed field", remoteIs(b, "e:1", 2, 20))
	for _, e := range []string{"e:2", "e:3"} {
		if r, tok := b.Remote(e); r != 0 || tok != 0 {
			t.Errorf("malformed %s read as %d %d", e, r, tok)
		}
	}
	eventually(t, "the ghost expires", remoteIs(b, "e:1", 0, 0))
}

func TestInFlightConfig(t *testing.T) {
	local := (&counts{}).each
	for _, tc := range []struct {
		cfg  redisindex.Config
		icfg redisindex.InFlightConfig
		want string
	}{
		{redisindex.Config{Address: "127.0.0.1:1"}, redisindex.InFlightConfig{}, "Local is required"},
		{redisindex.Config{Address: "127.0.0.1:1"}, redisindex.InFlightConfig{Local: local, Interval: -1}, "≥ 0"},
		{redisindex.Config{Address: "127.0.0.1:1"}, redisindex.InFlightConfig{Local: local, Interval: time.Second, Expiry: time.Second}, "at least twice"},
		{redisindex.Config{Address: "nohostport"}, redisindex.InFlightConfig{Local: local}, "host:port"},
	} {
		f, err := redisindex.NewInFlight(tc.cfg, tc.icfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one containing %q", tc.icfg, err, tc.want)
		}
		if f != nil {
			f.Close()
		}
	}
	a, err := redisindex.NewInFlight(redisindex.Config{Address: "127.0.0.1:1"}, redisindex.InFlightConfig{Local: local})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := redisindex.NewInFlight(redisindex.Config{Address: "127.0.0.1:1"}, redisindex.InFlightConfig{Local: local})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.ReplicaID() == b.ReplicaID() || len(a.ReplicaID()) != 16 {
		t.Errorf("random replica ids %q and %q", a.ReplicaID(), b.ReplicaID())
	}
}

// Two replicas sharing their in-flight counts: each sees the other's after
// a publish, without counting its own twice.
func ExampleInFlight() {
	// A replica's own counts come from its load tracker; here, fixed.
	own := func(yield func(endpoint string, requests, tokens int64)) { yield("10.0.0.1:8000", 3, 300) }
	f, err := redisindex.NewInFlight(redisindex.Config{Address: "127.0.0.1:1"}, // no server there
		redisindex.InFlightConfig{ReplicaID: "picker-0", Local: own})
	if err != nil {
		panic(err)
	}
	defer f.Close()
	// Without a server the other replicas' counts are unknown: zero, and
	// the load scorers see this replica's own counts only.
	fmt.Println(f.ReplicaID())
	fmt.Println(f.Remote("10.0.0.1:8000"))
	// Output:
	// picker-0
	// 0 0
}
