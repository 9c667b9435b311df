package redisindex_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/kvindex/kvindextest"
	"github.com/eppkit/eppkit/kvindex/redisindex"
	"github.com/eppkit/eppkit/kvindex/redisindex/redistest"
)

// prefixes gives every index of a test run its own key prefix on a shared
// server.
var prefixes atomic.Int64

// mirrored makes testConfig's indexes keep a mirror (TestWithMirror).
var mirrored bool

func testConfig(srv *redistest.Server) redisindex.Config {
	return redisindex.Config{
		Address:   srv.Addr,
		KeyPrefix: fmt.Sprintf("t%d:", prefixes.Add(1)),
		Timeout:   time.Second, // -race on a busy machine; the timeout tests set their own
		Mirror:    mirrored,
	}
}

func newPrefix(t testing.TB, cfg redisindex.Config, icfg kvindex.PrefixIndexConfig) *redisindex.PrefixIndex {
	t.Helper()
	x, err := redisindex.NewPrefixIndex(cfg, icfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	return x
}

func newEvents(t testing.TB, cfg redisindex.Config, icfg kvindex.EventIndexConfig) *redisindex.EventIndex {
	t.Helper()
	x, err := redisindex.NewEventIndex(cfg, icfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	return x
}

// The Redis indexes pass the conformance suites of the in-memory ones.

func TestPrefixIndexConformance(t *testing.T) {
	srv := redistest.Start(t)
	kvindextest.TestPrefixStore(t, func(t *testing.T, icfg kvindex.PrefixIndexConfig) kvindex.PrefixStore {
		return newPrefix(t, testConfig(srv), icfg)
	})
}

func TestEventIndexConformance(t *testing.T) {
	srv := redistest.Start(t)
	kvindextest.TestEventStore(t, func(t *testing.T, icfg kvindex.EventIndexConfig) kvindex.EventStore {
		return newEvents(t, testConfig(srv), icfg)
	})
}

// So do they with a mirror: lookups read the replica's copy, kept from the
// change log.

func TestPrefixIndexConformanceMirror(t *testing.T) {
	srv := redistest.Start(t)
	kvindextest.TestPrefixStore(t, func(t *testing.T, icfg kvindex.PrefixIndexConfig) kvindex.PrefixStore {
		cfg := testConfig(srv)
		cfg.Mirror = true
		return newPrefix(t, cfg, icfg)
	})
}

func TestEventIndexConformanceMirror(t *testing.T) {
	srv := redistest.Start(t)
	kvindextest.TestEventStore(t, func(t *testing.T, icfg kvindex.EventIndexConfig) kvindex.EventStore {
		cfg := testConfig(srv)
		cfg.Mirror = true
		return newEvents(t, cfg, icfg)
	})
}
