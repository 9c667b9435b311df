package kvindex_test

import (
	"testing"

	"github.com/eppkit/eppkit/kvindex"
	"github.com/eppkit/eppkit/kvindex/kvindextest"
)

// The in-memory indexes pass the conformance suites they define.

func TestPrefixIndexConformance(t *testing.T) {
	kvindextest.TestPrefixStore(t, func(_ *testing.T, cfg kvindex.PrefixIndexConfig) kvindex.PrefixStore {
		return kvindex.NewPrefixIndex(cfg)
	})
}

func TestEventIndexConformance(t *testing.T) {
	kvindextest.TestEventStore(t, func(t *testing.T, cfg kvindex.EventIndexConfig) kvindex.EventStore {
		x, err := kvindex.NewEventIndex(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return x
	})
}
