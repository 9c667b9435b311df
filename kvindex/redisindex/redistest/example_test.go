package redistest_test

import (
	"testing"
	"time"

	"github.com/eppkit/eppkit/kvindex/redisindex/redistest"
)

// A test starts a server, talks to it, and restarts it to see what a
// failover does; the server stops when the test ends.
func Example() {
	test := func(t *testing.T) {
		srv := redistest.Start(t) // skipped without redis-server, failed with EPPKIT_REQUIRE_REDIS=1
		if _, err := srv.Do(time.Second, "SET", "k", "v"); err != nil {
			t.Fatal(err)
		}
		srv.Restart() // empty again: no persistence
		if v, err := srv.Do(time.Second, "EXISTS", "k"); err != nil || v != "0" {
			t.Fatalf("EXISTS k: %q %v", v, err)
		}
	}
	_ = test
}
